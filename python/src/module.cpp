// SPDX-License-Identifier: Apache-2.0
//
// pyaccl._pyaccl: the driver as pyaccl/accl.py needs it. Every argument is
// explicit here (defaults, dtype and count conversions live in Python).
// Every call that may wait for a device releases the GIL, so ranks driven
// from Python threads (seed 000) progress together. Driver errors become the
// exception classes of pyaccl/errors.py.
#include "native.hpp"

#include <accl/error.hpp>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <exception>
#include <string>
#include <tuple>
#include <vector>

namespace py = pybind11;

namespace pyaccl {
namespace {

using accl::BaseBuffer;
using accl::RequestPtr;
using DataType = accl::dataType;
// The requests a call waits for (pyaccl's waitfor=), resolved by the driver
// and the device: see accl/device.hpp Device::start.
using Waitfor = std::vector<RequestPtr>;

// Raises the pyaccl.errors exception for a driver error. The classes live in
// Python so they can carry Python-side conveniences (ErrorCode members);
// if the package is not importable (the module used on its own) a plain
// RuntimeError still carries the message.
void raise_driver_error(const char* kind, const accl::Error& e, uint32_t retcode) {
  try {
    py::object factory = py::module_::import("pyaccl.errors").attr("_from_native");
    py::object exc = factory(kind, e.what(), e.call(), e.rank(), retcode);
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  } catch (py::error_already_set&) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
}

void translate_driver_errors(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const accl::DeviceError& e) {
    raise_driver_error("device", e, e.retcode());
  } catch (const accl::TimeoutError& e) {
    raise_driver_error("timeout", e, 0);
  } catch (const accl::ArgumentError& e) {
    raise_driver_error("argument", e, 0);
  } catch (const accl::Error& e) {
    raise_driver_error("error", e, 0);
  }
}

// Runs a driver call without the GIL; the call may block for as long as the
// device timeout.
template <typename F>
RequestPtr without_gil(F&& call) {
  py::gil_scoped_release release;
  return call();
}

accl::reduceFunction reduce_function(uint32_t f) { return static_cast<accl::reduceFunction>(f); }

using RankTuple = std::tuple<std::string, int, int, uint64_t>;  // ip, port, session id, max segment bytes

std::vector<RankSpec> rank_specs(const std::vector<RankTuple>& ranks) {
  std::vector<RankSpec> specs;
  specs.reserve(ranks.size());
  for (const auto& [ip, port, session, max_segment] : ranks) specs.push_back(RankSpec{ip, port, session, max_segment});
  return specs;
}

std::vector<RankTuple> rank_tuples(const std::vector<accl::rank_t>& ranks) {
  std::vector<RankTuple> out;
  out.reserve(ranks.size());
  for (const auto& r : ranks) out.emplace_back(r.ip, r.port, r.session_id, r.max_segment_size);
  return out;
}

// Non-throwing completion check, so pyaccl can drop finished requests of
// handles the user never waited for without raising their errors there.
bool request_done(accl::Request& request) {
  try {
    return request.test();
  } catch (const accl::Error&) {
    return true;  // failed: complete; wait() on the handle reports it
  }
}

void bind_types(py::module_& m) {
  py::enum_<DataType>(m, "DataType")
      .value("none", DataType::none)
      .value("int8", DataType::int8)
      .value("float16", DataType::float16)
      .value("float32", DataType::float32)
      .value("float64", DataType::float64)
      .value("int32", DataType::int32)
      .value("int64", DataType::int64)
      .value("int16", DataType::int16)
      .value("uint8", DataType::uint8)
      .value("uint16", DataType::uint16)
      .value("uint32", DataType::uint32)
      .value("uint64", DataType::uint64)
      .value("int32_int", DataType::int32_int)
      .value("float32_int", DataType::float32_int)
      .value("float64_int", DataType::float64_int)
      .value("int64_int", DataType::int64_int)
      .value("int16_int", DataType::int16_int)
      .value("float32_float32", DataType::float32_float32)
      .value("float64_float64", DataType::float64_float64);

  py::class_<accl::ArithConfig>(m, "ArithConfig")
      .def(py::init<>())
      .def_readwrite("uncompressed_elem_bytes", &accl::ArithConfig::uncompressed_elem_bytes)
      .def_readwrite("compressed_elem_bytes", &accl::ArithConfig::compressed_elem_bytes)
      .def_readwrite("elem_ratio_log", &accl::ArithConfig::elem_ratio_log)
      .def_readwrite("compressor_tdest", &accl::ArithConfig::compressor_tdest)
      .def_readwrite("decompressor_tdest", &accl::ArithConfig::decompressor_tdest)
      .def_readwrite("arith_is_compressed", &accl::ArithConfig::arith_is_compressed)
      .def_readwrite("arith_tdest", &accl::ArithConfig::arith_tdest);

  m.def("default_arith_config", [] { return accl::default_arith_config(); },
        "The driver's default arithmetic configurations: {(DataType, DataType): ArithConfig}.");
  m.def("error_bit_names", &accl::error_bit_names, py::arg("retcode"), "Names of the set RETCODE bits.");
  m.def("have_hardware_backend", &have_hardware_backend);
}

void bind_request(py::module_& m) {
  py::class_<accl::Request, RequestPtr>(m, "Request")
      .def("wait", [](accl::Request& r) { py::gil_scoped_release release; r.wait(); },
           "Waits for completion (bounded by the device timeout); raises the call's error.")
      .def("wait_for", [](accl::Request& r, int64_t timeout_ms) {
             py::gil_scoped_release release;
             return r.wait(std::chrono::milliseconds(timeout_ms));
           }, py::arg("timeout_ms"), "True when complete within timeout_ms; raises the call's error.")
      .def("test", [](accl::Request& r) { py::gil_scoped_release release; return r.test(); },
           "True once complete; raises the call's error.")
      .def("done", [](accl::Request& r) { py::gil_scoped_release release; return request_done(r); },
           "True once complete or failed; never raises.")
      .def_property_readonly("retcode", &accl::Request::retcode)
      .def_property_readonly("duration_ns", &accl::Request::duration_ns)
      .def_property_readonly("call_name", &accl::Request::call_name);
}

void bind_buffer(py::module_& m) {
  // Exposes the host memory as raw bytes; pyaccl.buffer.ACCLBuffer is a numpy
  // array over it (numpy keeps this object alive as the array's base).
  py::class_<NativeBuffer, std::shared_ptr<NativeBuffer>>(m, "Buffer", py::buffer_protocol())
      .def_buffer([](NativeBuffer& b) {
        const BaseBuffer& buf = b.get();
        return py::buffer_info(buf.byte_array(), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(buf.size())}, {py::ssize_t{1}}, /*readonly=*/false);
      })
      .def("sync_to_device", [](NativeBuffer& b) { py::gil_scoped_release release; b.get().sync_to_device(); })
      .def("sync_from_device", [](NativeBuffer& b) { py::gil_scoped_release release; b.get().sync_from_device(); })
      .def("slice", &NativeBuffer::slice, py::arg("start"), py::arg("end"))
      .def_property_readonly("address", [](const NativeBuffer& b) { return b.get().address(); })
      .def_property_readonly("host_address",
                             [](const NativeBuffer& b) { return reinterpret_cast<uintptr_t>(b.get().byte_array()); })
      .def_property_readonly("nbytes", [](const NativeBuffer& b) { return b.get().size(); })
      .def_property_readonly("length", [](const NativeBuffer& b) { return b.get().length(); })
      .def_property_readonly("type", [](const NativeBuffer& b) { return b.get().type(); })
      .def_property_readonly("host_only", [](const NativeBuffer& b) { return b.get().is_host_only(); });
}

void bind_driver(py::module_& m) {
  py::class_<Driver, std::shared_ptr<Driver>> d(m, "Driver");

  // --- configuration ---
  d.def("initialize",
        [](Driver& self, const std::vector<RankTuple>& ranks, int local_rank, unsigned nbufs, size_t bufsize,
           size_t max_eager_size, size_t max_rendezvous_size) {
          const std::vector<RankSpec> specs = rank_specs(ranks);
          py::gil_scoped_release release;
          initialize(self, specs, local_rank, nbufs, bufsize, max_eager_size, max_rendezvous_size);
        },
        py::arg("ranks"), py::arg("local_rank"), py::arg("nbufs"), py::arg("bufsize"), py::arg("max_eager_size"),
        py::arg("max_rendezvous_size"));
  d.def("deinit", [](Driver& self) { py::gil_scoped_release release; self.accl().deinit(); });
  d.def_property_readonly("initialized", [](Driver& self) { return self.accl().initialized(); });
  d.def_property_readonly("device_name", &Driver::device_name);
  d.def_property_readonly("is_simulated", [](Driver& self) { return self.accl().is_simulated(); });
  d.def_property_readonly("local_rank", [](Driver& self) { return self.accl().local_rank(); });
  d.def("set_timeout_us", [](Driver& self, int64_t us) {
    py::gil_scoped_release release;
    self.accl().set_timeout(std::chrono::microseconds(us));
  });
  d.def_property_readonly("timeout_us", [](Driver& self) { return self.accl().timeout().count(); });
  d.def("supports", [](Driver& self, uint32_t f) {
    py::gil_scoped_release release;
    return self.accl().supports(reduce_function(f));
  });
  d.def("supports_on", [](Driver& self, uint32_t f, DataType t) {
    py::gil_scoped_release release;
    return self.accl().supports(reduce_function(f), t);
  });
  d.def("emulated_endpoint", [](Driver& self) {
    const EmuEndpoint ep = emulated_endpoint(self);
    return std::make_tuple(ep.ip, ep.port);
  });
  d.def("dump_exchange_memory", [](Driver& self) {
    py::gil_scoped_release release;
    return self.accl().dump_exchange_memory();
  });
  d.def("dump_rx_buffers", [](Driver& self) {
    py::gil_scoped_release release;
    return self.accl().dump_rx_buffers();
  });
  d.def("dump_communicator", [](Driver& self, unsigned comm) {
    py::gil_scoped_release release;
    return self.accl().dump_communicator(comm);
  });

  // --- communicators ---
  d.def("split_communicator", [](Driver& self, const std::vector<int>& indices) {
    py::gil_scoped_release release;
    return self.accl().split_communicator(indices);
  });
  d.def("free_communicator", [](Driver& self, unsigned comm) {
    py::gil_scoped_release release;
    self.accl().free_communicator(comm);
  });
  d.def("get_comm_rank", [](Driver& self, unsigned comm) { return self.accl().get_comm_rank(comm); });
  d.def("get_comm_size", [](Driver& self, unsigned comm) { return self.accl().get_comm_size(comm); });
  d.def("get_comm_group", [](Driver& self, unsigned comm) {
    py::gil_scoped_release release;
    return rank_tuples(self.accl().get_comm_group(comm));
  });

  // --- buffers ---
  d.def("create_buffer",
        [](std::shared_ptr<Driver> self, size_t length, DataType type, bool host_only) {
          return NativeBuffer::allocate(std::move(self), length, type, host_only);
        },
        py::arg("length"), py::arg("type"), py::arg("host_only"));

  // --- calls: argument order follows the C++ driver (accl/accl.hpp); every
  // call ends with run_async and the requests it waits for ---
  d.def("nop", [](Driver& self, bool run_async, const Waitfor& waitfor) {
    return without_gil([&] { return self.accl().nop(run_async, waitfor); });
  });
  d.def("copy", [](Driver& self, NativeBuffer& src, NativeBuffer& dst, unsigned count, bool from_fpga, bool to_fpga,
                   bool run_async, const Waitfor& waitfor) {
    return without_gil(
        [&] { return self.accl().copy(src.get(), dst.get(), count, from_fpga, to_fpga, run_async, waitfor); });
  });
  d.def("combine", [](Driver& self, unsigned count, uint32_t func, NativeBuffer& val1, NativeBuffer& val2,
                      NativeBuffer& result, bool val1_from_fpga, bool val2_from_fpga, bool to_fpga, bool run_async,
                      const Waitfor& waitfor) {
    return without_gil([&] {
      return self.accl().combine(count, reduce_function(func), val1.get(), val2.get(), result.get(), val1_from_fpga,
                                 val2_from_fpga, to_fpga, run_async, waitfor);
    });
  });
  d.def("send", [](Driver& self, NativeBuffer& src, unsigned count, unsigned dst, unsigned tag, unsigned comm,
                   bool from_fpga, DataType compress, bool run_async, const Waitfor& waitfor) {
    return without_gil([&] {
      return self.accl().send(src.get(), count, dst, tag, comm, from_fpga, compress, run_async, waitfor);
    });
  });
  d.def("send_from_stream", [](Driver& self, DataType src_type, unsigned count, unsigned dst, unsigned tag,
                               unsigned comm, DataType compress, bool run_async, const Waitfor& waitfor) {
    return without_gil(
        [&] { return self.accl().send(src_type, count, dst, tag, comm, compress, run_async, waitfor); });
  });
  d.def("stream_put", [](Driver& self, NativeBuffer& src, unsigned count, unsigned dst, unsigned stream_id,
                         unsigned comm, bool from_fpga, DataType compress, bool run_async, const Waitfor& waitfor) {
    return without_gil([&] {
      return self.accl().stream_put(src.get(), count, dst, stream_id, comm, from_fpga, compress, run_async, waitfor);
    });
  });
  d.def("recv", [](Driver& self, NativeBuffer& dst, unsigned count, unsigned src, unsigned tag, unsigned comm,
                   bool to_fpga, DataType compress, bool run_async, const Waitfor& waitfor) {
    return without_gil([&] {
      return self.accl().recv(dst.get(), count, src, tag, comm, to_fpga, compress, run_async, waitfor);
    });
  });
  d.def("bcast", [](Driver& self, NativeBuffer& buf, unsigned count, unsigned root, unsigned comm, bool from_fpga,
                    bool to_fpga, DataType compress, bool run_async, const Waitfor& waitfor) {
    return without_gil([&] {
      return self.accl().bcast(buf.get(), count, root, comm, from_fpga, to_fpga, compress, run_async, waitfor);
    });
  });
  d.def("scatter", [](Driver& self, NativeBuffer& sbuf, NativeBuffer& rbuf, unsigned count, unsigned root,
                      unsigned comm, bool from_fpga, bool to_fpga, DataType compress, bool run_async,
                      const Waitfor& waitfor) {
    return without_gil([&] {
      return self.accl().scatter(sbuf.get(), rbuf.get(), count, root, comm, from_fpga, to_fpga, compress, run_async,
                                 waitfor);
    });
  });
  d.def("gather", [](Driver& self, NativeBuffer& sbuf, NativeBuffer& rbuf, unsigned count, unsigned root,
                     unsigned comm, bool from_fpga, bool to_fpga, DataType compress, bool run_async,
                     const Waitfor& waitfor) {
    return without_gil([&] {
      return self.accl().gather(sbuf.get(), rbuf.get(), count, root, comm, from_fpga, to_fpga, compress, run_async,
                                waitfor);
    });
  });
  d.def("allgather", [](Driver& self, NativeBuffer& sbuf, NativeBuffer& rbuf, unsigned count, unsigned comm,
                        bool from_fpga, bool to_fpga, DataType compress, bool run_async, const Waitfor& waitfor) {
    return without_gil([&] {
      return self.accl().allgather(sbuf.get(), rbuf.get(), count, comm, from_fpga, to_fpga, compress, run_async,
                                   waitfor);
    });
  });
  d.def("reduce", [](Driver& self, NativeBuffer& sbuf, NativeBuffer& rbuf, unsigned count, unsigned root,
                     uint32_t func, unsigned comm, bool from_fpga, bool to_fpga, DataType compress, bool run_async,
                     const Waitfor& waitfor) {
    return without_gil([&] {
      return self.accl().reduce(sbuf.get(), rbuf.get(), count, root, reduce_function(func), comm, from_fpga, to_fpga,
                                compress, run_async, waitfor);
    });
  });
  d.def("allreduce", [](Driver& self, NativeBuffer& sbuf, NativeBuffer& rbuf, unsigned count, uint32_t func,
                        unsigned comm, bool from_fpga, bool to_fpga, DataType compress, bool run_async,
                        const Waitfor& waitfor) {
    return without_gil([&] {
      return self.accl().allreduce(sbuf.get(), rbuf.get(), count, reduce_function(func), comm, from_fpga, to_fpga,
                                   compress, run_async, waitfor);
    });
  });
  d.def("reduce_scatter", [](Driver& self, NativeBuffer& sbuf, NativeBuffer& rbuf, unsigned count, uint32_t func,
                             unsigned comm, bool from_fpga, bool to_fpga, DataType compress, bool run_async,
                             const Waitfor& waitfor) {
    return without_gil([&] {
      return self.accl().reduce_scatter(sbuf.get(), rbuf.get(), count, reduce_function(func), comm, from_fpga,
                                        to_fpga, compress, run_async, waitfor);
    });
  });
  d.def("alltoall", [](Driver& self, NativeBuffer& sbuf, NativeBuffer& rbuf, unsigned count, unsigned comm,
                       bool from_fpga, bool to_fpga, DataType compress, bool run_async, const Waitfor& waitfor) {
    return without_gil([&] {
      return self.accl().alltoall(sbuf.get(), rbuf.get(), count, comm, from_fpga, to_fpga, compress, run_async,
                                  waitfor);
    });
  });
  d.def("barrier", [](Driver& self, unsigned comm, bool run_async, const Waitfor& waitfor) {
    return without_gil([&] { return self.accl().barrier(comm, run_async, waitfor); });
  });
}

void bind_factories(py::module_& m) {
  py::class_<EmuWorld, std::shared_ptr<EmuWorld>>(m, "EmuWorld")
      .def(py::init<unsigned, const std::string&>(), py::arg("size"), py::arg("bind_address"),
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("size", &EmuWorld::size)
      .def_property_readonly("endpoints",
                             [](const EmuWorld& w) {
                               std::vector<std::tuple<std::string, int>> out;
                               for (const auto& ep : w.endpoints()) out.emplace_back(ep.ip, ep.port);
                               return out;
                             })
      .def("claimed", &EmuWorld::claimed, py::arg("index"))
      .def("claim", &EmuWorld::claim, py::arg("index"), py::arg("arith"), py::call_guard<py::gil_scoped_release>());

  m.def("create_emulated", &create_emulated_driver, py::arg("bind_address"), py::arg("port"), py::arg("arith"),
        py::call_guard<py::gil_scoped_release>(), "An emulated CCLO listening on bind_address:port (0: any port).");
  m.def("create_simulated",
        [](const std::string& rank0_address, int rank, int size, const accl::arithConfigMap& arith) {
          SimulatedDriver opened = [&] {
            py::gil_scoped_release release;
            return create_simulated_driver(rank0_address, rank, size, arith);
          }();
          return std::make_tuple(opened.driver, opened.endpoint.ip, opened.endpoint.port, opened.session_ids);
        },
        py::arg("rank0_address"), py::arg("rank"), py::arg("size"), py::arg("arith"),
        "One instance of a public ACCL simulation session: (driver, ip, port) of `rank` and the session ids of "
        "every rank; rank0_address '' reads ACCL_SIM_ADDRESS.");
  m.def("selected_device", &selected_device, "ACCL_DEVICE's choice: emu, xrt, sim or none.");
  m.def("create_hardware", &create_hardware_driver, py::arg("xclbin"), py::arg("board"), py::arg("cclo_index"),
        py::arg("arith"), py::call_guard<py::gil_scoped_release>(), "A CCLO on an Alveo card (XRT backend).");
}

}  // namespace
}  // namespace pyaccl

PYBIND11_MODULE(_pyaccl, m) {
  m.doc() = "pyaccl's native driver (libaccl); use the pyaccl package instead of this module.";
  py::register_exception_translator(&pyaccl::translate_driver_errors);
  pyaccl::bind_types(m);
  pyaccl::bind_request(m);
  pyaccl::bind_buffer(m);
  pyaccl::bind_driver(m);
  pyaccl::bind_factories(m);
}
