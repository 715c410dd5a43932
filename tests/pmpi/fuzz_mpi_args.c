/* SPDX-License-Identifier: Apache-2.0
 *
 * Bounded-time fuzz of the layer's MPI-argument handling (issue 38): random
 * calls with random counts, datatypes, ops, roots and buffer pointers (valid,
 * NULL, MPI_IN_PLACE, aliased, overlapping), under MPI_ERRORS_RETURN. Every
 * rank draws from the same seed, so all ranks make the same call with the same
 * kind of fault: a case is either valid everywhere (then the result is checked
 * against the expected values) or invalid everywhere on a side every rank
 * passes (then the call must return an error and leave the buffers alone).
 * Nothing may crash (run it under ASan), hang (the runner's timeout) or return
 * MPI_SUCCESS for arguments MPI forbids.
 *
 *   fuzz_mpi_args SECONDS [SEED]
 */
#include "common.h"

#include <stdint.h>
#include <time.h>

#define MAXN 4096
#define SENT 0x5a

static int sbuf[4 * MAXN * 4], rbuf[4 * MAXN * 4];
static uint64_t rng_state;

static uint32_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state >> 11);
}
static int pick(int n) { return (int)(rnd() % (uint32_t)n); }

enum Ptr { P_VALID, P_NULL, P_IN_PLACE, P_SAME, P_OVERLAP, P_KINDS };
enum Kind { K_ALLREDUCE, K_BCAST, K_REDUCE, K_GATHER, K_SCATTER, K_ALLGATHER, K_ALLTOALL, K_RSB, K_SENDRECV, K_KINDS };
static const char* kind_name[] = {"allreduce", "bcast",    "reduce",         "gather",  "scatter",
                                  "allgather", "alltoall", "reduce_scatter", "sendrecv"};
static const char* ptr_name[] = {"valid", "NULL", "IN_PLACE", "same", "overlap"};

static void fill(void) {
  for (int i = 0; i < (int)(sizeof sbuf / sizeof sbuf[0]); ++i) sbuf[i] = t_rank * 100000 + i;
  memset(rbuf, SENT, sizeof rbuf);
}
static int sbuf_intact(void) {
  for (int i = 0; i < (int)(sizeof sbuf / sizeof sbuf[0]); ++i)
    if (sbuf[i] != t_rank * 100000 + i) return 0;
  return 1;
}
static int rbuf_untouched(void) {
  const unsigned char* p = (const unsigned char*)rbuf;
  for (size_t i = 0; i < sizeof rbuf; ++i)
    if (p[i] != SENT) return 0;
  return 1;
}

/* The pointer a side gets. `other` is the other side's valid pointer. */
static void* side(int how, void* valid, void* other) {
  switch (how) {
    case P_NULL: return NULL;
    case P_IN_PLACE: return MPI_IN_PLACE;
    case P_SAME: return other;
    /* 1-3 bytes in: inside any non-empty side whatever count and type */
    case P_OVERLAP: return (char*)other + 1 + pick(3);
    default: return valid;
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int size;
  MPI_Comm_rank(MPI_COMM_WORLD, &t_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const double seconds = argc > 1 ? atof(argv[1]) : 10.0;
  uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 0) : (uint64_t)time(NULL);
  MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);  /* the same draws on every rank */
  rng_state = seed | 1;
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Datatype pair;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  MPI_Type_commit(&pair);
  const int verbose = getenv("FUZZ_VERBOSE") != NULL;
  const double t0 = MPI_Wtime();
  long cases = 0, rejected = 0, checked = 0;
  const int peer = (t_rank + 1) % size, from = (t_rank + size - 1) % size;

  for (;;) {
    /* collective decision: time is up on rank 0, or a rank found a failure */
    int mine = (t_rank == 0 && MPI_Wtime() - t0 > seconds) || t_failures > 0, stop = 0;
    PMPI_Allreduce(&mine, &stop, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (stop) break;
    ++cases;
    const int kind = pick(K_KINDS);
    /* counts: mostly small valid, sometimes 0, 1, large or negative */
    const int c_draw = pick(10);
    const int count = c_draw == 0   ? 0
                      : c_draw == 1 ? 1
                      : c_draw == 2 ? -1 - pick(3)
                      : c_draw == 3 ? MAXN
                                    : 1 + pick(300);
    const int t_draw = pick(8);
    const int reduction = kind == K_ALLREDUCE || kind == K_REDUCE || kind == K_RSB;
    /* the derived type only where MPI defines it: data movement */
    const MPI_Datatype type = t_draw == 0 ? MPI_DATATYPE_NULL : t_draw == 1 && !reduction ? pair : MPI_INT;
    const int elems = type == pair ? 2 : 1; /* ints per item */
    const int o_draw = pick(10);
    const MPI_Op op = o_draw == 0 ? MPI_OP_NULL : o_draw == 1 ? MPI_MAX : MPI_SUM;
    const int r_draw = pick(10);
    const int root = r_draw == 0 ? size : r_draw == 1 ? -1 : pick(size);
    /* Faults go only to sides every rank passes, so that a case is bad on
     * all ranks or on none (a rooted call's root-only side stays valid). */
    int sp = P_VALID, rp = P_VALID;
    if (pick(3) == 0) {
      const int how = 1 + pick(P_KINDS - 1);
      switch (kind) {
        case K_REDUCE: case K_GATHER: sp = how == P_IN_PLACE || how >= P_SAME ? P_NULL : how; break;
        case K_SCATTER: rp = how == P_IN_PLACE || how >= P_SAME ? P_NULL : how; break;
        case K_BCAST: sp = how >= P_SAME ? P_NULL : how; break;
        case K_SENDRECV: if (pick(2)) sp = how >= P_SAME ? P_NULL : how; else rp = how >= P_SAME ? P_NULL : how; break;
        default:
          if (how == P_IN_PLACE) rp = P_IN_PLACE;  /* sendbuf IN_PLACE is valid here */
          else if (pick(2)) sp = how; else rp = how;
      }
    }
    /* Open MPI 4.1 itself raises MPI_IN_PLACE with MPI_DATATYPE_NULL or a
     * negative count on MPI_COMM_WORLD (fatal here), whatever the call's
     * communicator says (MPI_Alltoall) */
    if (type == MPI_DATATYPE_NULL || count < 0) {
      if (sp == P_IN_PLACE) sp = P_NULL;
      if (rp == P_IN_PLACE) rp = P_NULL;
    }
    fill();
    /* an aliased or overlapping side points into the other side's buffer */
    void* s = side(sp, sbuf, rbuf);
    void* r = side(rp, rbuf, sbuf);
    const int rooted = kind == K_BCAST || kind == K_REDUCE || kind == K_GATHER || kind == K_SCATTER;
    const int bad_args = count < 0 || type == MPI_DATATYPE_NULL || (rooted && (root < 0 || root >= size)) ||
                         (op == MPI_OP_NULL && reduction);
    /* With nothing to move, NULL and overlap are no fault; a misplaced
     * MPI_IN_PLACE still is, except in point-to-point calls. */
    const int in_place = sp == P_IN_PLACE || rp == P_IN_PLACE;
    const int faulty = (sp != P_VALID || rp != P_VALID) && (count > 0 || (in_place && kind != K_SENDRECV));
    const int cnt = count;
    char what[160];
    snprintf(what, sizeof what, "case %ld seed %llu: %s count %d %s op %s root %d send %s recv %s", cases,
             (unsigned long long)seed, kind_name[kind], count, type == pair ? "pair" : type == MPI_INT ? "int" : "null",
             op == MPI_SUM ? "sum" : op == MPI_MAX ? "max" : "null", root, ptr_name[sp], ptr_name[rp]);
    t_context = what;
    if (verbose) fprintf(stderr, "[rank %d] %s\n", t_rank, what);
    int rc = MPI_SUCCESS;
    switch (kind) {
      case K_ALLREDUCE: rc = MPI_Allreduce(s, r, cnt, type, op, comm); break;
      case K_BCAST: rc = MPI_Bcast(s, cnt, type, root, comm); break;
      case K_REDUCE: rc = MPI_Reduce(s, r, cnt, type, op, root, comm); break;
      case K_GATHER: rc = MPI_Gather(s, cnt, type, r, cnt, type, root, comm); break;
      case K_SCATTER: rc = MPI_Scatter(s, cnt, type, r, cnt, type, root, comm); break;
      case K_ALLGATHER: rc = MPI_Allgather(s, cnt, type, r, cnt, type, comm); break;
      case K_ALLTOALL: rc = MPI_Alltoall(s, cnt, type, r, cnt, type, comm); break;
      case K_RSB: rc = MPI_Reduce_scatter_block(s, r, cnt, type, op, comm); break;
      case K_SENDRECV:
        rc = MPI_Sendrecv(s, cnt, type, peer, 9, r, cnt, type, from, 9, comm, MPI_STATUS_IGNORE);
        break;
    }
    if (bad_args || faulty) {
      if (!bad_args) {
        CHECK(rc != MPI_SUCCESS, "MPI_SUCCESS for a buffer MPI forbids");
        CHECK(sbuf_intact(), "the send buffer changed");
        if (sp != P_SAME && sp != P_OVERLAP && rp != P_SAME && rp != P_OVERLAP)
          CHECK(rbuf_untouched(), "the receive buffer changed although the call failed");
      }
      if (rc != MPI_SUCCESS) ++rejected;
    } else {
      CHECK(rc == MPI_SUCCESS, "rc %d for valid arguments", rc);
      if (rc == MPI_SUCCESS && kind == K_ALLREDUCE && op == MPI_SUM && count > 0) {
        ++checked;
        const int n = count * elems;
        for (int i = 0; i < n; ++i) {
          long want = 0;
          for (int q = 0; q < size; ++q) want += q * 100000L + i;
          if (rbuf[i] != (int)want) {
            CHECK(0, "allreduce element %d is %d, want %ld", i, rbuf[i], want);
            break;
          }
        }
      }
      if (rc == MPI_SUCCESS && kind == K_BCAST && count > 0) {
        ++checked;
        const int n = count * elems;
        for (int i = 0; i < n; ++i)
          if (sbuf[i] != root * 100000 + i) {
            CHECK(0, "bcast element %d is %d, want %d", i, sbuf[i], root * 100000 + i);
            break;
          }
      }
    }
    if (t_failures > 0) break;
  }
  t_context = "summary";
  if (t_rank == 0)
    printf("fuzz_mpi_args: %ld cases (%ld refused, %ld results checked), seed %llu\n", cases, rejected, checked,
           (unsigned long long)seed);
  MPI_Type_free(&pair);
  MPI_Comm_free(&comm);
  return finish("fuzz_mpi_args");
}
