// SPDX-License-Identifier: Apache-2.0
//
// libaccl: the C++ driver API. One ACCL object drives one CCLO device
// (emulated or real). Calls follow public ACCL's C++ driver: element counts,
// per-rank counts for scatter/gather/allgather/reduce_scatter/alltoall,
// from_fpga/to_fpga to skip host<->device syncs, compress_dtype for fp16 wire
// compression, run_async + waitfor for overlap and device-side chaining.
#pragma once

#include <accl/abi.hpp>
#include <accl/buffer.hpp>
#include <accl/device.hpp>
#include <accl/error.hpp>
#include <accl/request.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace accl {

using dataType = abi::DataType;

enum class reduceFunction : uint32_t {
  SUM = abi::kSum,
  MAX = abi::kMax,
  MIN = abi::kMin,    // only when supports(reduceFunction::MIN)
  PROD = abi::kProd,  // only when supports(reduceFunction::PROD)
  // Integer types only; each only when supports(f, type).
  BAND = abi::kBand,
  BOR = abi::kBor,
  BXOR = abi::kBxor,
  LAND = abi::kLand,  // result 0 or 1
  LOR = abi::kLor,
  LXOR = abi::kLxor,
  // Packed (value, index) pair types only (dataType::int32_int, ...); equal
  // values keep the lower index.
  MINLOC = abi::kMinLoc,
  MAXLOC = abi::kMaxLoc,
};

enum class streamFlags : uint32_t {
  NO_STREAM = abi::kNoStream,
  OP0_STREAM = abi::kOp0Stream,
  RES_STREAM = abi::kResStream,
};

using communicatorId = unsigned int;
inline constexpr communicatorId GLOBAL_COMM = 0;
inline constexpr unsigned int TAG_ANY = abi::kTagAny;
inline constexpr unsigned int RANK_ANY = abi::kRankAny;  // recv only (extension)

// One rank of a communicator: where its CCLO is reachable.
struct rank_t {
  std::string ip;                 // IPv4 dotted quad
  int port = 0;
  int session_id = -1;            // < 0: none
  uint64_t max_segment_size = 0;  // bytes of one eager message segment; 0 = RX buffer size
};

// Arithmetic configuration record (seed 003 ACCLArithConfig).
struct ArithConfig {
  uint32_t uncompressed_elem_bytes = 4;
  uint32_t compressed_elem_bytes = 4;
  uint32_t elem_ratio_log = 0;
  uint32_t compressor_tdest = 0;
  uint32_t decompressor_tdest = 0;
  bool arith_is_compressed = false;
  std::vector<uint32_t> arith_tdest;  // function id per reduceFunction index
};
using arithConfigMap = std::map<std::pair<dataType, dataType>, ArithConfig>;
// (float16,float16) (float32,float16) (float32,float32) (float64,float64)
// (int32,int32) (int64,int64), each with SUM, MAX, MIN, PROD function ids;
// integer types also with BAND..LXOR. Extensions, loaded only when the
// device reports their types (abi::data_type_capabilities): int8, int16 and
// the unsigned types with the same ten functions, the pair types with
// MINLOC and MAXLOC (abi::kFnNone below them).
const arithConfigMap& default_arith_config();

struct InitOptions {
  unsigned int rx_buffer_count = 16;
  size_t rx_buffer_size = 1024;            // bytes per RX buffer
  size_t max_eager_size = 1024;            // bytes; larger messages use rendezvous
  size_t max_rendezvous_size = 32 * 1024;  // bytes of each spare (scratch) buffer; 0 = eager only
  std::chrono::microseconds timeout{0};    // 0 = from ACCL_TIMEOUT_MS (default 10 s)
};

class ACCL {
 public:
  // Takes ownership of the device. Nothing is configured until initialize().
  explicit ACCL(std::unique_ptr<Device> device, const arithConfigMap& arith = default_arith_config());
  ~ACCL();  // deinit()
  ACCL(const ACCL&) = delete;
  ACCL& operator=(const ACCL&) = delete;

  // --- configuration ---
  void initialize(const std::vector<rank_t>& ranks, int local_rank, unsigned int nbufs = 16,
                  size_t bufsize = 1024, size_t max_eager_size = 1024,
                  size_t max_rendezvous_size = 32 * 1024);
  void initialize(const std::vector<rank_t>& ranks, int local_rank, const InitOptions& options);
  // Resets the CCLO and frees RX/spare buffers and communicators. Buffers the
  // user created stay valid. The object can be initialize()d again.
  void deinit();
  // Resets the CCLO (config call). The device then needs configuring again:
  // use deinit() + initialize(); calls in between fail with NOT_CONFIGURED.
  void soft_reset();
  bool initialized() const;
  // Device timeout for every call (also bounds the driver's waits).
  void set_timeout(std::chrono::microseconds timeout);
  std::chrono::microseconds timeout() const;
  void set_max_eager_msg_size(size_t bytes);
  void set_max_rendezvous_msg_size(size_t bytes);

  // --- communicators ---
  // `context_id` must be the same on every member; by default it is this
  // device's creation index, which matches when all ranks create their
  // communicators in the same order.
  communicatorId create_communicator(const std::vector<rank_t>& ranks, int local_rank,
                                     std::optional<uint32_t> context_id = std::nullopt);
  // New communicator of the listed global ranks (seed 003); new rank i is
  // global_indices[i] (any order, no duplicates). This rank must be a member.
  communicatorId split_communicator(const std::vector<int>& global_indices,
                                    std::optional<uint32_t> context_id = std::nullopt);
  // Releases the communicator's exchange memory for reuse; its id is not reused.
  void free_communicator(communicatorId comm);
  std::vector<rank_t> get_comm_group(communicatorId comm = GLOBAL_COMM);
  unsigned int get_comm_rank(communicatorId comm = GLOBAL_COMM) const;
  unsigned int get_comm_size(communicatorId comm = GLOBAL_COMM) const;
  uint32_t get_communicator_addr(communicatorId comm) const;
  uint32_t get_arithmetic_config_addr(std::pair<dataType, dataType> key) const;

  // --- device facts ---
  uint32_t get_hwid();
  uint32_t get_capabilities();  // abi::Capability bits (0 on public hardware)
  // Error bits of the link to `rank` of `comm` as the device recorded it
  // (abi::kLinkError plus the transport's detail), 0 while it is up or was
  // never used. Asked after a RANK_ANY receive failed with LINK_ERROR, which
  // names no peer. Needs abi::kCapLinkStatus (ArgumentError otherwise).
  uint32_t link_status(unsigned int rank, communicatorId comm = GLOBAL_COMM);
  bool supports(reduceFunction f);
  // `f` on operands of type `t` (uncompressed): the device reports both and
  // the arithmetic configuration of t was loaded and defines f.
  bool supports(reduceFunction f, dataType t);
  bool is_simulated() const;
  Device& device();
  std::string dump_exchange_memory();
  std::string dump_rx_buffers();
  std::string dump_communicator(communicatorId comm = GLOBAL_COMM);
  // Rank prefix for messages ("rank 2"); the global communicator's rank.
  int local_rank() const;

  // --- buffers ---
  template <typename T>
  std::unique_ptr<Buffer<T>> create_buffer(size_t length, dataType type = dtype_of<T>(), unsigned bank = 0) {
    return std::make_unique<Buffer<T>>(*this, length, type, BufferPlacement::device, nullptr, bank);
  }
  // Wraps user memory as the host mirror of a new device buffer. A null (or
  // first-page) host_ptr with length > 0 throws ArgumentError: it is never
  // memory, and passing nullptr on would mean "allocate" to the constructor.
  template <typename T>
  std::unique_ptr<Buffer<T>> create_buffer(T* host_ptr, size_t length, dataType type = dtype_of<T>(), unsigned bank = 0) {
    detail::require_user_memory(*this, "create_buffer", host_ptr, length);
    return std::make_unique<Buffer<T>>(*this, length, type, BufferPlacement::device, host_ptr, bank);
  }
  // Host-only buffer: the CCLO reads/writes host memory directly, no sync.
  template <typename T>
  std::unique_ptr<Buffer<T>> create_buffer_host(size_t length, dataType type = dtype_of<T>()) {
    return std::make_unique<Buffer<T>>(*this, length, type, BufferPlacement::host_only, nullptr, 0);
  }
  // Host-only buffer over user memory (zero copy); host_ptr as for
  // create_buffer(host_ptr, ...).
  template <typename T>
  std::unique_ptr<Buffer<T>> create_buffer_host(T* host_ptr, size_t length, dataType type = dtype_of<T>()) {
    detail::require_user_memory(*this, "create_buffer_host", host_ptr, length);
    return std::make_unique<Buffer<T>>(*this, length, type, BufferPlacement::host_only, host_ptr, 0);
  }

  // --- calls ---
  // Every call validates its arguments before touching the device and throws
  // ArgumentError("call 'x' on rank r: cause"). count == 0 is valid and
  // completes at once without a device call (with a non-empty waitfor it runs
  // as a nop so chains through it stay ordered). Synchronous calls (run_async
  // false) wait and throw DeviceError/TimeoutError; asynchronous ones return a
  // queued request whose wait()/test() syncs results and reports errors, also
  // those of the calls it waited for.

  // --- primitives ---
  RequestPtr nop(bool run_async = false, const std::vector<RequestPtr>& waitfor = {});
  RequestPtr copy(BaseBuffer& src, BaseBuffer& dst, unsigned int count, bool from_fpga = false,
                  bool to_fpga = false, bool run_async = false, const std::vector<RequestPtr>& waitfor = {});
  RequestPtr copy_to_stream(BaseBuffer& src, unsigned int count, bool from_fpga = false,
                            bool run_async = false, const std::vector<RequestPtr>& waitfor = {});
  RequestPtr copy_from_stream(BaseBuffer& dst, unsigned int count, bool to_fpga = false,
                              bool run_async = false, const std::vector<RequestPtr>& waitfor = {});
  RequestPtr combine(unsigned int count, reduceFunction function, BaseBuffer& val1, BaseBuffer& val2,
                     BaseBuffer& result, bool val1_from_fpga = false, bool val2_from_fpga = false,
                     bool to_fpga = false, bool run_async = false, const std::vector<RequestPtr>& waitfor = {});
  RequestPtr send(BaseBuffer& src, unsigned int count, unsigned int dst, unsigned int tag = TAG_ANY,
                  communicatorId comm = GLOBAL_COMM, bool from_fpga = false,
                  dataType compress_dtype = dataType::none, bool run_async = false,
                  const std::vector<RequestPtr>& waitfor = {});
  // Sends `count` elements of `src_type` pulled from the local kernel stream.
  RequestPtr send(dataType src_type, unsigned int count, unsigned int dst, unsigned int tag = TAG_ANY,
                  communicatorId comm = GLOBAL_COMM, dataType compress_dtype = dataType::none,
                  bool run_async = false, const std::vector<RequestPtr>& waitfor = {});
  // Sends to the remote kernel stream `stream_id` (no recv needed there).
  RequestPtr stream_put(BaseBuffer& src, unsigned int count, unsigned int dst, unsigned int stream_id,
                        communicatorId comm = GLOBAL_COMM, bool from_fpga = false,
                        dataType compress_dtype = dataType::none, bool run_async = false,
                        const std::vector<RequestPtr>& waitfor = {});
  RequestPtr recv(BaseBuffer& dst, unsigned int count, unsigned int src, unsigned int tag = TAG_ANY,
                  communicatorId comm = GLOBAL_COMM, bool to_fpga = false,
                  dataType compress_dtype = dataType::none, bool run_async = false,
                  const std::vector<RequestPtr>& waitfor = {});
  // Receives into the local kernel stream.
  RequestPtr recv(dataType dst_type, unsigned int count, unsigned int src, unsigned int tag = TAG_ANY,
                  communicatorId comm = GLOBAL_COMM, dataType compress_dtype = dataType::none,
                  bool run_async = false, const std::vector<RequestPtr>& waitfor = {});

  // --- collectives ---
  RequestPtr bcast(BaseBuffer& buf, unsigned int count, unsigned int root, communicatorId comm = GLOBAL_COMM,
                   bool from_fpga = false, bool to_fpga = false, dataType compress_dtype = dataType::none,
                   bool run_async = false, const std::vector<RequestPtr>& waitfor = {});
  RequestPtr scatter(BaseBuffer& sendbuf, BaseBuffer& recvbuf, unsigned int count, unsigned int root,
                     communicatorId comm = GLOBAL_COMM, bool from_fpga = false, bool to_fpga = false,
                     dataType compress_dtype = dataType::none, bool run_async = false,
                     const std::vector<RequestPtr>& waitfor = {});
  RequestPtr gather(BaseBuffer& sendbuf, BaseBuffer& recvbuf, unsigned int count, unsigned int root,
                    communicatorId comm = GLOBAL_COMM, bool from_fpga = false, bool to_fpga = false,
                    dataType compress_dtype = dataType::none, bool run_async = false,
                    const std::vector<RequestPtr>& waitfor = {});
  RequestPtr allgather(BaseBuffer& sendbuf, BaseBuffer& recvbuf, unsigned int count,
                       communicatorId comm = GLOBAL_COMM, bool from_fpga = false, bool to_fpga = false,
                       dataType compress_dtype = dataType::none, bool run_async = false,
                       const std::vector<RequestPtr>& waitfor = {});
  RequestPtr reduce(BaseBuffer& sendbuf, BaseBuffer& recvbuf, unsigned int count, unsigned int root,
                    reduceFunction func, communicatorId comm = GLOBAL_COMM, bool from_fpga = false,
                    bool to_fpga = false, dataType compress_dtype = dataType::none, bool run_async = false,
                    const std::vector<RequestPtr>& waitfor = {});
  RequestPtr allreduce(BaseBuffer& sendbuf, BaseBuffer& recvbuf, unsigned int count, reduceFunction func,
                       communicatorId comm = GLOBAL_COMM, bool from_fpga = false, bool to_fpga = false,
                       dataType compress_dtype = dataType::none, bool run_async = false,
                       const std::vector<RequestPtr>& waitfor = {});
  RequestPtr reduce_scatter(BaseBuffer& sendbuf, BaseBuffer& recvbuf, unsigned int count, reduceFunction func,
                            communicatorId comm = GLOBAL_COMM, bool from_fpga = false, bool to_fpga = false,
                            dataType compress_dtype = dataType::none, bool run_async = false,
                            const std::vector<RequestPtr>& waitfor = {});
  RequestPtr alltoall(BaseBuffer& sendbuf, BaseBuffer& recvbuf, unsigned int count,
                      communicatorId comm = GLOBAL_COMM, bool from_fpga = false, bool to_fpga = false,
                      dataType compress_dtype = dataType::none, bool run_async = false,
                      const std::vector<RequestPtr>& waitfor = {});
  RequestPtr barrier(communicatorId comm = GLOBAL_COMM, bool run_async = false,
                     const std::vector<RequestPtr>& waitfor = {});

  // --- requests (also available as methods of Request) ---
  void wait(const RequestPtr& request);
  bool wait(const RequestPtr& request, std::chrono::milliseconds timeout);
  bool test(const RequestPtr& request);

  // Opaque driver state (core/src/internal.hpp); public only so the driver's
  // own helper functions can name it.
  struct Impl;

 private:
  friend class BaseBuffer;
  std::unique_ptr<Impl> impl_;
};

}  // namespace accl
