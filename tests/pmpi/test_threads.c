/* SPDX-License-Identifier: Apache-2.0
 *
 * MPI_THREAD_MULTIPLE: the layer passes the granted level on unchanged, so it
 * must stay correct with several threads in MPI at once. Each of THREADS
 * threads owns a communicator (MPI forbids concurrent collectives on one)
 * and runs collectives and a p2p ring on it while the others do the same.
 *
 * Argument "serialized": MPI_THREAD_SERIALIZED, where the layer takes no lock
 * of its own. The threads take turns, one iteration each in thread order (the
 * same order on every rank, so the collectives meet), and never overlap in
 * MPI: the layer's state passes from thread to thread through the
 * application's own mutex.
 */
#include "common.h"

#include <pthread.h>

#define THREADS 3
#define ITERS 40

static MPI_Comm comms[THREADS];
static int rank, size;
static int thread_failures[THREADS];
static int serialized;
static pthread_mutex_t turn_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn_changed = PTHREAD_COND_INITIALIZER;
static int turn; /* serialized: whose iteration is next, t + THREADS * it */

static void wait_turn(int t, int it) {
  pthread_mutex_lock(&turn_mutex);
  while (turn != t + THREADS * it) pthread_cond_wait(&turn_changed, &turn_mutex);
}

static void end_turn(void) {
  ++turn;
  pthread_cond_broadcast(&turn_changed);
  pthread_mutex_unlock(&turn_mutex);
}

static void* worker(void* arg) {
  const int t = (int)(long)arg;
  MPI_Comm c = comms[t];
  int bad = 0;
  int buf[512], out[512];
  for (int it = 0; it < ITERS; ++it) {
    if (serialized) wait_turn(t, it);
    for (int i = 0; i < 512; ++i) buf[i] = rank + i + t + it;
    MPI_Allreduce(buf, out, 512, MPI_INT, MPI_SUM, c);
    for (int i = 0; i < 512; ++i) bad += out[i] != size * (i + t + it) + size * (size - 1) / 2;
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Request rq[2];
    int in = -1, me = rank * 100 + t;
    MPI_Irecv(&in, 1, MPI_INT, left, it, c, &rq[0]);
    MPI_Isend(&me, 1, MPI_INT, right, it, c, &rq[1]);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    bad += in != left * 100 + t;
    int root_val = it;
    MPI_Bcast(&root_val, 1, MPI_INT, it % size, c);
    bad += root_val != it;
    if (serialized) end_turn();
  }
  thread_failures[t] = bad;
  return NULL;
}

int main(int argc, char** argv) {
  int provided = 0;
  serialized = argc > 1 && strcmp(argv[1], "serialized") == 0;
  const int required = serialized ? MPI_THREAD_SERIALIZED : MPI_THREAD_MULTIPLE;
  MPI_Init_thread(&argc, &argv, required, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  t_rank = rank;
  if (provided < required) {
    if (rank == 0) printf("test_threads: skipped (MPI grants level %d)\n", provided);
    MPI_Finalize();
    return 77;
  }
  for (int t = 0; t < THREADS; ++t) MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; ++t) pthread_create(&th[t], NULL, worker, (void*)(long)t);
  for (int t = 0; t < THREADS; ++t) pthread_join(th[t], NULL);
  t_context = "threads";
  for (int t = 0; t < THREADS; ++t) {
    CHECK(thread_failures[t] == 0, "thread %d saw %d wrong results", t, thread_failures[t]);
    MPI_Comm_free(&comms[t]);
  }
  expect_offloaded("MPI_Allreduce");
  return finish("test_threads");
}
