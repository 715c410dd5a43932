// SPDX-License-Identifier: Apache-2.0
//
// Internal state of the PMPI interposition layer (libaccl_pmpi). One process
// = one ACCL driver on one device, brought up in MPI_Init on MPI_COMM_WORLD.
//
// Thread model: the interposed entry points are callable from any thread
// (MPI_THREAD_MULTIPLE stays honest). Everything below that mutates shared
// state (communicator registry, point-to-point engine, shadow requests,
// buffer cache, staging pool) is guarded by State::mu (taken only when MPI
// granted MPI_THREAD_MULTIPLE: below it one thread at a time is inside MPI,
// see LayerMutex). The lock is never held
// across a PMPI call that can block on a remote rank (collectives, blocking
// p2p): two ranks each blocking inside a collective while holding their lock
// would deadlock a third thread. Waiting for ACCL happens in poll loops that
// drop the lock between polls.
#pragma once

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <accl/accl.hpp>
#include <accl/spin.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#define ACCL_PMPI_EXPORT extern "C" __attribute__((visibility("default")))
#define ACCL_LIKELY(x) __builtin_expect(!!(x), 1)
#define ACCL_UNLIKELY(x) __builtin_expect(!!(x), 0)

namespace accl::pmpi {

// ---------------------------------------------------------------------------
// Calls and fallback reasons (X-macro lists)
// ---------------------------------------------------------------------------
enum class Group : uint8_t { p2p, coll, icoll };

enum class Call : uint8_t {
#define CALL(e, mpi, setting, group) e,
#include "calls.def"
#undef CALL
};
inline constexpr size_t kNumCalls = 0
#define CALL(e, mpi, setting, group) +1
#include "calls.def"
#undef CALL
    ;

enum class Reason : uint8_t {
#define REASON(e, text, benign) e,
#include "reasons.def"
#undef REASON
};
inline constexpr size_t kNumReasons = 0
#define REASON(e, text, benign) +1
#include "reasons.def"
#undef REASON
    ;

const char* call_name(Call c);     // "MPI_Allreduce"
const char* call_setting(Call c);  // "allreduce"
Group call_group(Call c);
const char* reason_text(Reason r);
bool reason_benign(Reason r);

// ---------------------------------------------------------------------------
// Settings (read once in MPI_Init; never on the per-call path)
// ---------------------------------------------------------------------------
enum class FallbackMode : uint8_t { silent, warn, error };
// Device timeout of offloaded calls unless ACCL_PMPI_TIMEOUT_MS / ACCL_TIMEOUT_MS say otherwise.
constexpr int64_t kDefaultPmpiTimeoutMs = 300000;

struct Settings {
  bool offload = true;
  FallbackMode fallback = FallbackMode::silent;
  bool trace = false;
  bool stats = false;
  std::string device = "emu";
  std::array<bool, kNumCalls> enabled{};
  std::array<uint64_t, kNumCalls> min_bytes{};
  std::array<uint64_t, kNumCalls> max_bytes{};  // 0 = no limit
  bool p2p = true;                              // send and recv enabled
  unsigned rx_buffer_count = 16;
  size_t rx_buffer_size = 65536;
  size_t max_eager_size = 65536;
  size_t max_rendezvous_size = 4 << 20;
  size_t staging_limit = 64 << 20;
  size_t buffer_cache = 64;
  int64_t timeout_ms = kDefaultPmpiTimeoutMs;  // device timeout of offloaded calls
};

// ---------------------------------------------------------------------------
// Datatypes and ops (types.cpp)
// ---------------------------------------------------------------------------
enum class ElemClass : uint8_t { none, sint, uint, flt, cplx, other };

// A datatype flattened to "n basic elements of one class and size".
struct TypeInfo {
  ElemClass cls = ElemClass::none;  // none: heterogeneous or unknown
  uint8_t elem_size = 0;            // bytes of one basic element (complex: whole pair)
  bool contiguous = false;          // lb == true_lb == 0, extent == true extent == size
  int64_t size = 0;                 // bytes of one item of the type (PMPI_Type_size)
  int64_t extent = 0;
};
// Never fails: unknown types come back with cls == none.
TypeInfo type_info(MPI_Datatype type);
// A reference to `type` that survives the application's MPI_Type_free
// (MPI allows freeing a type while a pending operation uses it): a
// duplicate of a derived type, MPI_DATATYPE_NULL for a predefined one
// (never freed: use it as it is). Application thread only.
MPI_Datatype type_hold(MPI_Datatype type);
// Drops a type_hold() reference (mu held). On the progress thread, which
// calls no MPI function, the free waits for the next application thread's
// progress round (type_release_deferred).
void type_release(MPI_Datatype held);
void type_release_deferred();  // mu held, application thread
void types_init();  // builds the table of predefined types

// Device type + element count for pure data movement of `bytes` bytes
// (bytes are bytes: int32/int64 words so any payload travels unchanged).
struct Movement {
  dataType dtype = dataType::none;
  uint64_t elems = 0;
};
Movement movement(uint64_t bytes);

// Device type for a reduction over `info` items (count in device elements);
// reason != Offloaded when it cannot run on the device.
struct ReductionType {
  Reason reason = Reason::Offloaded;
  dataType dtype = dataType::none;
  reduceFunction func = reduceFunction::SUM;
  uint64_t elems_per_item = 0;
};
ReductionType reduction_type(const TypeInfo& info, MPI_Op op);

// ---------------------------------------------------------------------------
// Communicators (comm_registry.cpp)
// ---------------------------------------------------------------------------
struct ShadowReq;

// Envelope of one offloaded point-to-point message (p2p.cpp): a 32-byte
// header plus the message itself when it is small. The receiver pulls
// envelopes with receives of the largest size; a shorter message is fine.
struct Envelope {
  uint32_t magic;
  uint32_t flags;
  int32_t src;
  int32_t tag;
  uint32_t seq;           // device tag of the payload (and of the reply)
  uint32_t inline_bytes;  // bytes carried in data[]
  uint64_t bytes;         // whole message size in bytes
  // Only the header and inline_bytes of data travel (one device message);
  // receives take up to the whole struct.
  unsigned char data[4064];
};
static_assert(sizeof(Envelope) == 4096, "envelope receives are 1024 device words");

struct UnexpectedMsg {
  Envelope env;
  // Self messages carry their payload here (staged at send time).
  std::vector<unsigned char> self_data;
  ShadowReq* self_sync = nullptr;  // synchronous self send waiting for the match
  // An eager payload taken off the device into host staging (p2p.cpp: drain).
  ShadowReq* drain = nullptr;
};

struct CommState {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 0;
  bool accl = false;           // an ACCL communicator exists
  Reason native_reason = Reason::CommNative;
  bool p2p = false;            // point-to-point runs on ACCL (decided at birth, rank-uniform)
  communicatorId id = 0;
  uint32_t ctx = 0;
  bool is_world = false;
  bool freed = false;          // MPI_Comm_free ran; destroy when refs drop to 0
  int refs = 1;                // 1 for the communicator + 1 per live request

  // --- point-to-point engine state (guarded by State::mu) ---
  std::vector<uint32_t> send_seq;     // next message sequence number per destination
  std::vector<uint32_t> recv_expect;  // next sequence number expected per source
  std::vector<Envelope> reorder;      // envelopes that arrived ahead of their turn
  ShadowReq* posted_head = nullptr;
  ShadowReq* posted_tail = nullptr;
  std::deque<UnexpectedMsg> unexpected;
  RequestPtr pull;                       // outstanding envelope receive
  std::unique_ptr<Envelope> pull_env;    // where it lands
  std::shared_ptr<BaseBuffer> pull_buf;
  int demand = 0;                        // posted receives + probes + sends awaiting a reply
  std::vector<ShadowReq*> awaiting;      // sends waiting for the receiver's reply envelope
  bool in_active_list = false;
  // Per rank: the device's error bits of a link found failed (0 = none);
  // empty until the first failure. A failed member stays failed (p2p.cpp).
  std::vector<uint32_t> failed_link;
  // all-states list for teardown
  CommState* prev_all = nullptr;
  CommState* next_all = nullptr;
};

// Cheap, local verdict for a collective on `comm` (no communication):
// Offloaded with *cs set = ACCL communicator ready; Offloaded with *cs null =
// eligible but not created yet (comm_materialize creates it); otherwise the
// reason it stays native. Run without State::mu.
Reason comm_check(MPI_Comm comm, CommState** cs);
// Creates the ACCL communicator of an eligible comm, collectively over it.
// All members get here at the same call because the offload decision is
// rank-uniform. Check ->accl on the result. Run without State::mu.
CommState* comm_materialize(MPI_Comm comm);
// The state for point-to-point: only comms born through a wrapper (or world)
// may carry offloaded p2p. Null = native. Does not create anything.
CommState* comm_for_p2p(MPI_Comm comm);
CommState* comm_lookup(MPI_Comm comm);  // cached state or null
// Called by the creation wrappers after PMPI created `newcomm` (may be NULL).
void comm_created(MPI_Comm newcomm);
void comm_registry_init();  // keyvals, world state (after the device is up)
void comm_registry_teardown();
void comm_release(CommState* cs);  // drop a request's reference (mu held)

// ---------------------------------------------------------------------------
// Shadow requests (requests.cpp): MPI_Request handles for offloaded
// non-blocking operations, distinguished from Open MPI's by address.
// ---------------------------------------------------------------------------
enum class ReqKind : uint8_t { free, send, recv, coll, message };
enum class SendMode : uint8_t { standard, buffered, sync, ready };
enum class RecvState : uint8_t { inactive, posted, payload, done };

// Where the bytes of one item of a datatype live, in pack order
// (layout.cpp): a tree as large as the type's description.
struct TypeLayout {
  enum Kind : uint8_t { bytes, runs, strided, indexed, structure } kind = bytes;
  int64_t size = 0;    // data bytes of one item
  int64_t extent = 0;  // distance between consecutive items
  struct Run {
    int64_t offset;
    int64_t length;
  };
  struct Block {
    int64_t displ;
    int64_t len;  // children in a row, each one child extent further
    int child;    // index into children
  };
  // bytes: `size` bytes at offset 0; runs: run_list; strided: `count` blocks
  // of `blocklen` children[0], block i at i * stride; indexed / structure:
  // `blocks`.
  int64_t count = 0, blocklen = 0, stride = 0;
  std::vector<Run> run_list;
  std::vector<Block> blocks;
  std::vector<std::shared_ptr<const TypeLayout>> children;
};
// The layout of `type`, decoded once and cached on the type; null when it
// cannot be described. Application thread (makes MPI calls).
std::shared_ptr<const TypeLayout> type_layout(MPI_Datatype type);
// Copies the first `bytes` (at most one item) of packed `src` to where they
// belong in the item at `item`; no MPI call.
void place_leading_bytes(const TypeLayout& layout, void* item, const void* src, uint64_t bytes);
// Unpacks `bytes` of packed data into up to `count` items of `type` at `dst`
// by basic elements: the whole items through PMPI_Unpack, a trailing partial
// item through `layout`, touching nothing past the received bytes. Without
// a layout, `bytes` must be `count` whole items.
void unpack_elements(const void* src, uint64_t bytes, void* dst, int count, MPI_Datatype type,
                     const TypeLayout* layout);

// A host-side copy step run when an offloaded operation completes: `bytes`
// of staged data to the user's buffer (unpack: up to `count` items of
// `type`, a trailing partial item through `layout`).
struct PostCopy {
  enum Kind : uint8_t { none, unpack, memcpy_ } kind = none;
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
  int count = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  std::shared_ptr<const TypeLayout> layout;
};

struct Staging;

// What an offloaded call must keep alive until it completes: the ACCL
// wrappers of its buffers (the XRT backend pins user memory per wrapper) and
// staging blocks.
struct Held {
  std::shared_ptr<BaseBuffer> b[3];
  Staging* s[2] = {nullptr, nullptr};
  BaseBuffer& wrap(const void* ptr, uint64_t elems, dataType dtype);
  void* stage(size_t bytes);
  void* take_stage(Held& from);  // moves `from`'s first staging block here
  void release();  // mu held
};

struct ShadowReq {
  ReqKind kind = ReqKind::free;
  Call call = Call::Send;
  bool persistent = false;
  bool active = false;     // started and not yet completed by Wait/Test
  bool complete = false;   // operation finished (status valid)
  bool user_freed = false; // MPI_Request_free on an active request, or a detached blocking send
  bool detached = false;   // a blocking send that returned before completing
  bool cancelled = false;
  bool in_flight = false;  // linked in the in-flight list
  SendMode mode = SendMode::standard;
  RecvState rstate = RecvState::inactive;
  CommState* cs = nullptr;
  MPI_Comm comm = MPI_COMM_NULL;
  // arguments
  const void* buf = nullptr;
  int count = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  TypeInfo tinfo;      // type_info(type), taken at the entry point (no MPI call later)
  // Our reference to a derived `type` (type_hold) while the request may
  // still use it: MPI lets the application free the type meanwhile.
  MPI_Datatype type_ref = MPI_DATATYPE_NULL;
  uint64_t bytes = 0;  // count items of type (computed once at the entry point)
  // recv into a non-contiguous type: its layout, for a message that ends
  // inside an item (taken at the entry point; null: contiguous or unknown)
  std::shared_ptr<const TypeLayout> layout;
  int peer = 0;
  int tag = 0;
  const void* send_src = nullptr;  // send: contiguous bytes to send (user buffer or staging)
  // device work
  RequestPtr r[3];
  Held held;
  PostCopy post;
  // send: the outgoing envelope; recv/message: the matched one
  Envelope env{};
  // recv: the reply (clear-to-send / synchronous ack) sent back to the sender
  Envelope ctl{};
  // Wrappers of env/ctl: tied to the pool slot, created once, reused.
  std::shared_ptr<BaseBuffer> env_buf;
  std::shared_ptr<BaseBuffer> ctl_buf;
  // Point-to-point device calls go through the layer's slot budget (p2p.cpp):
  // budget class of each r[i] while it is on the device, operations still
  // queued on the host, and whether a send waits for the receiver's reply.
  uint8_t r_class[3] = {0, 0, 0};
  uint8_t queued_ops = 0;
  bool awaiting_reply = false;
  BaseBuffer* payload_buf = nullptr;  // held wrapper of the payload (re-posted receives)
  // self messages (message kind / matched recv)
  std::vector<unsigned char> self_data;
  ShadowReq* self_sync = nullptr;
  // Unexpected eager payloads leave the device at once (p2p.cpp: drain):
  // on a message handle, the drain that holds its bytes; on a drain, the
  // receive that matched it before its bytes were in.
  bool is_drain = false;
  ShadowReq* drain = nullptr;
  ShadowReq* adopter = nullptr;
  // result
  MPI_Status status{};
  int error = MPI_SUCCESS;
  std::string error_text;
  // links
  ShadowReq* next_posted = nullptr;
  ShadowReq* prev_flight = nullptr;
  ShadowReq* next_flight = nullptr;
  uint32_t index = 0;
  uint32_t next_free = 0;
};

void requests_init();
void requests_teardown();
ShadowReq* shadow_alloc(ReqKind kind, Call call);  // mu held
void shadow_free(ShadowReq* r);                    // mu held
bool is_shadow(const void* handle);
inline ShadowReq* as_shadow(MPI_Request r) { return reinterpret_cast<ShadowReq*>(r); }
inline MPI_Request as_request(ShadowReq* r) { return reinterpret_cast<MPI_Request>(r); }
// Fortran integer handles of shadow requests/messages (negative).
MPI_Fint shadow_c2f(ShadowReq* r);
ShadowReq* shadow_f2c(MPI_Fint f);
void flight_add(ShadowReq* r);     // mu held
void flight_remove(ShadowReq* r);  // mu held

// ---------------------------------------------------------------------------
// Point-to-point engine (p2p.cpp)
// ---------------------------------------------------------------------------
void p2p_start_send(ShadowReq* r);  // mu held
void p2p_start_recv(ShadowReq* r);  // mu held
bool p2p_cancel(ShadowReq* r);      // mu held; true when the receive was cancelled
void p2p_forget(ShadowReq* r);      // mu held; drops r's queued device work and slot budget (before freeing)
// Fills *status from a finished request, frees it unless persistent, and
// reports its error through the comm's error handler (no lock held).
int request_finish(ShadowReq* r, MPI_Status* status);
// Both keep status->MPI_ERROR (see requests.cpp).
void set_empty_status(MPI_Status* status);
void copy_status(MPI_Status* to, const MPI_Status& from);
// One round of progress over every comm and in-flight request (mu held).
// Runs on application threads and on the progress thread.
void progress_locked();
// Whether something a peer may be waiting for needs this host (mu held):
// device calls queued in the layer, posted receives or probes to match,
// sends waiting for the receiver's reply. The progress thread sleeps while
// there is none.
bool p2p_peer_may_wait();
// Drains detached sends at finalize (no lock held).
void p2p_drain();
void p2p_teardown();

// ---------------------------------------------------------------------------
// Asynchronous progress (progress_thread.cpp): runs progress_locked() while
// the application is away from the layer, so that offloaded point-to-point
// traffic completes while the application sits in a native MPI call.
// ---------------------------------------------------------------------------
void progress_thread_start();  // once the device is up and p2p is offloaded
void progress_thread_stop();   // teardown, no lock held
bool progress_thread_started();  // ever, in this process
// mu held: work that a peer may wait for was just added (wakes a sleeping thread).
void progress_thread_kick();
// True on the progress thread, which must call no MPI function: work that
// needs one waits for an application thread.
bool on_progress_thread();
// An application thread ran a progress round (the progress thread keeps out
// of the way meanwhile).
void note_app_progress();

// ---------------------------------------------------------------------------
// Collectives (collectives.cpp); req == nullptr: blocking
// ---------------------------------------------------------------------------
int coll_bcast(Call call, void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request* req);
int coll_reduce(Call call, const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                MPI_Comm comm, MPI_Request* req);
int coll_allreduce(Call call, const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                   MPI_Request* req);
int coll_gather(Call call, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request* req);
int coll_scatter(Call call, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                 MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request* req);
int coll_allgather(Call call, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                   MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req);
int coll_alltoall(Call call, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req);
int coll_reduce_scatter(Call call, const void* sbuf, void* rbuf, int rcount, const int* rcounts, MPI_Datatype type,
                        MPI_Op op, MPI_Comm comm, MPI_Request* req);
int coll_barrier(Call call, MPI_Comm comm, MPI_Request* req);

// ---------------------------------------------------------------------------
// Waiting (engine.cpp)
// ---------------------------------------------------------------------------
// Polls until done() is true, running ACCL and native progress. done() is
// evaluated with mu held.
template <typename F>
void wait_until(F&& done);
void native_progress();  // lets Open MPI progress its own pending traffic

// Paces one poll loop (one wait): accl/spin.hpp's PollPacer over the one
// spin budget of this process (at most 50 us). A wait that ends early in its
// spin doubles the budget it had (up to the 50 us), one that outlasts it
// halves it, down to zero when ranks share cores (4 ranks on 2 cores yield
// at once) and down to a floor when each rank has a core (configure()), so 2
// ranks on 2 cores hand messages back and forth without giving the core
// away. Every 64th wait probes with the full budget.
class PollPacer : public accl::PollPacer {
 public:
  PollPacer();
  // Once the rank count of this host is known (init).
  static void configure(unsigned host_ranks, unsigned cores);
  // Whether this round of the loop should also call native_progress():
  // once kNativeGrace after the process last did, or when the wait spun out
  // (every 16 rounds).
  bool native_progress_due() const;
};

// ---------------------------------------------------------------------------
// Buffers (engine.cpp)
// ---------------------------------------------------------------------------
// ACCL host-only buffer over user memory (cached; mu held).
std::shared_ptr<BaseBuffer> host_buffer(const void* ptr, uint64_t elems, dataType dtype);
struct Staging {
  void* ptr = nullptr;
  size_t bytes = 0;
  int size_class = 0;
  bool limited = false;  // counted against ACCL_P2P_STAGING_BYTES
  Staging* next = nullptr;
};
// Pooled staging memory (mu held). Null when `limited` and the pool's budget is spent.
Staging* staging_get(size_t bytes, bool limited = false);
void staging_put(Staging* s);
void engine_teardown();
// Local (de)serialisation of non-contiguous layouts; `bytes` = signature size
// (count x type size). Open MPI's native pack format is the raw data.
void pack_to(void* dst, uint64_t bytes, const void* src, int count, MPI_Datatype type);
void unpack_from(const void* src, uint64_t bytes, void* dst, int count, MPI_Datatype type);
void run_post_copy(const PostCopy& p);

// ---------------------------------------------------------------------------
// Errors (errors.cpp)
// ---------------------------------------------------------------------------
void errors_init();
// Maps the exception being handled to an MPI error code of our classes and
// remembers its text; `call` names the MPI call for messages.
int error_code_from_current_exception(Call call, std::string* text);
// Runs the communicator's error handler (fatal handlers abort with a message
// naming call, rank and cause) and returns the code for ERRORS_RETURN.
int raise_error(MPI_Comm comm, Call call, int code, const std::string& text);
// Runs the communicator's error handler with an MPI error class (predefined
// classes carry no text of ours: Open MPI refuses new strings for them), and
// prints `message` first when the handler is fatal. Returns `mpi_class`.
int raise_class(MPI_Comm comm, int mpi_class, const char* message);

// ---------------------------------------------------------------------------
// Buffer arguments (buffer_checks.cpp)
// ---------------------------------------------------------------------------
// One side of a call as this rank passes it; `significant`: MPI reads it on
// this rank (a non-root's receive side of MPI_Reduce is not).
struct BufferSide {
  const void* buf = nullptr;
  int64_t count = 0;  // items of `type` (a rooted side may hold size x count)
  MPI_Datatype type = MPI_DATATYPE_NULL;
  bool significant = true;
};
// What the call allows on this rank, and the class of each fault where native
// Open MPI reports it (see buffer_checks.cpp).
struct BufferRules {
  bool send_may_be_in_place = false;
  bool recv_may_be_in_place = false;
  int send_in_place_class = MPI_ERR_ARG;
  int recv_in_place_class = MPI_ERR_ARG;
  int overlap_class = MPI_ERR_BUFFER;
};
struct BufferFault {
  int mpi_class = MPI_SUCCESS;  // MPI_SUCCESS: nothing wrong
  const char* what = "";
  explicit operator bool() const { return mpi_class != MPI_SUCCESS; }
};
// Whether the buffer checks apply to a collective decided `why`: the layer is
// in the path and every other argument is valid MPI (`others_valid`: counts,
// types, op), so native MPI would not report anything first.
bool buffers_checked(Reason why, MPI_Comm comm, bool others_valid);
bool movement_args_valid(int scount, MPI_Datatype stype, int rcount, MPI_Datatype rtype);
BufferFault check_buffers(const BufferSide& send, const BufferSide& recv, const BufferRules& rules);
BufferFault check_p2p_buffer(const void* buf, int count, MPI_Datatype type);
// The one test on a point-to-point call's fast path: NULL or MPI_IN_PLACE.
inline bool suspect_buffer(const void* buf) { return buf == nullptr || buf == MPI_IN_PLACE; }
// The rules of each collective at this rank (`root`: this rank is the root).
BufferFault allreduce_buffers(const void* sbuf, const void* rbuf, int count, MPI_Datatype type);
BufferFault reduce_buffers(const void* sbuf, const void* rbuf, int count, MPI_Datatype type, bool root);
BufferFault reduce_scatter_buffers(const void* sbuf, const void* rbuf, int rcount, int size, MPI_Datatype type);
BufferFault bcast_buffer(const void* buf, int count, MPI_Datatype type);
BufferFault gather_buffers(const void* sbuf, int scount, MPI_Datatype stype, const void* rbuf, int rcount,
                           MPI_Datatype rtype, int size, bool root);
BufferFault scatter_buffers(const void* sbuf, int scount, MPI_Datatype stype, const void* rbuf, int rcount,
                            MPI_Datatype rtype, int size, bool root);
// Allgather (send_blocks 1) and alltoall (send_blocks = size).
BufferFault all_to_all_buffers(const void* sbuf, int scount, MPI_Datatype stype, const void* rbuf, int rcount,
                               MPI_Datatype rtype, int size, int send_blocks);
// Accounts the call as refused (Reason::BadBuffer) and raises the fault's
// class through the communicator's error handler; nothing is transferred.
class CallScope;
int reject_arguments(CallScope& scope, MPI_Comm comm, Call call, const BufferFault& fault, uint64_t bytes);

// ---------------------------------------------------------------------------
// Stats and trace (stats.cpp)
// ---------------------------------------------------------------------------
void stats_record(Call call, Reason reason, uint64_t bytes, uint64_t ns);
void stats_print();
void trace_line(Call call, Reason reason, uint64_t bytes, MPI_Comm comm, uint64_t ns);
// Applies ACCL_FALLBACK for a non-benign reason (warn line, or abort).
void fallback_policy(Call call, Reason reason, uint64_t bytes);

// Accounting for one intercepted call on the slow path: stats, trace and the
// ACCL_FALLBACK policy. Costs nothing beyond a flag test unless
// State::observe is set.
class CallScope {
 public:
  // account = false: part of another call (the halves of MPI_Sendrecv).
  explicit CallScope(Call call, bool account = true);
  ~CallScope();
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;
  // The call runs natively for `reason` (warns or aborts per ACCL_FALLBACK).
  void native(Reason reason, uint64_t bytes, MPI_Comm comm);
  void offloaded(uint64_t bytes, MPI_Comm comm);

 private:
  Call call_;
  bool on_;
  Reason reason_ = Reason::Offloaded;
  uint64_t bytes_ = 0;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::chrono::steady_clock::time_point start_;
};

// ---------------------------------------------------------------------------
// Global state
// ---------------------------------------------------------------------------

// The lock around the layer's state. Below MPI_THREAD_MULTIPLE, MPI lets only
// one thread at a time into the library (SERIALIZED: the application orders
// its threads' calls itself), and nothing but an MPI call touches this state,
// so the lock is taken only when MPI granted MULTIPLE. It was one uncontended
// lock and unlock per wait-loop round and per call, ~60 instructions each.
class LayerMutex {
 public:
  void lock() {
    if (needed_.load(std::memory_order_relaxed)) mu_.lock();
  }
  void unlock() {
    if (needed_.load(std::memory_order_relaxed)) mu_.unlock();
  }
  // Called by bring_up() alone, before the layer takes the lock the first
  // time: a lock taken before the switch would be released after it. (Atomic
  // only so that the model has no formal race: no other thread is in the
  // layer yet.)
  void set_needed(bool needed) { needed_.store(needed, std::memory_order_relaxed); }
  bool needed() const { return needed_.load(std::memory_order_relaxed); }

 private:
  std::mutex mu_;
  std::atomic<bool> needed_{true};
};

struct State {
  Settings s;
  bool initialized = false;  // our MPI_Init ran
  bool torn_down = false;
  bool active = false;       // ACCL is up: offload possible
  bool observe = false;      // stats, trace or a fallback policy other than silent
  int world_rank = 0;
  int world_size = 1;
  int thread_level = MPI_THREAD_SINGLE;  // what MPI granted (PMPI_Query_thread)
  MPI_Comm private_comm = MPI_COMM_NULL;  // bring-up, agreement and teardown traffic
  std::unique_ptr<ACCL> accl;
  std::vector<rank_t> world_ranks;
  bool can_min = false;
  bool can_prod = false;
  bool can_p2p = false;      // device has receive-side wildcards (kCapTagAnyRecv)
  bool can_alltoall = false;
  bool can_barrier = false;
  int comm_keyval = MPI_KEYVAL_INVALID;
  int type_keyval = MPI_KEYVAL_INVALID;
  int self_keyval = MPI_KEYVAL_INVALID;
  CommState* world = nullptr;
  std::atomic<uint32_t> next_ctx{64};
  LayerMutex mu;
  // error classes/codes (errors.cpp)
  int err_device = MPI_ERR_OTHER;
  int err_timeout = MPI_ERR_OTHER;
  int err_argument = MPI_ERR_OTHER;
};
// The layer's state, created on first use and never destroyed.
namespace detail {
extern std::atomic<State*> g_state;
State& create_state();
}  // namespace detail
// Read a dozen times per offloaded call: inline, one load after the first use.
inline State& state() {
  State* s = detail::g_state.load(std::memory_order_acquire);
  return s != nullptr ? *s : detail::create_state();
}
// Read on every intercepted call: true = go straight to PMPI (offload off or
// not initialized, no stats/trace). Written only in init/finalize.
extern bool g_native_only;

void teardown();  // idempotent; runs from the MPI_COMM_SELF delete callback

// Bytes of `count` items of `type` (0 for bad types). MPI_DATATYPE_NULL is
// not handed to PMPI_Type_size: Open MPI raises that on MPI_COMM_WORLD, whose
// handler is fatal by default, although the user's call may be on a
// communicator that returns errors (found by fuzz_mpi_args).
inline uint64_t bytes_of(int count, MPI_Datatype type) {
  int size = 0;
  if (count <= 0 || type == MPI_DATATYPE_NULL || PMPI_Type_size(type, &size) != MPI_SUCCESS || size < 0) return 0;
  return static_cast<uint64_t>(count) * static_cast<uint64_t>(size);
}

// bytes_of() and whether (count, type) describes a buffer at all, with one
// type lookup: point-to-point entry points need both on every call.
struct BufferBytes {
  uint64_t bytes = 0;
  bool valid = false;
};
inline BufferBytes buffer_bytes(int count, MPI_Datatype type) {
  int size = 0;
  if (count < 0 || type == MPI_DATATYPE_NULL || PMPI_Type_size(type, &size) != MPI_SUCCESS) return {};
  return {count == 0 || size < 0 ? 0 : static_cast<uint64_t>(count) * static_cast<uint64_t>(size), true};
}

// Decides the byte-threshold and call-list part of the policy (policy.cpp).
Reason policy_call(Call call, uint64_t bytes);

}  // namespace accl::pmpi

#include "wait.hpp"
