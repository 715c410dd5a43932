/* SPDX-License-Identifier: Apache-2.0
 *
 * libaccl_pmpi: MPI interposition layer that runs MPI calls on ACCL.
 *
 * Applications need nothing from this header: link the library (or
 * LD_PRELOAD it) and MPI_* calls are offloaded. The functions below let a
 * program (or a test) ask what happened. In LD_PRELOAD mode look them up with
 * dlsym(RTLD_DEFAULT, "accl_pmpi_active") so the program also runs without
 * the layer.
 */
#ifndef ACCL_PMPI_H
#define ACCL_PMPI_H

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when this process brought ACCL up in MPI_Init (offload possible). */
int accl_pmpi_active(void);

/* Calls of `mpi_name` (e.g. "MPI_Allreduce") on this rank since MPI_Init,
 * split into offloaded and native. Counted only with ACCL_STATS=1 (or
 * ACCL_TRACE=1 / ACCL_FALLBACK=warn|error); 0 otherwise. Returns -1 for a
 * name the layer does not intercept. */
int accl_pmpi_call_counts(const char* mpi_name, unsigned long long* offloaded, unsigned long long* native);

#ifdef __cplusplus
}
#endif

#endif /* ACCL_PMPI_H */
