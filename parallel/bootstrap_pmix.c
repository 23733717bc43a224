/* bootstrap_pmix.c — the PMIx client bootstrap (Slurm `srun --mpi=pmix`, OpenMPI `mpirun`,
 * `mtrain launch`). Rank = PMIx_Init's proc rank, size = PMIX_JOB_SIZE, local rank / size =
 * PMIX_LOCAL_RANK / PMIX_LOCAL_SIZE. allgather = PMIx_Put("mt.ag.<seq>") + PMIx_Commit +
 * PMIx_Fence(collect data) + PMIx_Get from every rank; barrier = PMIx_Fence without data.
 * Rule kept: every failure names the PMIx call and PMIx_Error_string of its status;
 * PMIx_Init returning PMIX_ERR_UNREACH (no server) is reported as MT_ERR_UNSUPPORTED so
 * bootstrap.c falls through to env:// / single (libpmix 4.2.2 returns it after ~12 ms with no
 * launcher, and the library then works as a one-process job: a singleton).
 * Losing the server (mpirun or srun killed, slurmstepd gone) ends the rank: an event handler for
 * PMIX_ERR_LOST_CONNECTION (and the older PMIX_ERR_LOST_CONNECTION_TO_SERVER) runs on libpmix's
 * thread, writes "mtrain: error: rank N: lost the connection to the PMIx server ..." with
 * write(2) and starts a watchdog thread that _exits(1) MT_PMIX_LOST_GRACE_S (2) seconds later:
 * the training loop never calls PMIx, so no clean stop is reachable from there, while a rank in a
 * bootstrap call fails on its own first (its PMIx call returns an error) and takes its normal
 * error path. Shared-memory segments are unlinked as soon as every member has attached
 * (comm_shm_seg.c), so an _exit mid-training leaves nothing in /dev/shm. A finalize after the
 * loss _exits(1) at once: the job's launcher never saw it end. This file is therefore, with
 * launch.c, allowed _exit below cmd/. Under `mtrain launch` the ranks also die with the launcher
 * through PR_SET_PDEATHSIG (launch.c); that is not usable here (our parent may be a wrapper). */
#include "parallel/bootstrap_internal.h"

#include <pmix.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    pmix_proc_t me;
    unsigned seq; /* allgather round; keys are never reused */
    int timeout_s;
    int finalized;
} pmix_ctx;

/* ---- losing the server ---- */

static atomic_int g_lost;          /* 1 once the server connection is gone */
static atomic_int g_rank = -1;     /* for the message */

static void write_str(const char *s) {
    size_t n = strlen(s);
    while (n) {
        ssize_t k = write(STDERR_FILENO, s, n);
        if (k <= 0) return; /* stderr gone too (a pipe to the dead launcher): nothing to tell */
        s += k;
        n -= (size_t)k;
    }
}

static _Noreturn void lost_exit(void) {
    fflush(stdout); /* the log so far (a file, when a wrapper redirected it) */
    _exit(1);
}

static void *lost_watchdog(void *arg) {
    (void)arg;
    const char *e = getenv("MT_PMIX_LOST_GRACE_S");
    double s = e && *e ? atof(e) : 2.0;
    if (s < 0) s = 0;
    if (s > 60) s = 60;
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
    lost_exit();
}

static void on_lost_connection(size_t id, pmix_status_t status, const pmix_proc_t *source, pmix_info_t info[],
                               size_t ninfo, pmix_info_t *results, size_t nresults,
                               pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata) {
    (void)id;
    (void)status;
    (void)source;
    (void)info;
    (void)ninfo;
    (void)results;
    (void)nresults;
    if (!atomic_exchange(&g_lost, 1)) {
        char msg[256];
        snprintf(msg, sizeof msg,
                 "mtrain: error: rank %d: lost the connection to the PMIx server (mpirun or srun ended?): stopping\n",
                 atomic_load(&g_rank));
        write_str(msg);
        pthread_t t;
        pthread_attr_t a;
        int ok = pthread_attr_init(&a) == 0 && pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED) == 0 &&
                 pthread_create(&t, &a, lost_watchdog, NULL) == 0;
        if (!ok) lost_exit();
        pthread_attr_destroy(&a);
    }
    if (cbfunc) cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static void register_lost_handler(void) {
    pmix_status_t codes[2];
    size_t n = 0;
    codes[n++] = PMIX_ERR_LOST_CONNECTION;
#if defined(PMIX_ERR_LOST_CONNECTION_TO_SERVER)
    if (PMIX_ERR_LOST_CONNECTION_TO_SERVER != PMIX_ERR_LOST_CONNECTION) codes[n++] = PMIX_ERR_LOST_CONNECTION_TO_SERVER;
#endif
    /* blocking form (cbfunc NULL): a reference >= 0 or an error; without the handler the rank
     * merely keeps running after a lost server, as before, so a failure is not fatal */
    PMIx_Register_event_handler(codes, n, NULL, 0, on_lost_connection, NULL, NULL);
}

static mt_status pmix_fail(mt_status st, const char *call, pmix_status_t rc, const char *what) {
    return mt_errorf(st, "%s%s%s failed: %s (PMIx status %d)", call, what && *what ? " " : "", what ? what : "",
                     PMIx_Error_string(rc), (int)rc);
}

/* PMIx servers differ in the integer type they hand back for the same key (uint16 for
 * local rank in the standard, uint32 or int elsewhere): accept any integer type. */
static int value_to_long(const pmix_value_t *v, long *out) {
    switch (v->type) {
    case PMIX_INT: *out = v->data.integer; return 1;
    case PMIX_INT8: *out = v->data.int8; return 1;
    case PMIX_INT16: *out = v->data.int16; return 1;
    case PMIX_INT32: *out = v->data.int32; return 1;
    case PMIX_INT64: *out = (long)v->data.int64; return 1;
    case PMIX_UINT: *out = (long)v->data.uint; return 1;
    case PMIX_UINT8: *out = v->data.uint8; return 1;
    case PMIX_UINT16: *out = v->data.uint16; return 1;
    case PMIX_UINT32: *out = (long)v->data.uint32; return 1;
    case PMIX_UINT64: *out = (long)v->data.uint64; return 1;
    case PMIX_SIZE: *out = (long)v->data.size; return 1;
    case PMIX_PROC_RANK: *out = (long)v->data.rank; return 1;
    default: return 0;
    }
}

static mt_status get_long(const pmix_proc_t *proc, const char *key, const char *name, long *out) {
    pmix_value_t *val = NULL;
    pmix_status_t rc = PMIx_Get(proc, key, NULL, 0, &val);
    if (rc != PMIX_SUCCESS) {
        char what[128];
        snprintf(what, sizeof what, "(%s)", name);
        return pmix_fail(MT_ERR_PMIX, "PMIx_Get", rc, what);
    }
    int ok = value_to_long(val, out);
    int type = val->type;
    PMIX_VALUE_RELEASE(val);
    if (!ok) return mt_errorf(MT_ERR_PMIX, "PMIx_Get(%s) returned a non-integer value (PMIx type %d)", name, type);
    return MT_OK;
}

static mt_status fence(pmix_ctx *c, int collect, const char *why) {
    pmix_info_t info[2];
    bool yes = true;
    int timeout = c->timeout_s;
    size_t n_info = 0;
    PMIX_INFO_CONSTRUCT(&info[0]);
    PMIX_INFO_CONSTRUCT(&info[1]);
    PMIX_INFO_LOAD(&info[n_info], PMIX_TIMEOUT, &timeout, PMIX_INT);
    n_info++;
    if (collect) {
        PMIX_INFO_LOAD(&info[n_info], PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
        n_info++;
    }
    pmix_status_t rc = PMIx_Fence(NULL, 0, info, n_info);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    if (rc == PMIX_SUCCESS) return MT_OK;
    /* PARTIAL_SUCCESS: libpmix 4.2.2's answer when a participant disconnected (exited or was
     * killed) before the fence completed */
    int peer = rc == PMIX_ERR_PARTIAL_SUCCESS || rc == PMIX_ERR_TIMEOUT || rc == PMIX_ERR_LOST_CONNECTION ||
               rc == PMIX_ERR_PROC_ABORTED || rc == PMIX_ERR_UNREACH;
    char what[256];
    snprintf(what, sizeof what, "(%s, rank %u, timeout %d s: parallel.timeout_s)", why, (unsigned)c->me.rank, c->timeout_s);
    mt_status st = pmix_fail(peer ? MT_ERR_PEER : MT_ERR_PMIX, "PMIx_Fence", rc, what);
    if (rc == PMIX_ERR_PARTIAL_SUCCESS)
        mt_error_context(st, "another rank left the job (exited or was killed) during a bootstrap fence: ");
    else if (rc == PMIX_ERR_TIMEOUT)
        mt_error_context(st, "a rank did not reach a bootstrap fence in time: ");
    return st;
}

static mt_status pmix_allgather(mt_bootstrap *bs, const void *mine, size_t n_bytes, void *all) {
    pmix_ctx *c = bs->ctx;
    if (!c || c->finalized) return mt_errorf(MT_ERR_INTERNAL, "bootstrap allgather after finalize");
    if (n_bytes == 0) return fence(c, 0, "allgather of 0 bytes");
    char key[64];
    snprintf(key, sizeof key, "mt.ag.%u", c->seq++);
    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_BYTE_OBJECT;
    v.data.bo.bytes = (char *)mine; /* PMIx_Put copies; not destructed below */
    v.data.bo.size = n_bytes;
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key, &v);
    if (rc != PMIX_SUCCESS) return pmix_fail(MT_ERR_PMIX, "PMIx_Put", rc, key);
    rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS) return pmix_fail(MT_ERR_PMIX, "PMIx_Commit", rc, key);
    mt_status st = fence(c, 1, key);
    if (st != MT_OK) return st;
    /* `mine` may alias all + rank * n_bytes: copy it last */
    for (int r = 0; r < bs->size; r++) {
        if (r == bs->rank) continue;
        pmix_proc_t p;
        PMIX_PROC_LOAD(&p, c->me.nspace, (pmix_rank_t)r);
        pmix_value_t *val = NULL;
        rc = PMIx_Get(&p, key, NULL, 0, &val);
        if (rc != PMIX_SUCCESS) {
            char what[128];
            snprintf(what, sizeof what, "(%s of rank %d)", key, r);
            return pmix_fail(MT_ERR_PMIX, "PMIx_Get", rc, what);
        }
        if (val->type != PMIX_BYTE_OBJECT || val->data.bo.size != n_bytes) {
            size_t got = val->type == PMIX_BYTE_OBJECT ? val->data.bo.size : 0;
            PMIX_VALUE_RELEASE(val);
            return mt_errorf(MT_ERR_INTERNAL,
                             "bootstrap allgather %s: rank %d contributed %zu bytes, rank %d %zu (every rank must "
                             "pass the same n_bytes)",
                             key, r, got, bs->rank, n_bytes);
        }
        memcpy((char *)all + (size_t)r * n_bytes, val->data.bo.bytes, n_bytes);
        PMIX_VALUE_RELEASE(val);
    }
    memmove((char *)all + (size_t)bs->rank * n_bytes, mine, n_bytes);
    return MT_OK;
}

static mt_status pmix_barrier(mt_bootstrap *bs) {
    pmix_ctx *c = bs->ctx;
    if (!c || c->finalized) return mt_errorf(MT_ERR_INTERNAL, "bootstrap barrier after finalize");
    return fence(c, 0, "barrier");
}

static void pmix_finalize(mt_bootstrap *bs) {
    pmix_ctx *c = bs->ctx;
    if (!c) return;
    if (atomic_load(&g_lost)) lost_exit(); /* nobody is there to finalize with; the job did not end well */
    if (!c->finalized) PMIx_Finalize(NULL, 0);
    free(c);
    bs->ctx = NULL;
}

mt_status mt_bootstrap_pmix_init(mt_bootstrap *bs, int timeout_s) {
    pmix_proc_t me;
    PMIX_PROC_CONSTRUCT(&me);
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    if (rc == PMIX_ERR_UNREACH) {
        return mt_errorf(MT_ERR_UNSUPPORTED, "PMIx_Init: no PMIx server reachable (%s)", PMIx_Error_string(rc));
    }
    if (rc != PMIX_SUCCESS) {
        return pmix_fail(MT_ERR_PMIX, "PMIx_Init", rc,
                         "(PMIX_NAMESPACE is set, so a PMIx launcher started this process; set MT_BOOTSTRAP=env "
                         "or single to bypass PMIx)");
    }
    mt_status st = MT_OK;
    atomic_store(&g_rank, (int)me.rank);
    register_lost_handler();
    pmix_proc_t wild;
    PMIX_PROC_LOAD(&wild, me.nspace, PMIX_RANK_WILDCARD);
    long size = 0, local_rank = 0, local_size = 0;
    MT_CHECK(get_long(&wild, PMIX_JOB_SIZE, "PMIX_JOB_SIZE", &size));
    MT_CHECK(get_long(&me, PMIX_LOCAL_RANK, "PMIX_LOCAL_RANK", &local_rank));
    MT_CHECK(get_long(&wild, PMIX_LOCAL_SIZE, "PMIX_LOCAL_SIZE", &local_size));
    if (size < 1 || (long)me.rank >= size || local_size < 1 || local_rank < 0 || local_rank >= local_size ||
        local_size > size) {
        st = mt_errorf(MT_ERR_PMIX,
                       "PMIx gave an inconsistent layout: rank %u, PMIX_JOB_SIZE %ld, PMIX_LOCAL_RANK %ld, "
                       "PMIX_LOCAL_SIZE %ld",
                       (unsigned)me.rank, size, local_rank, local_size);
        goto out;
    }
    pmix_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        st = mt_errorf(MT_ERR_OOM, "bootstrap: out of memory");
        goto out;
    }
    c->me = me;
    c->timeout_s = timeout_s;
    bs->rank = (int)me.rank;
    bs->size = (int)size;
    bs->local_rank = (int)local_rank;
    bs->local_size = (int)local_size;
    bs->kind = "pmix";
    bs->allgather = pmix_allgather;
    bs->barrier = pmix_barrier;
    bs->finalize = pmix_finalize;
    bs->ctx = c;
    return MT_OK;
out:
    PMIx_Finalize(NULL, 0);
    return st;
}
