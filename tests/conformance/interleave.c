/* SPDX-License-Identifier: Apache-2.0
 *
 * Seeded random interleaving of point-to-point, collective and native MPI
 * calls on a changing pool of communicators, ending with sends in flight to
 * a slow receiver while the sender enters MPI_Finalize.
 *
 *   interleave [seed=N] [steps=N] [ops=LETTERS] [run=N] [final=0|1] [trace=1] [mpi_error=0]
 *
 * ops selects the operation families (default all):
 *   p  pairs exchange a message each way: every send mode x every receive path
 *   f  fan-in to one root through probe / matched probe with wildcards
 *   b  a burst of blocking sends to a slow receiver, then a native call
 *   a  receives pending across a collective
 *   c  collectives the layer may offload, blocking and non-blocking
 *   n  calls the layer runs natively (user ops, bitwise ops, comm dup/split,
 *      MPI_Alltoallv, MPI_Scan, MPI_Exscan, MPI_Allgatherv, one-sided)
 *   r  runs of `run` broadcasts from one root, then the next root
 *   m  communicator management: dup/split into the pool, free from it
 * With ops containing neither b nor the final burst (final=0), no step
 * relies on progress while a rank sits in a native call. */
#include "interleave.h"

CF_DEFINE_GLOBALS

#define POOL_MAX 4

typedef struct {
  MPI_Comm comm[POOL_MAX];
  int n;
} comm_pool;

static void pool_add(comm_pool* p, MPI_Comm c) {
  if (p->n < POOL_MAX) p->comm[p->n++] = c;
  else CF_RC(MPI_Comm_free(&c));
}

static void op_manage(comm_pool* p, cf_ctx* c) {
  int what = cf_below(&c->g, 3), victim = p->n > 1 ? 1 + cf_below(&c->g, p->n - 1) : 0;
  int colours = 1 + cf_below(&c->g, 2), salt = cf_below(&c->g, 7);
  MPI_Comm made;
  if (what == 0) {
    cf_where("step %d: MPI_Comm_dup into the pool", c->step);
    CF_RC(MPI_Comm_dup(c->comm, &made));
    pool_add(p, made);
  } else if (what == 1) {
    /* ranks reordered; with two colours the members differ per rank but
       every rank adds its part at the same pool index */
    cf_where("step %d: MPI_Comm_split (%d colours) into the pool", c->step, colours);
    CF_RC(MPI_Comm_split(c->comm, (c->rank * 7 + salt) % colours, (c->rank * 3 + salt) % c->size, &made));
    pool_add(p, made);
  } else if (victim > 0) {
    cf_where("step %d: MPI_Comm_free of pool entry %d", c->step, victim);
    CF_RC(MPI_Comm_free(&p->comm[victim]));
    for (int i = victim; i + 1 < p->n; i++) p->comm[i] = p->comm[i + 1];
    p->n--;
  }
}

int main(int argc, char** argv) {
  const int world_size = cf_init(&argc, &argv);
  uint64_t seed = cf_seed_arg(argc, argv, 1);
  int steps = (int)cf_int_arg(argc, argv, "steps", 300), run = (int)cf_int_arg(argc, argv, "run", 300);
  int final = (int)cf_int_arg(argc, argv, "final", 1), trace = (int)cf_int_arg(argc, argv, "trace", 0);
  const char* ops = "pfbacnrm";
  for (int i = 1; i < argc; i++)
    if (strncmp(argv[i], "ops=", 4) == 0) ops = argv[i] + 4;
  if (cf_world_rank == 0) printf("interleave: seed=%llu steps=%d ops=%s run=%d final=%d np=%d\n",
                                 (unsigned long long)seed, steps, ops, run, final, world_size);

  /* Buffered sends: room for the largest buffered message of a step and a
     final burst's worth of small ones. */
  int bsend_bytes = 4 << 20;
  char* bsend_buf = cf_malloc((size_t)bsend_bytes);
  MPI_Buffer_attach(bsend_buf, bsend_bytes);
  ops_coll_init();

  static const struct { char letter; int weight; } table[] = {
    {'p', 30}, {'f', 8}, {'b', 6}, {'a', 6}, {'c', 25}, {'n', 12}, {'r', 2}, {'m', 10}};
  int total_weight = 0;
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (strchr(ops, table[i].letter)) total_weight += table[i].weight;
  if (total_weight == 0) {
    if (cf_world_rank == 0) fprintf(stderr, "interleave: ops=%s selects no operation family\n", ops);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }

  comm_pool pool = {{MPI_COMM_WORLD}, 1};
  cf_rng main_rng = {seed};
  int done[128] = {0};
  for (int step = 0; step < steps; step++) {
    int pick = cf_below(&main_rng, total_weight), slot = cf_below(&main_rng, pool.n);
    char letter = 0;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
      if (!strchr(ops, table[i].letter)) continue;
      if (pick < table[i].weight) {
        letter = table[i].letter;
        break;
      }
      pick -= table[i].weight;
    }
    cf_ctx c = {pool.comm[slot], 0, 0, step, {seed * 0x2545F4914F6CDD1Dull + (uint64_t)step + 1}};
    MPI_Comm_rank(c.comm, &c.rank);
    MPI_Comm_size(c.comm, &c.size);
    done[(int)letter]++;
    if (trace) fprintf(stderr, "[rank %d] step %d: %c on pool entry %d\n", cf_world_rank, step, letter, slot);
    double started = MPI_Wtime();
    switch (letter) {
      case 'p': op_pairs(&c); break;
      case 'f': op_fan_in(&c); break;
      case 'b': op_burst_then_native(&c); break;
      case 'a': op_pending_across_collective(&c); break;
      case 'c': op_collective(&c); break;
      case 'n': op_native(&c); break;
      case 'r': op_bcast_run(&c, run, 1 + cf_below(&c.g, 3)); break;
      case 'm': op_manage(&pool, &c); break;
    }
    if (trace) fprintf(stderr, "[rank %d] step %d took %.3f s, last: %s\n", cf_world_rank, step, MPI_Wtime() - started, cf_step);
  }
  for (int i = 1; i < pool.n; i++) CF_RC(MPI_Comm_free(&pool.comm[i]));
  ops_coll_fini();
  if (cf_world_rank == 0)
    printf("interleave: steps by family: p %d f %d b %d a %d c %d n %d r %d m %d\n", done['p'], done['f'],
           done['b'], done['a'], done['c'], done['n'], done['r'], done['m']);

  /* The verdict of the steps; the final burst's receiver adds its own. */
  int failures = 0;
  cf_where("verdict");
  MPI_Allreduce(&cf_failures, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  int last = world_size - 1, burst_failures = final ? final_burst_to_slow_receiver(cf_world_rank, world_size, seed) : 0;
  int reporter = final ? last : 0;
  if (cf_world_rank == reporter) {
    if (failures + burst_failures == 0) printf(" No Errors\n");
    else printf(" Found %d errors\n", failures + burst_failures);
    fflush(stdout);
  }
  int detached_bytes;
  MPI_Buffer_detach(&bsend_buf, &detached_bytes);
  free(bsend_buf);
  MPI_Finalize();
  return failures + burst_failures == 0 ? 0 : 1;
}
