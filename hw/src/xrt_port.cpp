// SPDX-License-Identifier: Apache-2.0
//
// The only code that calls XRT: the register and buffer ports over one card,
// the xclbin metadata read-out, and create_xrt_device() putting the pieces
// together. Every decision (encoding, ordering, retcode, bookkeeping) is in
// cclo_device.cpp / xclbin_info.cpp, which the tests run on models.
#include <accl/log.hpp>
#include <accl_hw/cclo_device.hpp>
#include <accl_hw/hw.hpp>
#include <accl_hw/xclbin_info.hpp>

#include <experimental/xrt_ip.h>
#include <experimental/xrt_xclbin.h>
#include <version.h>
#include <xrt/xrt_bo.h>
#include <xrt/xrt_device.h>
#include <xrt/xrt_kernel.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace accl::hw {
namespace {

std::string state_name(ert_cmd_state s) {
  switch (s) {
    case ERT_CMD_STATE_NEW: return "NEW";
    case ERT_CMD_STATE_QUEUED: return "QUEUED";
    case ERT_CMD_STATE_RUNNING: return "RUNNING";
    case ERT_CMD_STATE_COMPLETED: return "COMPLETED";
    case ERT_CMD_STATE_ERROR: return "ERROR";
    case ERT_CMD_STATE_ABORT: return "ABORT";
    case ERT_CMD_STATE_SUBMITTED: return "SUBMITTED";
    case ERT_CMD_STATE_TIMEOUT: return "TIMEOUT";
    case ERT_CMD_STATE_NORESPONSE: return "NORESPONSE";
    default: return "state " + std::to_string(static_cast<int>(s));
  }
}

// Waits at most `timeout` for a run. xrt::run::wait(timeout) returns
// ERT_CMD_STATE_TIMEOUT when the wait itself timed out; a zero timeout
// would mean "forever".
RunStatus wait_run(xrt::run& run, std::chrono::milliseconds timeout, const std::string& kernel) {
  const ert_cmd_state s = run.wait(std::max(timeout, std::chrono::milliseconds(1)));
  switch (s) {
    case ERT_CMD_STATE_COMPLETED:
      return {RunState::done, ""};
    case ERT_CMD_STATE_NEW:
    case ERT_CMD_STATE_QUEUED:
    case ERT_CMD_STATE_RUNNING:
    case ERT_CMD_STATE_SUBMITTED:
    case ERT_CMD_STATE_TIMEOUT:
      return {RunState::pending, ""};
    default:
      return {RunState::failed, kernel + " execution ended in XRT state " + state_name(s)};
  }
}

class XrtRegisterPort final : public RegisterPort {
 public:
  XrtRegisterPort(xrt::ip cclo, xrt::kernel hostctrl, std::shared_ptr<void> network)
      : cclo_(std::move(cclo)), hostctrl_(std::move(hostctrl)), run_(hostctrl_), network_(std::move(network)) {}

  uint32_t read32(uint32_t offset) override { return cclo_.read_register(offset); }
  void write32(uint32_t offset, uint32_t value) override { cclo_.write_register(offset, value); }

  void start_kernel(const HostCtrlArgs& args) override {
    // All twelve arguments, typed by width: XRT copies sizeof(value) bytes.
    for (int i = 0; i < kHostCtrlArgCount; ++i) {
      if (kHostCtrlArgBytes[i] == 8)
        run_.set_arg(i, static_cast<uint64_t>(args.value[i]));
      else
        run_.set_arg(i, static_cast<uint32_t>(args.value[i]));
    }
    run_.start();
  }

  RunStatus wait_kernel(std::chrono::milliseconds timeout) override {
    return wait_run(run_, timeout, "hostctrl");
  }

 private:
  xrt::ip cclo_;
  xrt::kernel hostctrl_;
  xrt::run run_;  // reused for every call: one execution at a time
  // The network kernels, their buffers and the POE's run: they must outlive
  // every call (null when the network was configured before the job).
  std::shared_ptr<void> network_;
};

// The CMAC and the UDP network layer: plain register access.
class XrtIpPort final : public IpRegisterPort {
 public:
  explicit XrtIpPort(xrt::ip ip) : ip_(std::move(ip)) {}
  uint32_t read32(uint32_t offset) override { return ip_.read_register(offset); }
  void write32(uint32_t offset, uint32_t value) override { ip_.write_register(offset, value); }

 private:
  xrt::ip ip_;
};

// The POE and the session handler: executions with arguments. Scalars are
// passed with the width the xclbin declares for them (the session handler's
// result arguments are pointers in its HLS source).
class XrtKernelPort final : public KernelPort {
 public:
  XrtKernelPort(xrt::device device, xrt::kernel kernel, XclbinIp ip)
      : device_(std::move(device)), kernel_(std::move(kernel)), ip_(std::move(ip)) {}

  uint64_t allocate_buffer(int arg, size_t bytes) override {
    const auto group = static_cast<uint32_t>(kernel_.group_id(arg));
    xrt::bo bo;
    try {
      bo = xrt::bo(device_, bytes, xrt::bo::flags::normal, group);
    } catch (const std::exception& e) {
      throw HwError("xrt: cannot allocate " + std::to_string(bytes) + " bytes for argument " + std::to_string(arg) +
                    " of " + ip_.name + " in memory group " + std::to_string(group) + ": " + e.what());
    }
    std::memset(bo.map(), 0, bytes);
    bo.sync(XCL_BO_SYNC_BO_TO_DEVICE);
    bos_.push_back(std::move(bo));
    return bos_.size();  // handle = position + 1, never 0
  }

  void start(const std::vector<KernelArg>& args) override {
    run_ = xrt::run(kernel_);
    for (size_t i = 0; i < args.size(); ++i) {
      const int index = static_cast<int>(i);
      if (args[i].buffer) {
        run_.set_arg(index, bos_.at(args[i].value - 1));
        continue;
      }
      const size_t bytes = scalar_arg_bytes(ip_, static_cast<uint32_t>(i), args[i].bytes);
      const uint64_t value = args[i].value;  // little-endian: the low bytes come first
      run_.set_arg(index, static_cast<const void*>(&value), bytes);
    }
    run_.start();
  }

  RunStatus wait(std::chrono::milliseconds timeout) override { return wait_run(run_, timeout, ip_.name); }
  uint32_t read32(uint32_t offset) override { return kernel_.read_register(offset); }

 private:
  xrt::device device_;
  xrt::kernel kernel_;
  XclbinIp ip_;
  std::vector<xrt::bo> bos_;
  xrt::run run_;
};

// What the bring-up opened, kept with the device.
struct NetworkKernels {
  std::unique_ptr<IpRegisterPort> cmac, layer;
  std::unique_ptr<KernelPort> poe, session_handler;
};

class XrtBufferPort final : public BufferPort {
 public:
  XrtBufferPort(xrt::device device, std::vector<uint32_t> bank_groups, int32_t host_group, std::string xclbin)
      : device_(std::move(device)), bank_groups_(std::move(bank_groups)), host_group_(host_group),
        xclbin_(std::move(xclbin)) {}

  PortBuffer allocate(size_t bytes, MemoryKind kind, unsigned bank) override {
    if (kind == MemoryKind::host_only) {
      const uint32_t group = host_group_or_throw();
      return keep(make_bo([&] { return xrt::bo(device_, bytes, xrt::bo::flags::host_only, group); }, bytes, group), true);
    }
    if (bank >= bank_groups_.size()) {
      std::string groups;
      for (uint32_t g : bank_groups_) {
        // Appended piecewise: GCC 12 -O3 reports a false -Wrestrict on `"," + std::to_string(g)`.
        if (!groups.empty()) groups += ',';
        groups += std::to_string(g);
      }
      throw HwError("xrt: device bank " + std::to_string(bank) + " not available: the CCLO reaches memory groups [" +
                    groups + "] (set ACCL_XRT_MEMORY_GROUPS to add banks)");
    }
    const uint32_t group = bank_groups_[bank];
    return keep(make_bo([&] { return xrt::bo(device_, bytes, xrt::bo::flags::normal, group); }, bytes, group), false);
  }

  PortBuffer map_user(void* ptr, size_t bytes) override {
    const uint32_t group = host_group_or_throw();
    return keep(make_bo([&] { return xrt::bo(device_, ptr, bytes, xrt::bo::flags::host_only, group); }, bytes, group),
                false, ptr);
  }

  void release(uint64_t handle) override {
    std::lock_guard lk(mu_);
    bos_.erase(handle);
  }

  void write(uint64_t handle, size_t offset, const void* src, size_t bytes) override {
    xrt::bo bo = find(handle);
    bo.write(src, bytes, offset);
    bo.sync(XCL_BO_SYNC_BO_TO_DEVICE, bytes, offset);
  }

  void read(uint64_t handle, size_t offset, void* dst, size_t bytes) override {
    xrt::bo bo = find(handle);
    bo.sync(XCL_BO_SYNC_BO_FROM_DEVICE, bytes, offset);
    bo.read(dst, bytes, offset);
  }

 private:
  uint32_t host_group_or_throw() const {
    if (host_group_ < 0)
      throw HwError("xrt: host-only buffers need a host memory bank the CCLO reaches, and xclbin " + xclbin_ +
                    " has none (enable host memory with 'xbutil configure --host-mem' and link the CCLO to HOST[0])");
    return static_cast<uint32_t>(host_group_);
  }

  template <typename Make>
  xrt::bo make_bo(Make make, size_t bytes, uint32_t group) {
    try {
      return make();
    } catch (const std::exception& e) {
      throw HwError("xrt: cannot allocate " + std::to_string(bytes) + " bytes in memory group " + std::to_string(group) +
                    ": " + e.what());
    }
  }

  PortBuffer keep(xrt::bo bo, bool map, void* user = nullptr) {
    PortBuffer pb;
    pb.address = bo.address();
    pb.bytes = bo.size();
    pb.host_ptr = user != nullptr ? user : map ? bo.map() : nullptr;
    std::lock_guard lk(mu_);
    pb.handle = next_handle_++;
    bos_.emplace(pb.handle, std::move(bo));
    return pb;
  }

  xrt::bo find(uint64_t handle) {
    std::lock_guard lk(mu_);
    auto it = bos_.find(handle);
    if (it == bos_.end()) throw HwError("xrt: unknown buffer handle " + std::to_string(handle));
    return it->second;  // xrt::bo is a shared handle: the copy is cheap
  }

  xrt::device device_;
  std::vector<uint32_t> bank_groups_;
  int32_t host_group_;
  std::string xclbin_;
  std::mutex mu_;
  std::unordered_map<uint64_t, xrt::bo> bos_;
  uint64_t next_handle_ = 1;
};

XclbinInfo read_xclbin_info(const xrt::xclbin& xclbin, const std::string& path) {
  XclbinInfo info;
  info.path = path;
  for (const auto& ip : xclbin.get_ips()) {
    XclbinIp x;
    x.name = ip.get_name();
    try {
      for (const auto& arg : ip.get_args()) {
        XclbinArg a;
        a.name = arg.get_name();
        a.index = static_cast<uint32_t>(arg.get_index());
        a.size = arg.get_size();
        a.offset = arg.get_offset();
        for (const auto& m : arg.get_mems()) a.mems.push_back(m.get_index());
        x.args.push_back(std::move(a));
      }
    } catch (const std::exception& e) {
      // Argument metadata is optional for resolution (it only sharpens
      // errors and picks memory groups): keep the IP without it.
      ACCL_LOG_DEBUG("xrt: no argument metadata for {}: {}", x.name, e.what());
      x.args.clear();
    }
    info.ips.push_back(std::move(x));
  }
  for (const auto& m : xclbin.get_mems()) {
    XclbinMem xm;
    xm.index = m.get_index();
    xm.tag = m.get_tag();
    const auto type = m.get_type();
    xm.host = type == xrt::xclbin::mem::memory_type::host;
    xm.streaming = type == xrt::xclbin::mem::memory_type::streaming ||
                   type == xrt::xclbin::mem::memory_type::streaming_connection;
    xm.used = m.get_used();
    info.mems.push_back(std::move(xm));
  }
  return info;
}

// XRT's CU syntax for one exact instance.
std::string xrt_name(const XclbinIp& ip) {
  KernelName k = parse_kernel_name(ip.name);
  return k.instance.empty() ? k.kernel : k.kernel + ":{" + k.instance + "}";
}

// Opens the network kernels resolve_xclbin() found for `plan.design`.
std::shared_ptr<NetworkKernels> open_network(const xrt::device& device, const xrt::uuid& uuid,
                                             const std::vector<XclbinIp>& ips, const NetworkPlan& plan,
                                             const std::string& bdf) {
  auto kernels = std::make_shared<NetworkKernels>();
  const std::string design = to_string(plan.design);
  auto open_ip = [&](const XclbinIp& ip) {
    try {
      return std::make_unique<XrtIpPort>(xrt::ip(device, uuid, xrt_name(ip)));
    } catch (const std::exception& e) {
      throw HwError("ACCL_HW_NETWORK=" + design + ": cannot open '" + ip.name + "' on card " + bdf + ": " + e.what());
    }
  };
  auto open_kernel = [&](const XclbinIp& ip) {
    try {
      // Exclusive, as public ACCL: reading a kernel's registers needs it.
      xrt::kernel k(device, uuid, xrt_name(ip), xrt::kernel::cu_access_mode::exclusive);
      return std::make_unique<XrtKernelPort>(device, std::move(k), ip);
    } catch (const std::exception& e) {
      throw HwError("ACCL_HW_NETWORK=" + design + ": cannot open kernel '" + ip.name + "' on card " + bdf + ": " +
                    e.what() + " (is another process using it?)");
    }
  };
  if (ips.size() != 2) throw HwError("ACCL_HW_NETWORK=" + design + ": network kernels not resolved");
  if (plan.design == NetworkDesign::udp) {
    kernels->cmac = open_ip(ips[0]);
    kernels->layer = open_ip(ips[1]);
  } else {
    kernels->poe = open_kernel(ips[0]);
    kernels->session_handler = open_kernel(ips[1]);
  }
  return kernels;
}

}  // namespace

std::unique_ptr<Device> create_xrt_device(const XrtOptions& options, NetworkResult* network) {
  // Runtime-free checks first: a machine without a card or an xclbin fails
  // here without touching XRT.
  const CardTarget target = select_card(options);
  check_xclbin_file(options);
  if (options.network.design != NetworkDesign::none) check_network_plan(options.network);

  xrt::xclbin xclbin;
  try {
    xclbin = xrt::xclbin(options.xclbin);
  } catch (const std::exception& e) {
    throw HwError("ACCL_DEVICE=xrt: ACCL_XCLBIN=" + options.xclbin + ": not a valid xclbin (" + e.what() + ")");
  }
  const XclbinInfo info = read_xclbin_info(xclbin, options.xclbin);
  const ResolvedXclbin resolved = resolve_xclbin(info, options);
  for (const auto& w : resolved.warnings) ACCL_LOG_WARN("xrt: {}", w);

  const std::string card = target.by_index ? "index " + std::to_string(target.index) : target.bdf;
  xrt::device device;
  try {
    device = target.by_index ? xrt::device(target.index) : xrt::device(target.bdf);
  } catch (const std::exception& e) {
    const char* root = std::getenv("XILINX_XRT");
    throw HwError("ACCL_DEVICE=xrt: cannot open Alveo card " + card + " (" + target.reason + ") through XRT: " + e.what() +
                  (root == nullptr || *root == '\0' ? "; XILINX_XRT is not set (source XRT's setup.sh)" : ""));
  }
  std::string bdf = card, vbnv;
  try {
    bdf = device.get_info<xrt::info::device::bdf>();
    vbnv = device.get_info<xrt::info::device::name>();
  } catch (const std::exception&) {
    // Names are for messages only.
  }

  xrt::uuid uuid;
  try {
    uuid = device.load_xclbin(xclbin);
  } catch (const std::exception& e) {
    throw HwError("ACCL_DEVICE=xrt: cannot load " + options.xclbin + " on card " + bdf + ": " + e.what());
  }
  xrt::ip cclo;
  try {
    cclo = xrt::ip(device, uuid, xrt_name(resolved.cclo));
  } catch (const std::exception& e) {
    throw HwError("ACCL_DEVICE=xrt: cannot open kernel '" + options.cclo_kernel + "' on card " + bdf + ": " + e.what());
  }
  xrt::kernel hostctrl;
  try {
    // Exclusive, as public ACCL: a second process driving the same host
    // controller would interleave call words.
    hostctrl = xrt::kernel(device, uuid, xrt_name(resolved.hostctrl), xrt::kernel::cu_access_mode::exclusive);
  } catch (const std::exception& e) {
    throw HwError("ACCL_DEVICE=xrt: cannot open kernel '" + options.hostctrl_kernel + "' on card " + bdf + ": " +
                  e.what() + " (is another process using this CCLO?)");
  }

  std::shared_ptr<NetworkKernels> kernels;
  if (options.network.design != NetworkDesign::none) {
    kernels = open_network(device, uuid, resolved.network, options.network, bdf);
    const NetworkResult result =
        options.network.design == NetworkDesign::udp
            ? bring_up_udp(*kernels->cmac, *kernels->layer, options.network)
            : bring_up_tcp(*kernels->poe, *kernels->session_handler, options.network);
    ACCL_LOG_INFO("xrt: rank {}: network {}", options.network.rank, result.summary);
    if (network != nullptr) *network = result;
  }

  CcloDeviceOptions dev_options;
  dev_options.name = "xrt";
  dev_options.description = "card " + bdf + (vbnv.empty() ? "" : " " + vbnv) + ", xclbin " + options.xclbin;
  dev_options.clock_mhz = options.clock_mhz;
  ACCL_LOG_INFO("xrt: {} ({}); CCLO {} hostctrl {}", dev_options.description, target.reason, resolved.cclo.name,
                resolved.hostctrl.name);
  return make_cclo_device(
      std::make_unique<XrtRegisterPort>(std::move(cclo), std::move(hostctrl), std::move(kernels)),
      std::make_unique<XrtBufferPort>(device, resolved.bank_groups, resolved.host_group, options.xclbin),
      std::move(dev_options));
}

bool built_with_xrt() { return true; }
std::string xrt_version() { return xrt_build_version; }

}  // namespace accl::hw
