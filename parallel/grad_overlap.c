/* grad_overlap.c — the overlap engine of grad_overlap.h: the per-iteration bookkeeping of which
 * parts' gradients are final (main thread), a FIFO of bucket tasks, and the communication thread
 * that runs them on the engine's own communicators.
 * Threading rule: the main thread owns the plan, the counters and the class pre-reductions; the
 * thread owns its communicators and the staging buffers; the queue, the done count, the error and
 * the thread's time sums are shared under `mu`. Host memory only (the engine refuses device
 * memory), so packing is memcpy. */
#include "parallel/grad_overlap.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "parallel/comm_factory.h"
#include "parallel/grid.h"

typedef enum { TASK_REDUCE = 0, TASK_GATHER } task_kind;

typedef struct {
    task_kind kind;
    int bucket;
    double t0, t1; /* the thread's clock around the task's collectives (ms) */
} task;

struct mt_grad_overlap {
    mt_grad_sync *gs;
    const mt_parallel_state *ps;
    mt_go_plan plan;
    mt_comm *comm[MT_GBUFS];   /* the thread's communicators (NULL: group of 1, nothing to reduce) */
    int param_gather;
    size_t es_param;           /* bytes per parameter element (the compute dtype) */
    mt_dtype act;
    char *send, *recv;         /* staging: shards_max * win elements each (distributed) */
    size_t win;                /* staging elements per rank */
    int shards_max;
    /* main thread, per iteration */
    int n_micro;               /* 0: not in a training backward */
    int *count;                /* (n_events) backward calls of the event this iteration */
    unsigned char *final;      /* (n_events) */
    unsigned char *queued;     /* (n_b) */
    int *gather_order;         /* (n_b) buckets in forward order: tails first */
    int *need;                 /* (n_events) gathers (count from the batch's first) a part's forward needs */
    int64_t gather_base;       /* queue position of this batch's first gather; -1: none pending */
    int64_t recorded;          /* tasks whose spans went to the timers */
    double reduce_exposed_ms, gather_exposed_ms;
    /* shared under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    pthread_t thread;
    int have_thread;
    task *q;
    int cap_q;
    int64_t n_pushed, n_taken, n_done;
    int quit;
    mt_status err;
    char err_msg[1024];
    double reduce_ms, gather_ms; /* the thread's collective time since the last mt_grad_overlap_times */
};

/* --- the thread ---------------------------------------------------------------------------- */

/* Copies elements [o, o + cnt) of the concatenation of ranges rr[0 .. n) between the flat buffer
 * base and buf (to_buf: base -> buf); returns how many existed. */
static size_t window_copy(char *base, const mt_go_range *rr, int n, size_t o, size_t cnt, char *buf, size_t es,
                          int to_buf) {
    size_t pos = 0, done = 0;
    for (int i = 0; i < n && done < cnt; i++) {
        const size_t lo = rr[i].lo, len = rr[i].n;
        if (pos + len <= o) { pos += len; continue; }
        const size_t skip = o + done > pos ? o + done - pos : 0;
        size_t take = len - skip;
        if (take > cnt - done) take = cnt - done;
        char *flat = base + (lo + skip) * es, *b = buf + done * es;
        if (to_buf) memcpy(b, flat, take * es);
        else memcpy(flat, b, take * es);
        done += take;
        pos += len;
    }
    return done;
}

/* Owner r's part of bucket bk, window [o, o + cnt): to_buf copies it from the flat buffer base
 * into buf, zero-padded past the part's end; otherwise back from buf into base. */
static void owner_window(const mt_grad_overlap *ov, const mt_go_bucket *bk, int r, size_t o, size_t cnt, char *base,
                         char *buf, size_t es, int to_buf) {
    const mt_go_plan *p = &ov->plan;
    const int a = p->own_off[bk->o0 + r], b = p->own_off[bk->o0 + r + 1];
    const size_t got = window_copy(base, p->own + a, b - a, o, cnt, buf, es, to_buf);
    if (to_buf && got < cnt) memset(buf + got * es, 0, (cnt - got) * es);
}

static mt_status run_reduce(mt_grad_overlap *ov, const mt_go_bucket *bk) {
    mt_status st = MT_OK;
    mt_comm *c = ov->comm[bk->buffer];
    const mt_go_plan *p = &ov->plan;
    char *grads = ov->gs->grads_base;
    if (!c) return MT_OK;
    if (!ov->gs->distributed) { /* allreduce every range in place */
        for (int i = 0; i < bk->n_r; i++) {
            float *x = (float *)grads + p->ranges[bk->r0 + i].lo;
            MT_CHECK(c->i->allreduce(c, x, x, p->ranges[bk->r0 + i].n, MT_F32, MT_RED_SUM));
        }
        return MT_OK;
    }
    /* reduce-scatter: owner r's ranges of the bucket in segment r (padded to the largest owner) */
    const int S = c->size, me = c->rank;
    for (size_t o = 0; o < bk->n_per; o += ov->win) {
        const size_t cnt = bk->n_per - o < ov->win ? bk->n_per - o : ov->win;
        for (int r = 0; r < S; r++) owner_window(ov, bk, r, o, cnt, grads, ov->send + (size_t)r * cnt * 4, 4, 1);
        MT_CHECK(c->i->reduce_scatter(c, ov->send, ov->recv, cnt, MT_F32, MT_RED_SUM));
        owner_window(ov, bk, me, o, cnt, grads, ov->recv, 4, 0);
    }
out:
    return st;
}

static mt_status run_gather(mt_grad_overlap *ov, const mt_go_bucket *bk) {
    mt_status st = MT_OK;
    mt_comm *c = ov->comm[bk->buffer];
    char *params = ov->gs->params_base;
    const size_t es = ov->es_param;
    if (!c) return MT_OK;
    const int S = c->size, me = c->rank;
    for (size_t o = 0; o < bk->n_per; o += ov->win) {
        const size_t cnt = bk->n_per - o < ov->win ? bk->n_per - o : ov->win;
        char *mine = ov->recv + (size_t)me * cnt * es; /* in place: send aliases recv + rank * cnt */
        owner_window(ov, bk, me, o, cnt, params, mine, es, 1);
        MT_CHECK(c->i->allgather(c, mine, ov->recv, cnt, ov->act));
        for (int r = 0; r < S; r++)
            if (r != me) owner_window(ov, bk, r, o, cnt, params, ov->recv + (size_t)r * cnt * es, es, 0);
    }
out:
    return st;
}

static void *thread_main(void *arg) {
    mt_grad_overlap *ov = arg;
    pthread_mutex_lock(&ov->mu);
    for (;;) {
        while (ov->n_taken == ov->n_pushed && !ov->quit && ov->err == MT_OK) pthread_cond_wait(&ov->cv_work, &ov->mu);
        if (ov->err != MT_OK || ov->n_taken == ov->n_pushed) break; /* failed, or quit with nothing left */
        task *t = &ov->q[ov->n_taken % ov->cap_q];
        ov->n_taken++;
        pthread_mutex_unlock(&ov->mu);
        const mt_go_bucket *bk = &ov->plan.b[t->bucket];
        const double t0 = mt_clock_ms();
        const mt_status st = t->kind == TASK_REDUCE ? run_reduce(ov, bk) : run_gather(ov, bk);
        const double t1 = mt_clock_ms();
        pthread_mutex_lock(&ov->mu);
        t->t0 = t0;
        t->t1 = t1;
        if (t->kind == TASK_REDUCE) ov->reduce_ms += t1 - t0;
        else ov->gather_ms += t1 - t0;
        if (st != MT_OK) { /* the message is this thread's: keep it for the main thread */
            ov->err = st;
            snprintf(ov->err_msg, sizeof ov->err_msg, "%s", mt_last_error());
        } else {
            ov->n_done++;
        }
        pthread_cond_broadcast(&ov->cv_done);
    }
    pthread_mutex_unlock(&ov->mu);
    return NULL;
}

/* --- the main thread ------------------------------------------------------------------------ */

static mt_status thread_error(mt_grad_overlap *ov) {
    return mt_errorf(ov->err, "%s (in the overlapped gradient / parameter communication)", ov->err_msg);
}

/* Queues one task (the queue never holds more than two iterations' worth: it cannot be full). */
static mt_status go_issue(mt_grad_overlap *ov, task_kind kind, int bucket) {
    mt_status st = MT_OK;
    pthread_mutex_lock(&ov->mu);
    if (ov->err != MT_OK) st = thread_error(ov);
    else if (ov->n_pushed - ov->n_done >= ov->cap_q)
        st = mt_errorf(MT_ERR_INTERNAL, "overlapped gradient reduction: task queue of %d full", ov->cap_q);
    else {
        ov->q[ov->n_pushed % ov->cap_q] = (task){.kind = kind, .bucket = bucket, .t0 = -1, .t1 = -1};
        ov->n_pushed++;
        pthread_cond_signal(&ov->cv_work);
    }
    pthread_mutex_unlock(&ov->mu);
    return st;
}

/* Waits until the first `target` tasks are done; the wait's ms are added to *exposed. */
static mt_status go_wait_until(mt_grad_overlap *ov, int64_t target, double *exposed) {
    mt_status st = MT_OK;
    const double t0 = mt_clock_ms();
    pthread_mutex_lock(&ov->mu);
    while (ov->n_done < target && ov->err == MT_OK) pthread_cond_wait(&ov->cv_done, &ov->mu);
    if (ov->n_done < target) st = thread_error(ov);
    pthread_mutex_unlock(&ov->mu);
    *exposed += mt_clock_ms() - t0;
    return st;
}

/* the done tasks' spans to the timers / trace (main thread: the probe is not thread-safe) */
static void record_spans(mt_grad_overlap *ov) {
    mt_timing *tm = ov->gs->tm;
    pthread_mutex_lock(&ov->mu);
    const int64_t done = ov->n_done;
    pthread_mutex_unlock(&ov->mu);
    if (done - ov->recorded > ov->cap_q) ov->recorded = done - ov->cap_q;
    for (; ov->recorded < done; ov->recorded++) {
        const task *t = &ov->q[ov->recorded % ov->cap_q];
        const mt_timer_id id = t->kind == TASK_GATHER ? MT_TM_PARAMS_AG : ov->gs->distributed ? MT_TM_GRADS_RS
                                                                                                : MT_TM_GRADS_SYNC;
        if (t->t0 >= 0) mt_timing_span(tm, id, t->t0, t->t1, -1, -1);
    }
}

static int group_of(int b) { return b == MT_GBUF_EXPERT ? MT_PG_EDP : MT_PG_DP_CP; }

mt_status mt_grad_overlap_init(mt_grad_overlap **out, mt_grad_sync *gs, const mt_parallel_state *ps,
                               int64_t bucket_size, int param_gather) {
    mt_status st = MT_OK;
    *out = NULL;
    if (!gs->be->host_memory)
        return mt_errorf(MT_ERR_UNSUPPORTED, "parallel.overlap_grad_reduce: the overlap engine runs on host memory "
                         "(the CPU backend); with device buffers it needs stream-ordered NCCL collectives "
                         "(parallel/grad_overlap.h: the CUDA hook); set overlap_grad_reduce: false");
    mt_grad_overlap *ov = calloc(1, sizeof *ov);
    if (!ov) return mt_errorf(MT_ERR_OOM, "overlap engine");
    ov->gs = gs;
    ov->ps = ps;
    ov->param_gather = param_gather && gs->distributed;
    ov->gather_base = -1;
    pthread_mutex_init(&ov->mu, NULL);
    pthread_cond_init(&ov->cv_work, NULL);
    pthread_cond_init(&ov->cv_done, NULL);
    const mt_param_layout *pl = gs->pl;
    unsigned char pre[MT_MAX_PARAM_TENSORS] = {0};
    for (int ti = 0; ti < pl->n_tensors; ti++) {
        const mt_grad_class c = pl->t[ti].gclass;
        const mt_pgroup g = c == MT_GRAD_TP_PARTIAL ? MT_PG_TP : c == MT_GRAD_EMBEDDING ? MT_PG_EMB : MT_PG_COUNT;
        pre[ti] = g != MT_PG_COUNT && mt_pstate_group(ps, g)->size > 1; /* mt_grad_sync_classes reduces it */
    }
    size_t elems[MT_GBUFS];
    for (int b = 0; b < MT_GBUFS; b++) { /* Megatron's default: max(40M, 1M * data-parallel size) */
        const int64_t n = mt_pstate_group(ps, group_of(b))->size;
        elems[b] = bucket_size > 0 ? (size_t)bucket_size : (size_t)(n * 1000000 > 40000000 ? n * 1000000 : 40000000);
    }
    MT_CHECK(mt_go_plan_build(&ov->plan, pl, gs->ol, elems, pre));
    const mt_go_plan *p = &ov->plan;
    /* the thread's own communicators: split from the world on every rank, in buffer order */
    mt_comm *world = mt_pstate_group(ps, MT_PG_WORLD)->comm;
    for (int b = 0; b < MT_GBUFS; b++) {
        const mt_pgroup g = (mt_pgroup)group_of(b);
        if (mt_pstate_group(ps, g)->size <= 1 || (b == MT_GBUF_EXPERT && !pl->moe)) continue;
        int color, key;
        const int expert = b == MT_GBUF_EXPERT;
        MT_CHECK(mt_grid_color_key(expert ? &ps->egrid : &ps->grid, expert ? MT_GRID_DP : MT_GRID_DP | MT_GRID_CP,
                                   ps->rank, &color, &key));
        MT_CHECK(mt_comm_group_create(world, color, key, &ov->comm[b]));
        if (ov->comm[b] && ov->comm[b]->size > ov->shards_max) ov->shards_max = ov->comm[b]->size;
    }
    ov->act = gs->act;
    ov->es_param = mt_dtype_bytes(gs->act);
    if (gs->distributed && ov->shards_max > 1) {
        ov->win = p->max_n_per < ((size_t)1 << 22) ? p->max_n_per : ((size_t)1 << 22);
        if (ov->win == 0) ov->win = 1;
        const size_t es = ov->es_param > 4 ? ov->es_param : 4;
        ov->send = malloc((size_t)ov->shards_max * ov->win * es);
        ov->recv = malloc((size_t)ov->shards_max * ov->win * es);
        if (!ov->send || !ov->recv) {
            st = mt_errorf(MT_ERR_OOM, "overlap engine staging of 2 x %d x %zu elements", ov->shards_max, ov->win);
            goto out;
        }
    }
    ov->cap_q = 2 * p->n_b + 4;
    ov->q = calloc((size_t)ov->cap_q, sizeof *ov->q);
    ov->count = calloc((size_t)p->n_events, sizeof *ov->count);
    ov->final = calloc((size_t)p->n_events, 1);
    ov->need = calloc((size_t)p->n_events, sizeof *ov->need);
    ov->queued = calloc((size_t)p->n_b + 1, 1);
    ov->gather_order = calloc((size_t)p->n_b + 1, sizeof *ov->gather_order);
    if (!ov->q || !ov->count || !ov->final || !ov->need || !ov->queued || !ov->gather_order) {
        st = mt_errorf(MT_ERR_OOM, "overlap engine tables for %d buckets", p->n_b);
        goto out;
    }
    { /* gathers in forward order: tails, then by the first event the forward meets (the highest) */
        int n = 0;
        for (int k = 0; k < p->n_b; k++)
            if (p->b[k].tail) ov->gather_order[n++] = k;
        const int n_tail = n;
        for (int e = p->n_events - 1; e >= 0; e--)
            for (int k = 0; k < p->n_b; k++)
                if (!p->b[k].tail && p->b[k].ev_hi == e) ov->gather_order[n++] = k;
        for (int e = 0; e < p->n_events; e++) ov->need[e] = n_tail; /* the tails hold norms of every layer */
        for (int i = n_tail; i < n; i++) {
            const mt_go_bucket *bk = &p->b[ov->gather_order[i]];
            for (int e = bk->ev_lo; e <= bk->ev_hi; e++)
                if (ov->need[e] < i + 1) ov->need[e] = i + 1;
        }
    }
    if (pthread_create(&ov->thread, NULL, thread_main, ov) != 0) {
        st = mt_errorf(MT_ERR_INTERNAL, "overlap engine: cannot start the communication thread");
        goto out;
    }
    ov->have_thread = 1;
out:
    if (st != MT_OK) mt_grad_overlap_free(ov, 0);
    else *out = ov;
    return st;
}

void mt_grad_overlap_free(mt_grad_overlap *ov, int failed) {
    if (!ov) return;
    if (ov->have_thread) {
        pthread_mutex_lock(&ov->mu);
        const int busy = ov->n_taken > ov->n_done && ov->err == MT_OK;
        ov->quit = 1;
        if (failed) ov->n_pushed = ov->n_taken; /* drop what was not started */
        pthread_cond_broadcast(&ov->cv_work);
        pthread_mutex_unlock(&ov->mu);
        /* a thread inside a collective whose peers will never come returns once the family is aborted */
        if (failed && busy)
            for (int b = 0; b < MT_GBUFS; b++)
                if (ov->comm[b]) { ov->comm[b]->i->abort(ov->comm[b]); break; }
        pthread_join(ov->thread, NULL);
    }
    for (int b = 0; b < MT_GBUFS; b++)
        if (ov->comm[b]) ov->comm[b]->i->destroy(ov->comm[b]);
    pthread_cond_destroy(&ov->cv_done);
    pthread_cond_destroy(&ov->cv_work);
    pthread_mutex_destroy(&ov->mu);
    free(ov->send);
    free(ov->recv);
    free(ov->q);
    free(ov->count);
    free(ov->final);
    free(ov->need);
    free(ov->queued);
    free(ov->gather_order);
    mt_go_plan_free(&ov->plan);
    free(ov);
}

mt_status mt_grad_overlap_begin(mt_grad_overlap *ov, int n_micro) {
    const mt_go_plan *p = &ov->plan;
    ov->n_micro = n_micro;
    memset(ov->count, 0, (size_t)p->n_events * sizeof *ov->count);
    memset(ov->final, 0, (size_t)p->n_events);
    memset(ov->queued, 0, (size_t)p->n_b);
    return MT_OK;
}

mt_status mt_grad_overlap_backward_done(mt_grad_overlap *ov, int part) {
    mt_status st = MT_OK;
    const mt_go_plan *p = &ov->plan;
    if (ov->n_micro <= 0) return MT_OK; /* not a training backward */
    const int e = mt_go_event(p->L, part);
    if (e < 0 || e >= p->n_events || ++ov->count[e] != ov->n_micro) return MT_OK;
    ov->final[e] = 1;
    for (int k = 0; k < p->n_b; k++) { /* every bucket this event completes, in bucket order */
        const mt_go_bucket *bk = &p->b[k];
        if (bk->tail || ov->queued[k] || e < bk->ev_lo || e > bk->ev_hi) continue;
        int ready = 1;
        for (int x = bk->ev_lo; x <= bk->ev_hi && ready; x++) ready = ov->final[x];
        if (!ready) continue;
        ov->queued[k] = 1;
        MT_CHECK(go_issue(ov, TASK_REDUCE, k));
    }
out:
    return st;
}

mt_status mt_grad_overlap_finish(mt_grad_overlap *ov, void *grads) {
    mt_status st = MT_OK;
    const mt_go_plan *p = &ov->plan;
    mt_grad_sync *gs = ov->gs;
    double exposed = 0;
    if (grads != gs->grads_base)
        return mt_errorf(MT_ERR_INTERNAL, "overlapped gradient reduction: a gradient buffer other than the model's");
    for (int k = 0; k < p->n_b; k++) /* a part no hook reported (none should): in bucket order */
        if (!p->b[k].tail && !ov->queued[k]) {
            ov->queued[k] = 1;
            MT_CHECK(go_issue(ov, TASK_REDUCE, k));
        }
    MT_CHECK(mt_grad_sync_classes(gs, grads)); /* tp / embedding group pre-reductions, on this thread */
    const double t0 = mt_timing_begin(gs->tm, MT_TM_GRADS_EXPOSED);
    for (int k = 0; k < p->n_b; k++)
        if (p->b[k].tail) MT_CHECK(go_issue(ov, TASK_REDUCE, k));
    pthread_mutex_lock(&ov->mu);
    const int64_t all = ov->n_pushed;
    pthread_mutex_unlock(&ov->mu);
    MT_CHECK(go_wait_until(ov, all, &exposed));
    ov->n_micro = 0;
    mt_timing_end(gs->tm, MT_TM_GRADS_EXPOSED, t0, -1, -1);
    ov->reduce_exposed_ms += exposed;
    gs->comm_ms += exposed;
    record_spans(ov);
out:
    return st;
}

int mt_grad_overlap_gathers(const mt_grad_overlap *ov) { return ov && ov->param_gather; }

mt_status mt_grad_overlap_gather_params(mt_grad_overlap *ov) {
    mt_status st = MT_OK;
    if (!ov->param_gather) return MT_OK;
    MT_CHECK(mt_grad_overlap_wait_params(ov)); /* one batch at a time */
    pthread_mutex_lock(&ov->mu);
    ov->gather_base = ov->n_pushed;
    pthread_mutex_unlock(&ov->mu);
    for (int i = 0; i < ov->plan.n_b; i++) MT_CHECK(go_issue(ov, TASK_GATHER, ov->gather_order[i]));
out:
    return st;
}

static mt_status wait_gathers(mt_grad_overlap *ov, int n_needed) {
    mt_status st = MT_OK;
    if (ov->gather_base < 0) return MT_OK;
    const double t0 = mt_timing_begin(ov->gs->tm, MT_TM_PARAMS_EXPOSED);
    double exposed = 0;
    st = go_wait_until(ov, ov->gather_base + n_needed, &exposed);
    mt_timing_end(ov->gs->tm, MT_TM_PARAMS_EXPOSED, t0, -1, -1);
    ov->gather_exposed_ms += exposed;
    ov->gs->comm_ms += exposed;
    if (st == MT_OK && n_needed >= ov->plan.n_b) ov->gather_base = -1; /* the batch is complete */
    return st;
}

mt_status mt_grad_overlap_forward_begin(mt_grad_overlap *ov, int part) {
    if (ov->gather_base < 0) return MT_OK;
    const int e = mt_go_event(ov->plan.L, part);
    if (e < 0 || e >= ov->plan.n_events) return MT_OK;
    return wait_gathers(ov, ov->need[e]);
}

mt_status mt_grad_overlap_wait_params(mt_grad_overlap *ov) {
    return ov ? wait_gathers(ov, ov->plan.n_b) : MT_OK;
}

void mt_grad_overlap_times(mt_grad_overlap *ov, double *reduce_ms, double *reduce_exposed_ms, double *gather_ms,
                           double *gather_exposed_ms) {
    pthread_mutex_lock(&ov->mu);
    *reduce_ms = ov->reduce_ms;
    *gather_ms = ov->gather_ms;
    ov->reduce_ms = ov->gather_ms = 0;
    pthread_mutex_unlock(&ov->mu);
    *reduce_exposed_ms = ov->reduce_exposed_ms;
    *gather_exposed_ms = ov->gather_exposed_ms;
    ov->reduce_exposed_ms = ov->gather_exposed_ms = 0;
}

void mt_grad_overlap_describe(const mt_grad_overlap *ov, char *buf, size_t n) {
    const mt_go_plan *p = &ov->plan;
    int n_tail = 0;
    size_t big = 0;
    for (int k = 0; k < p->n_b; k++) {
        n_tail += p->b[k].tail;
        if (p->b[k].n > big) big = p->b[k].n;
    }
    snprintf(buf, n, "overlapped gradient %s in %d buckets (%d after the pre-reductions; the largest %zu elements) "
             "on a communication thread%s", ov->gs->distributed ? "reduce-scatter" : "allreduce", p->n_b, n_tail, big,
             ov->param_gather ? ", parameter allgather overlapped with the next forward" : "");
}
