/* SPDX-License-Identifier: Apache-2.0
 *
 * The interleaving stress program (interleave.c) and its operation families:
 * point-to-point (ops_p2p.c) and collective / native calls (ops_coll.c).
 * Every operation is collective over one communicator of the pool: all its
 * members call it with the same step generator, draw the same parameters
 * and check what they received. */
#ifndef ACCL_CONFORMANCE_INTERLEAVE_H
#define ACCL_CONFORMANCE_INTERLEAVE_H

#include "conformance.h"

typedef struct {
  MPI_Comm comm;
  int rank, size;
  int step;
  cf_rng g; /* this step's generator: same draws on every member */
} cf_ctx;

/* Salt of one message / block: distinct per step, sender, receiver, index. */
static inline uint64_t cf_salt(int step, int from, int to, int index) {
  return ((uint64_t)(unsigned)step << 32) ^ ((uint64_t)(unsigned)from << 20) ^ ((uint64_t)(unsigned)to << 8) ^
         (uint64_t)(unsigned)index ^ 0x51ull;
}

/* Point-to-point (ops_p2p.c). */
/* Pairs exchange one message each way: a random send mode against a random
 * receive path (blocking, non-blocking with every wait/test, wildcards,
 * probe, matched probe, persistent). */
void op_pairs(cf_ctx* c);
/* Every rank sends a message of its own size to one root, which receives
 * them with MPI_ANY_SOURCE/MPI_ANY_TAG through probe or matched probe. */
void op_fan_in(cf_ctx* c);
/* One rank sends many messages with blocking sends to a slow receiver and
 * goes straight on into a native call (the progress rule). */
void op_burst_then_native(cf_ctx* c);
/* Receives posted, then a collective, then the sends, then MPI_Waitall. */
void op_pending_across_collective(cf_ctx* c);
/* The final burst: rank 0 sends to the last rank and enters MPI_Finalize
 * while the receiver is still at work. Returns the receiver's failures. */
int final_burst_to_slow_receiver(int rank, int size, uint64_t seed);

/* Collectives and native calls (ops_coll.c). */
void ops_coll_init(void);
void ops_coll_fini(void);
/* One offloadable collective (blocking or non-blocking) with checked data. */
void op_collective(cf_ctx* c);
/* One call the layer runs natively: user-defined or bitwise reductions,
 * communicator dup/split/free, calls it does not intercept (MPI_Alltoallv,
 * MPI_Scan, MPI_Exscan, MPI_Allgatherv, one-sided with MPI_Win_fence). */
void op_native(cf_ctx* c);
/* A run of broadcasts from one root, then from the next. */
void op_bcast_run(cf_ctx* c, int per_root, int roots);

#endif
