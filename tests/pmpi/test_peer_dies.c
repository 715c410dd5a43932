/* SPDX-License-Identifier: Apache-2.0
 *
 * A peer process killed (or frozen) in the middle of a sequence of large
 * collectives. The last rank is the victim: a thread of its own sends it
 * SIGKILL (or SIGSTOP) `delay_ms` after everyone entered a loop of
 * MPI_Allreduce and MPI_Bcast (1 MiB each, offloaded). Every other rank must
 * get an error from the call it is in within the device timeout, through the
 * communicator's error handler:
 *
 *   test_peer_dies return|fatal kill|stop DIR [delay_ms]
 *
 *   return   MPI_ERRORS_RETURN: each survivor writes DIR/rank<R>.txt with the
 *            call, the error class, the time the call took and
 *            MPI_Error_string, then exits on its own (no MPI_Finalize: MPI
 *            cannot shut down with a dead member)
 *   fatal    MPI_ERRORS_ARE_FATAL: the layer prints a line naming call, rank
 *            and cause, then MPI aborts the job
 *   kill     the victim dies (its links close: LINK_ERROR at once)
 *   stop     the victim freezes (links stay up: the device timeout must fire);
 *            the runner kills it once the survivors are done (DIR/victim.pid)
 *
 * Run by peer_dies.py, which checks the files, the timing and that the job
 * ends by itself.
 */
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int g_signal;
static int g_delay_ms;

static void* executioner(void* arg) {
  (void)arg;
  usleep((useconds_t)g_delay_ms * 1000);
  kill(getpid(), g_signal);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: test_peer_dies return|fatal kill|stop DIR [delay_ms]\n");
    return 2;
  }
  const int fatal = strcmp(argv[1], "fatal") == 0;
  g_signal = strcmp(argv[2], "stop") == 0 ? SIGSTOP : SIGKILL;
  const char* dir = argv[3];
  g_delay_ms = argc > 4 ? atoi(argv[4]) : 50;
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, fatal ? MPI_ERRORS_ARE_FATAL : MPI_ERRORS_RETURN);

  enum { kCount = 1 << 18, kRounds = 100000 }; /* 1 MiB of floats; the loop ends by the error */
  float* a = malloc(sizeof(float) * kCount);
  float* b = malloc(sizeof(float) * kCount);
  for (int i = 0; i < kCount; ++i) a[i] = (float)(rank + i % 7);
  const int victim = size - 1;
  char path[4096];
  if (rank == victim) {
    snprintf(path, sizeof path, "%s/victim.pid", dir);
    FILE* f = fopen(path, "w");
    if (f) {
      fprintf(f, "%d\n", (int)getpid());
      fclose(f);
    }
  }
  MPI_Barrier(comm);
  if (rank == victim) {
    pthread_t t;
    pthread_create(&t, NULL, executioner, NULL);
  }
  for (int round = 0; round < kRounds; ++round) {
    for (int step = 0; step < 2; ++step) {
      const char* call = step == 0 ? "MPI_Allreduce" : "MPI_Bcast";
      const double t0 = now_ms();
      const int rc = step == 0 ? MPI_Allreduce(a, b, kCount, MPI_FLOAT, MPI_SUM, comm)
                               : MPI_Bcast(b, kCount, MPI_FLOAT, round % size, comm);
      const double took = now_ms() - t0;
      if (rc == MPI_SUCCESS) continue;
      int cls = -1, len = 0;
      char text[MPI_MAX_ERROR_STRING];
      MPI_Error_class(rc, &cls);
      MPI_Error_string(rc, text, &len);
      snprintf(path, sizeof path, "%s/rank%d.txt", dir, rank);
      FILE* f = fopen(path, "w");
      if (f) {
        fprintf(f, "rank=%d round=%d call=%s rc=%d class=%d ms=%.0f\nstring=%s\n", rank, round, call, rc, cls, took,
                text);
        fclose(f);
      }
      printf("rank %d: %s failed after %.0f ms: %s\n", rank, call, took, text);
      fflush(stdout);
      _exit(3); /* survivors leave on their own; mpirun must not have to kill them */
    }
  }
  printf("rank %d: %d rounds succeeded although rank %d was %s\n", rank, kRounds, victim, argv[2]);
  fflush(stdout);
  _exit(4);
}
