/* SPDX-License-Identifier: Apache-2.0
 *
 * MPI_THREAD_MULTIPLE: the layer passes the granted level on unchanged, so it
 * must stay correct with several threads in MPI at once. Each of THREADS
 * threads owns a communicator (MPI forbids concurrent collectives on one)
 * and runs collectives and a p2p ring on it while the others do the same.
 */
#include "common.h"

#include <pthread.h>

#define THREADS 3
#define ITERS 40

static MPI_Comm comms[THREADS];
static int rank, size;
static int thread_failures[THREADS];

static void* worker(void* arg) {
  const int t = (int)(long)arg;
  MPI_Comm c = comms[t];
  int bad = 0;
  int buf[512], out[512];
  for (int it = 0; it < ITERS; ++it) {
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
  }
  thread_failures[t] = bad;
  return NULL;
}

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  t_rank = rank;
  if (provided < MPI_THREAD_MULTIPLE) {
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
