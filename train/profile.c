/* profile.c — the profiler's buffer, the gather of every rank's events to rank 0 and the Chrome
 * trace writer (see profile.h). Wire format, rank r -> rank 0 over the world communicator: a header
 * of 8 f32 elements holding three doubles [events, dropped, earliest start ms], then (events > 0)
 * the events as 10 f32 elements each. Rank 0 takes every header first (the job's time origin is the
 * earliest start), then each rank's events in rank order, writing as it goes. */
#include "train/profile.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#define EV_F32 ((size_t)(sizeof(mt_prof_event) / 4))
#define OUT_BYTES ((size_t)1 << 20)
#define MAX_EVENTS ((int64_t)1 << 22) /* 160 MiB per rank at most */

_Static_assert(sizeof(mt_prof_event) % 4 == 0, "events travel as f32 elements");

mt_status mt_profile_init(mt_profiler *p, const mt_recipe *r, const mt_parallel_state *ps, mt_backend *be,
                          int64_t events_per_iter) {
    mt_status st = MT_OK;
    memset(p, 0, sizeof *p);
    p->fd = -1;
    if (!r->logging.profile) return MT_OK;
    p->on = 1;
    p->start = r->logging.profile_start;
    p->end = r->logging.profile_end;
    p->ps = ps;
    p->be = be;
    snprintf(p->path, sizeof p->path, "%s", r->logging.profile_path);
    snprintf(p->tmp, sizeof p->tmp, "%s.tmp", r->logging.profile_path);
    const int64_t iters = p->end - p->start + 1;
    p->cap = events_per_iter > 0 && iters <= MAX_EVENTS / events_per_iter ? events_per_iter * iters : MAX_EVENTS;
    p->ev = calloc((size_t)p->cap, sizeof *p->ev);
    p->counts = calloc((size_t)ps->size, sizeof *p->counts);
    p->out_cap = OUT_BYTES;
    p->out = ps->rank == 0 ? malloc(p->out_cap) : NULL;
    if (!p->ev || !p->counts || (ps->rank == 0 && !p->out)) {
        st = mt_errorf(MT_ERR_OOM, "profiler: buffer of %lld events", (long long)p->cap);
        goto out;
    }
    if (ps->size > 1) {
        MT_CHECK(be->i->alloc(be, (size_t)p->cap * sizeof *p->ev, &p->dev));
        MT_CHECK(be->i->alloc(be, 8 * 4, &p->hdr_dev));
    }
out:
    if (st != MT_OK) mt_profile_free(p);
    return st;
}

void mt_profile_free(mt_profiler *p) {
    if (p->dev) p->be->i->free(p->be, p->dev);
    if (p->hdr_dev) p->be->i->free(p->be, p->hdr_dev);
    if (p->fd >= 0) close(p->fd);
    free(p->ev);
    free(p->counts);
    free(p->out);
    memset(p, 0, sizeof *p);
    p->fd = -1;
}

/* the earliest start among this rank's events (spans are recorded at their end, after the events
 * inside them), INFINITY if none */
static double first_start(const mt_profiler *p) {
    double t = INFINITY;
    for (int64_t i = 0; i < p->n; i++)
        if (p->ev[i].t0_ms < t) t = p->ev[i].t0_ms;
    return t;
}

/* ---- the JSON writer: a preallocated buffer, write(2) when it fills ---- */
static mt_status out_flush(mt_profiler *p) {
    size_t done = 0;
    while (done < p->out_len) {
        const ssize_t k = write(p->fd, p->out + done, p->out_len - done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return mt_errorf(MT_ERR_IO, "%s: cannot write the profile trace: %s", p->tmp, strerror(errno));
        done += (size_t)k;
    }
    p->out_len = 0;
    return MT_OK;
}

__attribute__((format(printf, 2, 3))) static mt_status out_printf(mt_profiler *p, const char *fmt, ...) {
    if (p->out_cap - p->out_len < 1024) {
        const mt_status st = out_flush(p);
        if (st != MT_OK) return st;
    }
    va_list ap;
    va_start(ap, fmt);
    const int k = vsnprintf(p->out + p->out_len, p->out_cap - p->out_len, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= p->out_cap - p->out_len)
        return mt_errorf(MT_ERR_INTERNAL, "profiler: a trace line of %d bytes", k);
    p->out_len += (size_t)k;
    return MT_OK;
}

/* the track of an event kind (tid) */
static int kind_tid(int kind) {
    switch (kind) {
    case MT_TM_FWD_BWD:
    case MT_TM_OPT: return 1;
    case MT_TM_FWD:
    case MT_TM_BWD:
    case MT_TM_BATCH: return 2;
    case MT_TM_LN_GRADS:
    case MT_TM_EMB_GRADS:
    case MT_TM_GRADS_SYNC:
    case MT_TM_GRADS_RS:
    case MT_TM_NORM_LOSS:
    case MT_TM_PARAMS_AG:
    case MT_TM_TP: return 4;
    default: return 3;
    }
}

static const char *tid_name(int tid) {
    static const char *const names[] = {"", "step", "compute", "pipeline p2p", "collectives"};
    return names[tid];
}

/* metadata (process and track names) and the events of rank r */
static mt_status write_rank(mt_profiler *p, int r, const mt_prof_event *ev, int64_t n, double origin, int *first) {
    mt_status st = MT_OK;
    char who[64];
    int coord[MT_AXES] = {0};
    const mt_grid *g = &p->ps->grid;
    MT_CHECK(mt_grid_coords(g, r, coord));
    snprintf(who, sizeof who, "tp%d pp%d dp%d", coord[MT_AX_TP], coord[MT_AX_PP], coord[MT_AX_DP]);
    MT_CHECK(out_printf(p, "%s{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":"
                           "\"rank %d [%s]\"}},\n{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_sort_index\","
                           "\"args\":{\"sort_index\":%d}}",
                        *first ? "" : ",\n", r, r, who, r, r));
    *first = 0;
    for (int tid = 1; tid <= 4; tid++)
        MT_CHECK(out_printf(p, ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":"
                               "\"%s\"}}", r, tid, tid_name(tid)));
    for (int64_t i = 0; i < n; i++) {
        const mt_prof_event *e = &ev[i];
        const int kind = e->kind >= 0 && e->kind < MT_TM_COUNT ? e->kind : MT_TM_FWD_BWD;
        const int tid = kind_tid(kind);
        MT_CHECK(out_printf(p, ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"name\":\"%s\",\"cat\":\"%s\",\"ts\":%.3f,"
                               "\"dur\":%.3f,\"args\":{\"iteration\":%d",
                            r, tid, mt_timer_name((mt_timer_id)kind), tid_name(tid), (e->t0_ms - origin) * 1e3,
                            (e->t1_ms - e->t0_ms) * 1e3, (int)e->iteration));
        if (e->mb >= 0) MT_CHECK(out_printf(p, ",\"microbatch\":%d", (int)e->mb));
        if (e->chunk >= 0)
            MT_CHECK(out_printf(p, ",\"chunk\":%d,\"virtual_stage\":%d", (int)e->chunk,
                                (int)e->chunk * g->pp + coord[MT_AX_PP]));
        MT_CHECK(out_printf(p, "}}"));
    }
out:
    return st;
}

/* rank 0: every header, then the file */
static mt_status write_trace(mt_profiler *p, mt_comm *w, int64_t *dropped_total) {
    mt_status st = MT_OK;
    const int size = p->ps->size;
    double origin = first_start(p), hdr[4];
    int64_t dropped = p->dropped, total = p->n;
    for (int r = 1; r < size; r++) {
        MT_CHECK(w->i->recv(w, p->hdr_dev, 8, MT_F32, r));
        MT_CHECK(p->be->i->copy_d2h(p->be, hdr, p->hdr_dev, 32));
        p->counts[r] = (int64_t)hdr[0];
        dropped += (int64_t)hdr[1];
        total += p->counts[r];
        if (p->counts[r] > 0 && hdr[2] < origin) origin = hdr[2];
    }
    if (!isfinite(origin)) origin = 0;
    p->fd = open(p->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (p->fd < 0)
        return mt_errorf(MT_ERR_IO, "%s: cannot create the profile trace (logging.profile_path): %s", p->tmp,
                         strerror(errno));
    p->out_len = 0;
    int first = 1;
    MT_CHECK(out_printf(p, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"mtrain\",\"ranks\":%d,"
                           "\"iterations\":\"%lld..%lld\",\"events\":%lld,\"dropped_events\":%lld,\"clock\":"
                           "\"CLOCK_MONOTONIC of each node, origin = the earliest event\"},\n\"traceEvents\":[\n",
                        size, (long long)p->start, (long long)p->last, (long long)total, (long long)dropped));
    MT_CHECK(write_rank(p, 0, p->ev, p->n, origin, &first));
    for (int r = 1; r < size; r++) {
        const int64_t n = p->counts[r];
        if (n > 0) {
            MT_CHECK(w->i->recv(w, p->dev, (size_t)n * EV_F32, MT_F32, r));
            MT_CHECK(p->be->i->copy_d2h(p->be, p->ev, p->dev, (size_t)n * sizeof *p->ev));
        }
        MT_CHECK(write_rank(p, r, p->ev, n, origin, &first));
    }
    MT_CHECK(out_printf(p, "\n]}\n"));
    MT_CHECK(out_flush(p));
    if (fsync(p->fd) != 0) {
        st = mt_errorf(MT_ERR_IO, "%s: fsync of the profile trace: %s", p->tmp, strerror(errno));
        goto out;
    }
    const int fd = p->fd;
    p->fd = -1;
    if (close(fd) != 0) return mt_errorf(MT_ERR_IO, "%s: close: %s", p->tmp, strerror(errno));
    if (rename(p->tmp, p->path) != 0)
        return mt_errorf(MT_ERR_IO, "%s: cannot rename the profile trace to %s: %s", p->tmp, p->path, strerror(errno));
    *dropped_total = dropped;
out:
    if (p->fd >= 0) {
        close(p->fd);
        p->fd = -1;
    }
    return st;
}

mt_status mt_profile_flush(mt_profiler *p, int64_t it, int last, FILE *log, const char *prefix) {
    mt_status st = MT_OK;
    if (!p->on || p->done) return MT_OK;
    if (!p->seen || (it != p->end && !last)) return MT_OK;
    p->done = 1;
    p->recording = 0;
    const mt_group *wg = mt_pstate_group(p->ps, MT_PG_WORLD);
    mt_comm *w = wg->size > 1 ? wg->comm : NULL;
    int64_t dropped = 0;
    if (p->ps->rank != 0) {
        double hdr[4] = {(double)p->n, (double)p->dropped, first_start(p), 0};
        MT_CHECK(p->be->i->copy_h2d(p->be, p->hdr_dev, hdr, 32));
        MT_CHECK(w->i->send(w, p->hdr_dev, 8, MT_F32, 0));
        if (p->n > 0) {
            MT_CHECK(p->be->i->copy_h2d(p->be, p->dev, p->ev, (size_t)p->n * sizeof *p->ev));
            MT_CHECK(w->i->send(w, p->dev, (size_t)p->n * EV_F32, MT_F32, 0));
        }
    } else {
        MT_CHECK(write_trace(p, w, &dropped));
        if (dropped > 0)
            fprintf(stderr, "%s mtrain: warning: the profile trace %s lacks %lld events that did not fit the "
                            "buffer (profile fewer iterations)\n", p->ps->prefix, p->path, (long long)dropped);
    }
    if (w) MT_CHECK(w->i->barrier(w)); /* the file exists when any rank goes on */
    if (log)
        fprintf(log, "%smtrain: profile trace of iterations %lld..%lld (%d rank%s) written to %s\n", prefix,
                (long long)p->start, (long long)p->last, p->ps->size, p->ps->size > 1 ? "s" : "",
                p->path);
out:
    return st;
}
