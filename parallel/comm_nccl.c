/* comm_nccl.c — the GPU implementation of comm.h on NCCL, built only into the CUDA module
 * (build/libmtrain_cuda.so, Makefile CUDA=1). Compiled and linked here; not yet run on a GPU.
 *   - world: rank 0 draws the ncclUniqueId, the bootstrap's allgather (PMIx or env://, so the
 *     ranks may be on several nodes) hands it to every rank together with each rank's readiness,
 *     so a rank that cannot start (no device, bad id) is named by every rank at once; then
 *     ncclCommInitRankConfig, non-blocking (config.blocking = 0), polled with
 *     ncclCommGetAsyncError until done or parallel.timeout_s;
 *   - groups: ncclCommSplit(color, key) of the world (NCCL_SPLIT_NOCOLOR for color < 0);
 *   - allreduce / reduce_scatter / allgather / broadcast: ncclAllReduce & co. on the CUDA
 *     backend's one stream, so they run in order with the ops; send / recv between group_start
 *     and group_end are ncclSend / ncclRecv inside ncclGroupStart / ncclGroupEnd (the pipeline's
 *     exchanges); alltoallv is one group of point-to-point calls (the MoE dispatch);
 *   - every call then waits (once NCCL has enqueued it: a non-blocking call returns
 *     ncclInProgress until then) on a CUDA event recorded after it, polling the event and
 *     ncclCommGetAsyncError with the same deadline the shared-memory communicator uses
 *     (timeout_s, 0 = none): an asynchronous error or the deadline calls ncclCommAbort on the
 *     whole family (the world and every split) and returns MT_ERR_PEER (MT_ERR_NCCL for a local
 *     NCCL error) naming this rank, the call, NCCL's last error and the fix. Host-visible
 *     waiting after each call keeps comm.h's contract (a return means the result is there and a
 *     dead peer is noticed) at the price of overlap; the time between the two events of each
 *     call is summed per communicator (device_ms, CUDA events) for the report;
 *   - buffers must be device memory (the CUDA backend's); a host pointer is refused naming it.
 * Reductions are NCCL's (ring / tree order): deterministic run to run on the same layout, not
 * the rank 0 + rank 1 + ... order of the shared-memory communicator.
 * A communicator is used by one thread at a time (NCCL's rule). */
#include "parallel/comm_nccl.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"

#define NCCL_FAMILY_MAX 64 /* communicators split from one world (mtrain makes at most ~10) */

typedef struct nccl_ctx nccl_ctx;

/* The world and everything split from it: abort on one aborts all, as with comm_shm. */
typedef struct {
    nccl_ctx *members[NCCL_FAMILY_MAX];
    int n_members;
    int refs;
    int failed;
} nccl_family;

struct nccl_ctx {
    mt_comm pub;
    ncclComm_t comm;
    nccl_family *family;
    cudaStream_t stream;      /* the backend's */
    int device;
    int timeout_s;
    int world_rank;
    int group_depth;          /* > 0 between group_start and group_end */
    int aborted;
    cudaEvent_t ev_start, ev_done;
    double device_ms;         /* sum over calls of the time between their two events */
    float *one;               /* device scratch for barrier (1 f32) */
    char name[48];            /* "world", "split(color 3)" */
};

static nccl_ctx *ctx_of(mt_comm *c) { return (nccl_ctx *)c->ctx; }

static ncclDataType_t nccl_type(mt_dtype dt) { return dt == MT_F32 ? ncclFloat32 : ncclBfloat16; }

static const char *last_error(nccl_ctx *c) {
    const char *e = c && c->comm ? ncclGetLastError(c->comm) : ncclGetLastError(NULL);
    return e && *e ? e : "(NCCL gave no detail)";
}

static void family_abort(nccl_family *f) {
    if (!f || f->failed) return;
    f->failed = 1;
    for (int k = 0; k < f->n_members; k++) {
        nccl_ctx *m = f->members[k];
        if (m && m->comm && !m->aborted) {
            (void)ncclCommAbort(m->comm);
            m->aborted = 1;
            m->comm = NULL;
        }
    }
}

/* A failed call: abort the family so no peer waits on this rank, return the status. */
static mt_status fail(nccl_ctx *c, mt_status st, const char *what, const char *detail) {
    char msg[768];
    snprintf(msg, sizeof msg, "%s", detail);
    family_abort(c->family);
    return mt_errorf(st,
                     "NCCL %s on the %s communicator (rank %d of %d, world rank %d, GPU %d): %s; the "
                     "communicator is aborted (the first rank to report an error in the job's log is the one "
                     "that failed; raise parallel.timeout_s if a peer is only slow)",
                     what, c->name, c->pub.rank, c->pub.size, c->world_rank, c->device, msg);
}

static mt_status check_call(nccl_ctx *c, ncclResult_t r, const char *what) {
    if (r == ncclSuccess || r == ncclInProgress) return MT_OK;
    char d[600];
    snprintf(d, sizeof d, "%s (%s)", ncclGetErrorString(r), last_error(c));
    return fail(c, r == ncclRemoteError || r == ncclSystemError ? MT_ERR_PEER : MT_ERR_NCCL, what, d);
}

static void nap(int round) {
    if (round < 64) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 50000}; /* 50 us: a collective is rarely shorter */
    nanosleep(&ts, NULL);
}

/* Polls the communicator's asynchronous state (and, when `ev` is given, the event) until it is
 * neither ncclInProgress nor pending, or the deadline passes. */
static mt_status wait_comm(nccl_ctx *c, ncclComm_t comm, cudaEvent_t ev, const char *what) {
    const double deadline = c->timeout_s > 0 ? mt_clock_ms() + c->timeout_s * 1e3 : 0;
    for (int round = 0;; round++) {
        ncclResult_t ae = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(comm, &ae);
        if (r != ncclSuccess) return check_call(c, r, what);
        if (ae != ncclSuccess && ae != ncclInProgress) return check_call(c, ae, what);
        int done = ae == ncclSuccess;
        if (done && ev) {
            cudaError_t e = cudaEventQuery(ev);
            if (e == cudaErrorNotReady) {
                done = 0;
            } else if (e != cudaSuccess) {
                (void)cudaGetLastError();
                char d[300];
                snprintf(d, sizeof d, "CUDA error while waiting: %s", cudaGetErrorString(e));
                return fail(c, MT_ERR_CUDA, what, d);
            }
        }
        if (done) return MT_OK;
        if (deadline > 0 && mt_clock_ms() > deadline) {
            char d[300];
            snprintf(d, sizeof d, "no progress in %d s: a peer is dead, stuck or never called it", c->timeout_s);
            return fail(c, MT_ERR_PEER, what, d);
        }
        nap(round);
    }
}

static mt_status usable(nccl_ctx *c, const char *what) {
    if (c->family->failed || c->aborted)
        return mt_errorf(MT_ERR_PEER, "NCCL %s on the %s communicator (rank %d): the communicator was aborted after an "
                         "earlier failure (see the first error of this job)", what, c->name, c->pub.rank);
    return MT_OK;
}

/* A buffer a collective reads or writes must be device memory. */
static mt_status device_buffer(nccl_ctx *c, const void *p, const char *what, const char *which) {
    if (!p) return MT_OK;
    struct cudaPointerAttributes a;
    cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) (void)cudaGetLastError();
    if (e == cudaSuccess && (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged)) return MT_OK;
    return mt_errorf(MT_ERR_INTERNAL, "NCCL %s on the %s communicator (rank %d): %s buffer %p is host memory; the "
                     "CUDA backend's communicator carries device buffers only (a bug in the caller)",
                     what, c->name, c->pub.rank, which, p);
}

static mt_status begin(nccl_ctx *c, const char *what) {
    mt_status st = usable(c, what);
    if (st != MT_OK) return st;
    if (cudaSetDevice(c->device) != cudaSuccess) (void)cudaGetLastError(); /* the calling thread's device */
    if (c->group_depth == 0) {
        cudaError_t e = cudaEventRecord(c->ev_start, c->stream);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            return fail(c, MT_ERR_CUDA, what, cudaGetErrorString(e));
        }
    }
    return MT_OK;
}

/* After the call is enqueued: wait for it (unless inside a group: group_end waits). */
static mt_status finish(nccl_ctx *c, ncclResult_t r, const char *what) {
    mt_status st = check_call(c, r, what);
    if (st != MT_OK || c->group_depth > 0) return st;
    /* non-blocking communicator: ncclInProgress means the kernels may not be on the stream yet;
     * they are once the asynchronous state leaves ncclInProgress (NCCL's documented rule), and
     * only then may the event be recorded behind them */
    if (r == ncclInProgress && (st = wait_comm(c, c->comm, NULL, what)) != MT_OK) return st;
    cudaError_t e = cudaEventRecord(c->ev_done, c->stream);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return fail(c, MT_ERR_CUDA, what, cudaGetErrorString(e));
    }
    st = wait_comm(c, c->comm, c->ev_done, what);
    if (st != MT_OK) return st;
    float ms = 0;
    if (cudaEventElapsedTime(&ms, c->ev_start, c->ev_done) == cudaSuccess) c->device_ms += ms;
    else (void)cudaGetLastError();
    return MT_OK;
}

static mt_status nc_allreduce(mt_comm *pc, const void *send, void *recv, size_t n, mt_dtype dt, mt_redop op) {
    nccl_ctx *c = ctx_of(pc);
    mt_status st;
    if ((st = device_buffer(c, send, "allreduce", "send")) != MT_OK ||
        (st = device_buffer(c, recv, "allreduce", "recv")) != MT_OK || (st = begin(c, "allreduce")) != MT_OK)
        return st;
    return finish(c, ncclAllReduce(send, recv, n, nccl_type(dt), op == MT_RED_MAX ? ncclMax : ncclSum, c->comm,
                                   c->stream),
                  "allreduce");
}

static mt_status nc_reduce_scatter(mt_comm *pc, const void *send, void *recv, size_t n_per_rank, mt_dtype dt,
                                   mt_redop op) {
    nccl_ctx *c = ctx_of(pc);
    mt_status st;
    if ((st = device_buffer(c, send, "reduce-scatter", "send")) != MT_OK ||
        (st = device_buffer(c, recv, "reduce-scatter", "recv")) != MT_OK || (st = begin(c, "reduce-scatter")) != MT_OK)
        return st;
    return finish(c, ncclReduceScatter(send, recv, n_per_rank, nccl_type(dt), op == MT_RED_MAX ? ncclMax : ncclSum,
                                       c->comm, c->stream),
                  "reduce-scatter");
}

static mt_status nc_allgather(mt_comm *pc, const void *send, void *recv, size_t n_per_rank, mt_dtype dt) {
    nccl_ctx *c = ctx_of(pc);
    mt_status st;
    if ((st = device_buffer(c, send, "allgather", "send")) != MT_OK ||
        (st = device_buffer(c, recv, "allgather", "recv")) != MT_OK || (st = begin(c, "allgather")) != MT_OK)
        return st;
    return finish(c, ncclAllGather(send, recv, n_per_rank, nccl_type(dt), c->comm, c->stream), "allgather");
}

static mt_status nc_broadcast(mt_comm *pc, void *buf, size_t n, mt_dtype dt, int root) {
    nccl_ctx *c = ctx_of(pc);
    mt_status st;
    if ((st = device_buffer(c, buf, "broadcast", "")) != MT_OK || (st = begin(c, "broadcast")) != MT_OK) return st;
    return finish(c, ncclBroadcast(buf, buf, n, nccl_type(dt), root, c->comm, c->stream), "broadcast");
}

static mt_status nc_send(mt_comm *pc, const void *buf, size_t n, mt_dtype dt, int peer) {
    nccl_ctx *c = ctx_of(pc);
    mt_status st;
    if ((st = device_buffer(c, buf, "send", "")) != MT_OK || (st = begin(c, "send")) != MT_OK) return st;
    return finish(c, ncclSend(buf, n, nccl_type(dt), peer, c->comm, c->stream), "send");
}

static mt_status nc_recv(mt_comm *pc, void *buf, size_t n, mt_dtype dt, int peer) {
    nccl_ctx *c = ctx_of(pc);
    mt_status st;
    if ((st = device_buffer(c, buf, "recv", "")) != MT_OK || (st = begin(c, "recv")) != MT_OK) return st;
    return finish(c, ncclRecv(buf, n, nccl_type(dt), peer, c->comm, c->stream), "recv");
}

static mt_status nc_group_start(mt_comm *pc) {
    nccl_ctx *c = ctx_of(pc);
    mt_status st = begin(c, "group");
    if (st != MT_OK) return st;
    st = check_call(c, ncclGroupStart(), "ncclGroupStart");
    if (st == MT_OK) c->group_depth++;
    return st;
}

static mt_status nc_group_end(mt_comm *pc) {
    nccl_ctx *c = ctx_of(pc);
    if (c->group_depth <= 0)
        return mt_errorf(MT_ERR_INTERNAL, "NCCL group_end on the %s communicator without group_start", c->name);
    ncclResult_t r = ncclGroupEnd();
    c->group_depth--;
    return finish(c, r, "grouped send/recv (ncclGroupEnd)");
}

static mt_status nc_alltoallv(mt_comm *pc, const void *send, const size_t *send_counts, const size_t *send_displs,
                              void *recv, const size_t *recv_counts, const size_t *recv_displs, mt_dtype dt) {
    nccl_ctx *c = ctx_of(pc);
    const size_t eb = mt_dtype_bytes(dt);
    const ncclDataType_t t = nccl_type(dt);
    mt_status st;
    if ((st = device_buffer(c, send, "alltoallv", "send")) != MT_OK ||
        (st = device_buffer(c, recv, "alltoallv", "recv")) != MT_OK || (st = begin(c, "alltoallv")) != MT_OK)
        return st;
    const int me = pc->rank;
    if (send_counts[me]) {
        cudaError_t e = cudaMemcpyAsync((char *)recv + recv_displs[me] * eb, (const char *)send + send_displs[me] * eb,
                                        send_counts[me] * eb, cudaMemcpyDeviceToDevice, c->stream);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            return fail(c, MT_ERR_CUDA, "alltoallv (own block)", cudaGetErrorString(e));
        }
    }
    st = check_call(c, ncclGroupStart(), "alltoallv (ncclGroupStart)");
    if (st != MT_OK) return st;
    c->group_depth++;
    ncclResult_t r = ncclSuccess;
    for (int p = 0; p < pc->size && (r == ncclSuccess || r == ncclInProgress); p++) {
        if (p == me) continue;
        if (send_counts[p]) r = ncclSend((const char *)send + send_displs[p] * eb, send_counts[p], t, p, c->comm, c->stream);
        if ((r == ncclSuccess || r == ncclInProgress) && recv_counts[p])
            r = ncclRecv((char *)recv + recv_displs[p] * eb, recv_counts[p], t, p, c->comm, c->stream);
    }
    ncclResult_t re = ncclGroupEnd();
    c->group_depth--;
    if (r != ncclSuccess && r != ncclInProgress) return check_call(c, r, "alltoallv (ncclSend/ncclRecv)");
    return finish(c, re, "alltoallv (ncclGroupEnd)");
}

static mt_status nc_barrier(mt_comm *pc) {
    nccl_ctx *c = ctx_of(pc);
    mt_status st = begin(c, "barrier");
    if (st != MT_OK) return st;
    return finish(c, ncclAllReduce(c->one, c->one, 1, ncclFloat32, ncclSum, c->comm, c->stream), "barrier");
}

/* A clean teardown flushes (ncclCommFinalize, polled against the deadline) and then destroys; a
 * communicator that does not finish in time, or whose family failed, is aborted instead. Leaves
 * the thread's error message alone (this runs on failure paths too). */
static void ctx_free(nccl_ctx *c) {
    if (!c) return;
    if (c->comm) {
        const ncclResult_t fr = c->family->failed ? ncclInternalError : ncclCommFinalize(c->comm);
        int clean = fr == ncclSuccess || fr == ncclInProgress;
        const double deadline = c->timeout_s > 0 ? mt_clock_ms() + c->timeout_s * 1e3 : 0;
        for (int round = 0; clean; round++) {
            ncclResult_t ae = ncclInProgress;
            if (ncclCommGetAsyncError(c->comm, &ae) != ncclSuccess || (ae != ncclSuccess && ae != ncclInProgress) ||
                (deadline > 0 && mt_clock_ms() > deadline))
                clean = 0;
            else if (ae == ncclSuccess)
                break;
            else
                nap(round);
        }
        if (clean) (void)ncclCommDestroy(c->comm);
        else (void)ncclCommAbort(c->comm);
        c->comm = NULL;
    }
    if (c->ev_start) (void)cudaEventDestroy(c->ev_start);
    if (c->ev_done) (void)cudaEventDestroy(c->ev_done);
    if (c->one) (void)cudaFree(c->one);
    (void)cudaGetLastError();
    nccl_family *f = c->family;
    if (f) {
        for (int k = 0; k < f->n_members; k++)
            if (f->members[k] == c) f->members[k] = NULL;
        if (--f->refs == 0) free(f);
    }
    free(c);
}

static void nc_destroy(mt_comm *pc) {
    if (pc) ctx_free(ctx_of(pc));
}

static void nc_abort(mt_comm *pc) {
    if (pc && pc->ctx) family_abort(ctx_of(pc)->family);
}

static mt_status nc_split(mt_comm *pc, int color, int key, mt_comm **out);

static const struct mt_comm_i k_nccl_iface = MT_COMM_TABLE("nccl", nc_, nc_barrier, nc_split);

/* A context with its events and scratch on the current device, joined to family f (NULL: new). */
static mt_status ctx_new(nccl_family *f, cudaStream_t stream, int device, int timeout_s, int world_rank,
                         const char *name, nccl_ctx **out) {
    *out = NULL;
    nccl_ctx *c = calloc(1, sizeof *c);
    if (!c) return mt_errorf(MT_ERR_OOM, "NCCL communicator: out of host memory");
    if (!f) {
        f = calloc(1, sizeof *f);
        if (!f) {
            free(c);
            return mt_errorf(MT_ERR_OOM, "NCCL communicator: out of host memory");
        }
    }
    if (f->n_members >= NCCL_FAMILY_MAX) {
        if (f->refs == 0) free(f);
        free(c);
        return mt_errorf(MT_ERR_INTERNAL, "NCCL communicator: more than %d splits of one world", NCCL_FAMILY_MAX);
    }
    f->members[f->n_members++] = c;
    f->refs++;
    c->family = f;
    c->stream = stream;
    c->device = device;
    c->timeout_s = timeout_s;
    c->world_rank = world_rank;
    snprintf(c->name, sizeof c->name, "%s", name);
    c->pub.i = &k_nccl_iface;
    c->pub.ctx = c;
    cudaError_t e = cudaEventCreate(&c->ev_start);
    if (e == cudaSuccess) e = cudaEventCreate(&c->ev_done);
    if (e == cudaSuccess) e = cudaMalloc((void **)&c->one, 256);
    if (e == cudaSuccess) e = cudaMemsetAsync(c->one, 0, 256, stream);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        ctx_free(c);
        return mt_errorf(MT_ERR_CUDA, "NCCL communicator %s on GPU %d: events / scratch: %s", name, device,
                         cudaGetErrorString(e));
    }
    *out = c;
    return MT_OK;
}

static ncclConfig_t nonblocking_config(const char *name) {
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0; /* calls return ncclInProgress; wait_comm polls them against the deadline */
    cfg.commName = name;
    return cfg;
}

static mt_status nc_split(mt_comm *pc, int color, int key, mt_comm **out) {
    nccl_ctx *p = ctx_of(pc);
    *out = NULL;
    mt_status st = usable(p, "split");
    if (st != MT_OK) return st;
    char name[48];
    snprintf(name, sizeof name, "split(color %d)", color);
    nccl_ctx *c = NULL;
    if (color >= 0) {
        st = ctx_new(p->family, p->stream, p->device, p->timeout_s, p->world_rank, name, &c);
        if (st != MT_OK) return st;
    }
    ncclConfig_t cfg = nonblocking_config("mtrain");
    ncclComm_t nc = NULL;
    ncclResult_t r = ncclCommSplit(p->comm, color >= 0 ? color : NCCL_SPLIT_NOCOLOR, key, &nc, &cfg);
    st = check_call(p, r, "ncclCommSplit");
    if (st == MT_OK) st = wait_comm(p, p->comm, NULL, "ncclCommSplit");
    if (st == MT_OK && c) {
        c->comm = nc;
        st = wait_comm(c, nc, NULL, "ncclCommSplit (new communicator)");
        int rank = -1, size = 0;
        if (st == MT_OK) st = check_call(c, ncclCommUserRank(nc, &rank), "ncclCommUserRank");
        if (st == MT_OK) st = check_call(c, ncclCommCount(nc, &size), "ncclCommCount");
        c->pub.rank = rank;
        c->pub.size = size;
    }
    if (st != MT_OK) {
        ctx_free(c);
        return st;
    }
    *out = c ? &c->pub : NULL;
    return MT_OK;
}

/* What each rank tells the others before NCCL starts: whether it can take part, rank 0's id. */
typedef struct {
    int ok;
    ncclUniqueId id;
    char why[240];
} nccl_hello;

mt_status mt_comm_nccl_world_create(mt_bootstrap *bs, mt_backend *be, int timeout_s, mt_comm **out) {
    mt_status st = MT_OK;
    nccl_ctx *c = NULL;
    nccl_hello mine, *all = NULL;
    *out = NULL;
    memset(&mine, 0, sizeof mine);
    mine.ok = 1;
    cudaStream_t stream = (cudaStream_t)mt_cuda_backend_stream(be);
    if (!be || be->host_memory || !stream) {
        mine.ok = 0;
        snprintf(mine.why, sizeof mine.why, "its backend is not the CUDA backend");
    } else {
        cudaError_t e = cudaSetDevice(be->device);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            mine.ok = 0;
            snprintf(mine.why, sizeof mine.why, "cudaSetDevice(%d): %s", be->device, cudaGetErrorString(e));
        }
    }
    if (mine.ok && bs->rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&mine.id);
        if (r != ncclSuccess) {
            mine.ok = 0;
            snprintf(mine.why, sizeof mine.why, "ncclGetUniqueId: %s (%s)", ncclGetErrorString(r), last_error(NULL));
        }
    }
    all = calloc((size_t)bs->size, sizeof *all);
    if (!all) return mt_errorf(MT_ERR_OOM, "NCCL communicator: out of host memory for %d ranks", bs->size);
    st = bs->allgather(bs, &mine, sizeof mine, all);
    if (st != MT_OK) {
        st = mt_error_context(st, "NCCL communicator (rank %d of %d): sharing the ncclUniqueId: ", bs->rank, bs->size);
        goto out;
    }
    for (int r = 0; r < bs->size; r++)
        if (!all[r].ok) {
            st = mt_errorf(r == bs->rank ? MT_ERR_NCCL : MT_ERR_PEER,
                           "NCCL communicator: rank %d of %d cannot join: %.240s%s", r, bs->size, all[r].why,
                           r == bs->rank ? "" : " (reported to every rank before NCCL started)");
            goto out;
        }
    MT_CHECK(ctx_new(NULL, stream, be->device, timeout_s, bs->rank, "world", &c));
    c->pub.rank = bs->rank;
    c->pub.size = bs->size;
    ncclConfig_t cfg = nonblocking_config("mtrain-world");
    ncclResult_t r = ncclCommInitRankConfig(&c->comm, bs->size, all[0].id, bs->rank, &cfg);
    MT_CHECK(check_call(c, r, "ncclCommInitRankConfig"));
    MT_CHECK(wait_comm(c, c->comm, NULL, "ncclCommInitRankConfig"));
    *out = &c->pub;
    c = NULL;
out:
    if (c) ctx_free(c);
    free(all);
    return st;
}

void mt_comm_nccl_version(char *out, size_t out_bytes) {
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess) v = 0;
    /* NCCL_VERSION(X,Y,Z) = X*10000 + Y*100 + Z since 2.9 */
    snprintf(out, out_bytes, "%d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
}
