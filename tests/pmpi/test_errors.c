/* SPDX-License-Identifier: Apache-2.0
 *
 * Device errors in offloaded calls go through the communicator's MPI error
 * handler. Run with a short ACCL_TIMEOUT_MS (e.g. 300): rank 1 joins an
 * allreduce far too late, so rank 0's offloaded call times out.
 *
 *   test_errors return   MPI_ERRORS_RETURN: an error code of the layer's own
 *                        class comes back and MPI_Error_string explains it;
 *                        the job carries on (other comms still offload)
 *   test_errors fatal    MPI_ERRORS_ARE_FATAL: the job aborts with a message
 *                        naming the call, the rank and the cause
 */
#include "common.h"

#include <unistd.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &t_rank);
  int size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int fatal = argc > 1 && strcmp(argv[1], "fatal") == 0;
  const char* tms = getenv("ACCL_TIMEOUT_MS");
  const int timeout_ms = tms ? atoi(tms) : 10000;

  MPI_Comm bad;
  MPI_Comm_dup(MPI_COMM_WORLD, &bad);
  if (!fatal) MPI_Comm_set_errhandler(bad, MPI_ERRORS_RETURN);

  t_context = "late partner";
  float x[16] = {1}, y[16];
  if (t_rank == 1) usleep((useconds_t)timeout_ms * 3000);
  int rc = MPI_Allreduce(x, y, 16, MPI_FLOAT, MPI_SUM, bad);
  if (t_rank == 0 && size > 1 && layer_active()) {
    CHECK(rc != MPI_SUCCESS, "a timed-out offloaded allreduce returned MPI_SUCCESS");
    int cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls > MPI_ERR_LASTCODE, "error class %d is not one of the layer's", cls);
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    CHECK(strstr(text, "MPI_Allreduce") != NULL && strstr(text, "rank 0") != NULL,
          "error string does not name call and rank: '%s'", text);
    printf("rank 0 got error %d class %d: %s\n", rc, cls, text);
    fflush(stdout);
  }
  /* the job carries on: everyone meets again natively, then on the device */
  PMPI_Barrier(MPI_COMM_WORLD);
  t_context = "after the error";
  int v = 1, s = 0;
  CHECK_RC(MPI_Allreduce(&v, &s, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  CHECK(s == size, "sum %d", s);
  MPI_Comm_free(&bad);
  return finish("test_errors");
}
