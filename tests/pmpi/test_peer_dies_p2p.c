/* SPDX-License-Identifier: Apache-2.0
 *
 * Point-to-point with a member that dies (issue 38, defect 7). Three ranks
 * on a communicator with MPI_ERRORS_RETURN; rank 2 kills itself (SIGKILL)
 * shortly after a barrier (which opened the links), rank 1 checks, rank 0 is
 * a live peer:
 *
 *   - MPI_Recv from rank 2 fails (it used to wait forever) with an error that
 *     names rank 2 and LINK_ERROR;
 *   - an MPI_ANY_SOURCE receive pending when rank 2 died fails too;
 *   - MPI_Isend + MPI_Wait to rank 2 (eager and rendezvous size) fail and do
 *     not hang; so does a later MPI_Recv from rank 2;
 *   - receives from rank 0 (one pending across the failure, later ones, and
 *     an MPI_ANY_SOURCE one posted after it) still get rank 0's data: one
 *     dead member must not take the communicator's point-to-point down.
 *
 * Ranks exit with _exit (MPI cannot finalize with a dead member); rank 1
 * prints "test_peer_dies_p2p: passed" only if every check held. Run under
 * mpirun --enable-recovery (orte_enable_recovery=1) and
 * orte_abort_on_non_zero_status=0, so the victim's death does not end the job.
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int g_failures;

static void expect_failure(int rc, const char* what) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (rc == MPI_SUCCESS) {
    printf("FAILED: %s succeeded although rank 2 is dead\n", what);
    g_failures++;
    return;
  }
  MPI_Error_string(rc, text, &len);
  if (strstr(text, "rank 2") == NULL || strstr(text, "LINK_ERROR") == NULL) {
    printf("FAILED: %s: the error does not name rank 2 and LINK_ERROR: %s\n", what, text);
    g_failures++;
    return;
  }
  printf("ok: %s failed: %s\n", what, text);
}

static void expect_value(int rc, int got, int want, const char* what) {
  if (rc != MPI_SUCCESS || got != want) {
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (rc != MPI_SUCCESS) MPI_Error_string(rc, text, &len);
    printf("FAILED: %s: rc %d value %d (want %d) %s\n", what, rc, got, want, text);
    g_failures++;
    return;
  }
  printf("ok: %s got %d\n", what, got);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 3) {
    if (rank == 0) fprintf(stderr, "test_peer_dies_p2p needs 3 ranks\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Barrier(comm);

  if (rank == 2) {
    usleep(300 * 1000);
    kill(getpid(), SIGKILL);
    pause();
  }
  if (rank == 0) {
    /* After rank 2 is gone (rank 1 may or may not have noticed yet). */
    sleep(1);
    int v = 42;
    MPI_Send(&v, 1, MPI_INT, 1, 5, comm);
    v = 43;
    MPI_Send(&v, 1, MPI_INT, 1, 6, comm);
    v = 44;
    MPI_Send(&v, 1, MPI_INT, 1, 8, comm);
    MPI_Recv(&v, 1, MPI_INT, 1, 9, comm, MPI_STATUS_IGNORE); /* rank 1 has everything */
    fflush(stdout);
    _exit(0);
  }

  /* rank 1 */
  int from0 = 0, any = 0, x = 0;
  MPI_Request r_from0, r_any;
  MPI_Irecv(&from0, 1, MPI_INT, 0, 5, comm, &r_from0);
  MPI_Irecv(&any, 1, MPI_INT, MPI_ANY_SOURCE, 7, comm, &r_any);
  expect_failure(MPI_Recv(&x, 1, MPI_INT, 2, 0, comm, MPI_STATUS_IGNORE), "MPI_Recv from rank 2");
  expect_failure(MPI_Wait(&r_any, MPI_STATUS_IGNORE), "MPI_ANY_SOURCE receive pending when rank 2 died");

  enum { kBig = 1 << 16 }; /* 256 KiB: a rendezvous-size message */
  int* big = calloc(kBig, sizeof(int));
  const int counts[2] = {1, kBig};
  for (int i = 0; i < 2; ++i) {
    MPI_Request s;
    int rc = MPI_Isend(big, counts[i], MPI_INT, 2, 0, comm, &s);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&s, MPI_STATUS_IGNORE);
    expect_failure(rc, i == 0 ? "MPI_Isend+MPI_Wait of 4 bytes to rank 2" : "MPI_Isend+MPI_Wait of 256 KiB to rank 2");
  }
  expect_failure(MPI_Recv(&x, 1, MPI_INT, 2, 0, comm, MPI_STATUS_IGNORE), "a later MPI_Recv from rank 2");

  int rc = MPI_Wait(&r_from0, MPI_STATUS_IGNORE);
  expect_value(rc, from0, 42, "receive from rank 0 pending across the failure");
  rc = MPI_Recv(&x, 1, MPI_INT, 0, 6, comm, MPI_STATUS_IGNORE);
  expect_value(rc, x, 43, "MPI_Recv from rank 0 after the failure");
  MPI_Status st;
  rc = MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 8, comm, &st);
  expect_value(rc, x, 44, "MPI_ANY_SOURCE receive posted after the failure");
  if (rc == MPI_SUCCESS && st.MPI_SOURCE != 0) {
    printf("FAILED: the MPI_ANY_SOURCE receive reports source %d, not 0\n", st.MPI_SOURCE);
    g_failures++;
  }
  MPI_Ssend(&x, 1, MPI_INT, 0, 9, comm); /* synchronous: delivered before we exit */
  printf(g_failures == 0 ? "test_peer_dies_p2p: passed\n" : "test_peer_dies_p2p: %d checks failed\n", g_failures);
  fflush(stdout);
  free(big);
  _exit(g_failures == 0 ? 0 : 1);
}
