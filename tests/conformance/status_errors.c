/* SPDX-License-Identifier: Apache-2.0
 *
 * Status rules on the error path (MPI 3.1 sections 3.2.5, 3.7.5): with
 * MPI_ERRORS_RETURN, a truncated receive makes MPI_Recv, MPI_Wait,
 * MPI_Test, MPI_Mrecv, MPI_Waitany and MPI_Sendrecv return MPI_ERR_TRUNCATE
 * and leave status.MPI_ERROR alone; MPI_Waitall, MPI_Testall, MPI_Waitsome
 * and MPI_Testsome return MPI_ERR_IN_STATUS and set MPI_ERROR of every
 * status: the error for the truncated one, MPI_SUCCESS (or MPI_ERR_PENDING,
 * for requests not completed) for the others. The layer keeps working
 * afterwards: every round ends with a correct exchange.
 *
 *   status_errors [rounds=N] [mpi_error=0]
 *
 * Rank pairs (0,1), (2,3)... exchange; an odd last rank only joins the
 * final check. */
#include "conformance.h"

CF_DEFINE_GLOBALS

enum { TRUNC_TAG = 7, GOOD_TAG = 8 };

static int error_class(int code) {
  int cls = -1;
  MPI_Error_class(code, &cls);
  return cls;
}

/* The receiver's side of one case: a 4-int message into room for 2
 * (truncated) plus a 1-int message received correctly alongside. */
static void receive_case(int which, int peer, int round) {
  int small[2] = {-1, -1}, good = -1, rc = MPI_SUCCESS;
  MPI_Status st[2];
  MPI_Request rq[2];
  MPI_Message msg;
  int index = -1, flag = 0, outcount = 0, indices[2];
  static const char* const names[] = {"MPI_Recv", "MPI_Wait", "MPI_Test", "MPI_Mrecv", "MPI_Waitany",
                                      "MPI_Sendrecv", "MPI_Waitall", "MPI_Testall", "MPI_Waitsome",
                                      "MPI_Testsome"};
  cf_where("round %d: truncation through %s", round, names[which]);
  cf_status_prefill(st, 2);
  int single = which < 6;
  switch (which) {
    case 0: rc = MPI_Recv(small, 2, MPI_INT, peer, TRUNC_TAG, MPI_COMM_WORLD, st); break;
    case 1:
      MPI_Irecv(small, 2, MPI_INT, peer, TRUNC_TAG, MPI_COMM_WORLD, rq);
      rc = MPI_Wait(rq, st);
      break;
    case 2:
      MPI_Irecv(small, 2, MPI_INT, peer, TRUNC_TAG, MPI_COMM_WORLD, rq);
      while (!flag && rc == MPI_SUCCESS) rc = MPI_Test(rq, &flag, st);
      break;
    case 3:
      MPI_Mprobe(peer, TRUNC_TAG, MPI_COMM_WORLD, &msg, MPI_STATUS_IGNORE);
      rc = MPI_Mrecv(small, 2, MPI_INT, &msg, st);
      break;
    case 4:
      MPI_Irecv(small, 2, MPI_INT, peer, TRUNC_TAG, MPI_COMM_WORLD, rq);
      rc = MPI_Waitany(1, rq, &index, st);
      break;
    case 5:
      rc = MPI_Sendrecv(NULL, 0, MPI_INT, peer, GOOD_TAG, small, 2, MPI_INT, peer, TRUNC_TAG, MPI_COMM_WORLD, st);
      break;
    default:
      MPI_Irecv(&good, 1, MPI_INT, peer, GOOD_TAG, MPI_COMM_WORLD, &rq[0]);
      MPI_Irecv(small, 2, MPI_INT, peer, TRUNC_TAG, MPI_COMM_WORLD, &rq[1]);
      if (which == 6) rc = MPI_Waitall(2, rq, st);
      else if (which == 7)
        while (!flag && rc == MPI_SUCCESS) rc = MPI_Testall(2, rq, &flag, st);
      else {
        /* until both completed or an error came back */
        int left = 2;
        while (left > 0 && rc == MPI_SUCCESS) {
          MPI_Status some[2];
          cf_status_prefill(some, 2);
          rc = which == 8 ? MPI_Waitsome(2, rq, &outcount, indices, some)
                          : MPI_Testsome(2, rq, &outcount, indices, some);
          if (outcount == MPI_UNDEFINED) break;
          for (int i = 0; i < outcount; i++) st[indices[i]] = some[i];
          if (rc == MPI_SUCCESS) left -= outcount;
        }
      }
      break;
  }
  if (single) {
    CF_CHECK(error_class(rc) == MPI_ERR_TRUNCATE, "%s returned class %d, want MPI_ERR_TRUNCATE (%d)", names[which],
             error_class(rc), MPI_ERR_TRUNCATE);
    CF_CHECK(!cf_check_mpi_error || st[0].MPI_ERROR == CF_ERR_SENTINEL,
             "%s wrote status.MPI_ERROR (%d); single-completion calls return the error instead", names[which],
             st[0].MPI_ERROR);
    CF_CHECK(st[0].MPI_SOURCE == peer && st[0].MPI_TAG == TRUNC_TAG, "%s: source %d tag %d", names[which],
             st[0].MPI_SOURCE, st[0].MPI_TAG);
    if (which != 5) MPI_Recv(&good, 1, MPI_INT, peer, GOOD_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else good = 4242; /* Sendrecv's case sends no good message */
  } else {
    CF_CHECK(rc == MPI_ERR_IN_STATUS, "%s returned %d, want MPI_ERR_IN_STATUS (%d)", names[which], rc,
             MPI_ERR_IN_STATUS);
    CF_CHECK(error_class(st[1].MPI_ERROR) == MPI_ERR_TRUNCATE, "%s: truncated request's MPI_ERROR class %d",
             names[which], error_class(st[1].MPI_ERROR));
    /* Waitsome/Testsome may report the good receive in an earlier call */
    if (which <= 7 || st[0].MPI_ERROR != CF_ERR_SENTINEL)
      CF_CHECK(st[0].MPI_ERROR == MPI_SUCCESS || st[0].MPI_ERROR == MPI_ERR_PENDING,
               "%s: other request's MPI_ERROR %d", names[which], st[0].MPI_ERROR);
    if (st[0].MPI_ERROR == MPI_ERR_PENDING) MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
    if (which >= 8 && rq[0] != MPI_REQUEST_NULL) MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
  }
  CF_CHECK(small[0] == 100 * round + 1 && small[1] == 100 * round + 2, "%s: truncated data %d %d", names[which],
           small[0], small[1]);
  CF_CHECK(which == 5 || good == 4242, "%s: the good message gave %d", names[which], good);
}

int main(int argc, char** argv) {
  const int size = cf_init(&argc, &argv), rank = cf_world_rank;
  int rounds = (int)cf_int_arg(argc, argv, "rounds", 3);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int peer = rank ^ 1, paired = peer < size;
  for (int round = 0; round < rounds; round++) {
    for (int which = 0; which < 10; which++) {
      if (paired && rank % 2 == 0) {
        int four[4] = {100 * round + 1, 100 * round + 2, 100 * round + 3, 100 * round + 4}, good = 4242;
        cf_where("round %d case %d: sending", round, which);
        CF_RC(MPI_Send(four, 4, MPI_INT, peer, TRUNC_TAG, MPI_COMM_WORLD));
        if (which == 5) CF_RC(MPI_Recv(NULL, 0, MPI_INT, peer, GOOD_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        else CF_RC(MPI_Send(&good, 1, MPI_INT, peer, GOOD_TAG, MPI_COMM_WORLD));
      } else if (paired) {
        receive_case(which, peer, round);
      }
      /* the layer still works: a correct allreduce after every error */
      int one = 1, sum = 0;
      CF_RC(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
      CF_CHECK(sum == size, "allreduce after an error gave %d", sum);
    }
  }
  return cf_finish_and_finalize();
}
