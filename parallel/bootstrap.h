/* bootstrap.h — how a rank learns who it is and exchanges small blobs with the others
 * before any communicator exists. In order of precedence:
 *   1. PMIx client (PMIX_NAMESPACE set: Slurm `srun --mpi=pmix`, OpenMPI `mpirun`,
 *      `mtrain launch`); PMIx_Init returning PMIX_ERR_UNREACH means "no launcher".
 *   2. env:// as torchrun sets it (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
 *      MASTER_ADDR, MASTER_PORT), with a small TCP key-value store served by rank 0.
 *   3. Neither: one rank.
 * It carries the NCCL unique id and shared-memory segment names, nothing else. */
#ifndef MT_BOOTSTRAP_H
#define MT_BOOTSTRAP_H

#include <stddef.h>

#include "core/status.h"

typedef struct mt_bootstrap mt_bootstrap;

struct mt_bootstrap {
    int rank, size;             /* global */
    int local_rank, local_size; /* on this node */
    const char *kind;           /* "pmix", "env", "single" */
    /* all[r * n_bytes .. (r+1) * n_bytes) = rank r's `mine`, on every rank */
    mt_status (*allgather)(mt_bootstrap *bs, const void *mine, size_t n_bytes, void *all);
    mt_status (*barrier)(mt_bootstrap *bs);
    void (*finalize)(mt_bootstrap *bs);
    void *ctx;
};

/* Detects the launcher as above and initialises. Errors name the variable or PMIx call. */
mt_status mt_bootstrap_init(mt_bootstrap *bs, int timeout_s);

#endif
