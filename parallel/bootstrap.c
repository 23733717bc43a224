/* bootstrap.c — mt_bootstrap_init: picks how this rank learns who it is, in the order of
 * bootstrap.h (PMIx client, then env://, then a single rank), and the single-rank case itself.
 * The launcher-specific code lives in bootstrap_pmix.c and bootstrap_env.c.
 * Override: MT_BOOTSTRAP=pmix|env|single forces one kind (e.g. env:// for
 * `torchrun` started inside an `srun` step, where both kinds of variables are set).
 * Rule kept: no exit, no printing; every failure returns a status whose message names the
 * variable or PMIx call at fault. */
#include "parallel/bootstrap_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

static mt_status single_allgather(mt_bootstrap *bs, const void *mine, size_t n_bytes, void *all) {
    (void)bs;
    if (n_bytes && mine != all) memmove(all, mine, n_bytes);
    return MT_OK;
}

static mt_status single_barrier(mt_bootstrap *bs) {
    (void)bs;
    return MT_OK;
}

static void single_finalize(mt_bootstrap *bs) { (void)bs; }

static void init_single(mt_bootstrap *bs) {
    bs->rank = 0;
    bs->size = 1;
    bs->local_rank = 0;
    bs->local_size = 1;
    bs->kind = "single";
    bs->allgather = single_allgather;
    bs->barrier = single_barrier;
    bs->finalize = single_finalize;
    bs->ctx = NULL;
}

/* A PMIx server announces itself with PMIX_NAMESPACE / PMIX_RANK / PMIX_SERVER_URI* */
static int pmix_env_present(void) {
    if (getenv("PMIX_NAMESPACE") || getenv("PMIX_RANK")) return 1;
    for (char **e = environ; e && *e; e++)
        if (!strncmp(*e, "PMIX_SERVER_URI", 15)) return 1;
    return 0;
}

mt_status mt_bootstrap_env_int(const char *name, long lo, long hi, const char *what, int required, long *out,
                               int *was_set) {
    const char *v = getenv(name);
    if (was_set) *was_set = v != NULL;
    if (!v) {
        if (required) return mt_errorf(MT_ERR_CONFIG, "%s is not set (%s)", name, what);
        return MT_OK;
    }
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        return mt_errorf(MT_ERR_CONFIG, "%s=%s is not %s (expected an integer in %ld..%ld)", name, v, what, lo, hi);
    *out = x;
    return MT_OK;
}

mt_status mt_bootstrap_init(mt_bootstrap *bs, int timeout_s) {
    memset(bs, 0, sizeof *bs);
    if (timeout_s <= 0) timeout_s = MT_BOOTSTRAP_DEFAULT_TIMEOUT_S;
    const char *force = getenv("MT_BOOTSTRAP");
    if (force && *force) {
        if (!strcmp(force, "single")) {
            init_single(bs);
            return MT_OK;
        }
        if (!strcmp(force, "env")) return mt_bootstrap_env_init(bs, timeout_s);
        if (!strcmp(force, "pmix")) {
            mt_status st = mt_bootstrap_pmix_init(bs, timeout_s);
            if (st == MT_ERR_UNSUPPORTED)
                return mt_errorf(MT_ERR_PMIX, "MT_BOOTSTRAP=pmix but PMIx_Init found no PMIx server "
                                              "(PMIX_ERR_UNREACH): start mtrain under srun --mpi=pmix, mpirun "
                                              "or mtrain launch");
            return st;
        }
        return mt_errorf(MT_ERR_CONFIG, "MT_BOOTSTRAP=%s is not one of pmix, env, single", force);
    }
    if (pmix_env_present()) {
        mt_status st = mt_bootstrap_pmix_init(bs, timeout_s);
        if (st != MT_ERR_UNSUPPORTED) return st;
        mt_clear_error(); /* PMIX_ERR_UNREACH: no server after all, fall through */
        memset(bs, 0, sizeof *bs);
    }
    if (getenv("RANK") || getenv("WORLD_SIZE")) return mt_bootstrap_env_init(bs, timeout_s);
    init_single(bs);
    return MT_OK;
}
