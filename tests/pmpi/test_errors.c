/* SPDX-License-Identifier: Apache-2.0
 *
 * Device errors in offloaded calls go through the communicator's MPI error
 * handler. Run with a short device timeout (ACCL_PMPI_TIMEOUT_MS or
 * ACCL_TIMEOUT_MS, e.g. 300): rank 1 joins an allreduce far too late, so
 * rank 0's offloaded call times out.
 *
 *   test_errors return   MPI_ERRORS_RETURN: an error code of the layer's own
 *                        class comes back and MPI_Error_string explains it;
 *                        the job carries on (other comms still offload)
 *   test_errors fatal    MPI_ERRORS_ARE_FATAL: the job aborts with a message
 *                        naming the call, the rank and the cause
 *   test_errors late MS [allreduce-only]
 *                        no error: rank 1 enters an allreduce, then rank 0 a
 *                        bcast, MS milliseconds after the others (MPI allows
 *                        it); run
 *                        with a PMPI timeout above MS (and a shorter
 *                        ACCL_TIMEOUT_MS, which the PMPI one overrides)
 */
#include "common.h"

#include <unistd.h>

int main(int argc, char** argv) {
  int size;
  init_world(&argc, &argv, &t_rank, &size);
  const int fatal = mode_is(argc, argv, "fatal");
  const char* tms = getenv("ACCL_PMPI_TIMEOUT_MS");
  if (tms == NULL || *tms == 0) tms = getenv("ACCL_TIMEOUT_MS");
  const int timeout_ms = tms && *tms ? atoi(tms) : 300000;
  if (argc > 2 && mode_is(argc, argv, "late")) {
    const int late_ms = atoi(argv[2]);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    t_context = "late joiner";
    int v[64], s[64];
    for (int i = 0; i < 64; ++i) v[i] = t_rank + i;
    if (t_rank == 1) usleep((useconds_t)late_ms * 1000);
    int rc = MPI_Allreduce(v, s, 64, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK_RC(rc);
    int bad = 0;
    for (int i = 0; i < 64; ++i) bad += s[i] != size * (size - 1) / 2 + size * i;
    CHECK(rc != MPI_SUCCESS || bad == 0, "%d wrong sums", bad);
    if (argc < 4 || strcmp(argv[3], "allreduce-only") != 0) {
      if (t_rank == 0) usleep((useconds_t)late_ms * 1000); /* now the root is late */
      rc = MPI_Bcast(s, 64, MPI_INT, 0, MPI_COMM_WORLD);
      CHECK_RC(rc);
    }
    CHECK(offloaded_calls("MPI_Allreduce") > 0 || !layer_active(), "the allreduce was not offloaded");
    return finish("test_errors late");
  }

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
