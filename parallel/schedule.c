/* schedule.c — the pipeline schedule tables (AFAB, 1F1B, interleaved 1F1B) as pure functions.
 * One generator per kind walks Megatron-Core's loops (schedules.py) and emits steps through
 * an emitter that either stores them in the caller's array or only counts them (and the
 * (mb, chunk) held at once), so sizes and bounds come from the same code as the table.
 * Rule: no state, no allocation, no I/O; a slot free-list is threaded through the caller's
 * array while it is built and cleared before returning. */
#include "parallel/schedule.h"

#include <limits.h>
#include <stdio.h>

/* ---------- emitter ---------- */

typedef struct {
    mt_pp_step *steps; /* NULL: count only */
    int cap, n;
    int p, v, stage;
    int group;    /* id of the open group, -1 when none */
    int n_groups; /* ids handed out */
    int open_ops; /* ops in the open group */
    int live, peak, warmup;
    int fwd_only; /* forward-only table: an (mb, chunk) is released by its F */
    int overflow;
} emitter;

static int vfirst(const emitter *e, int chunk) { return e->stage == 0 && chunk == 0; }
static int vlast(const emitter *e, int chunk) { return e->stage == e->p - 1 && chunk == e->v - 1; }
static int next_stage(const emitter *e) { return (e->stage + 1) % e->p; }
static int prev_stage(const emitter *e) { return (e->stage + e->p - 1) % e->p; }

static void put(emitter *e, mt_pp_op op, int mb, int chunk, int peer) {
    int group = -1;
    if (mt_pp_op_is_comm(op)) {
        if (e->group < 0) { /* a transfer outside group_begin/end is a group of its own */
            group = e->n_groups++;
        } else {
            group = e->group;
            e->open_ops++;
        }
    }
    if (op == MT_PP_RECV_ACT || (op == MT_PP_FWD && vfirst(e, chunk))) {
        if (++e->live > e->peak) e->peak = e->live;
    }
    if (op == MT_PP_BWD || (op == MT_PP_FWD && e->fwd_only)) e->live--;
    if (e->steps) {
        if (e->n >= e->cap) {
            e->overflow = 1;
        } else {
            mt_pp_step *s = &e->steps[e->n];
            s->op = op;
            s->mb = mb;
            s->chunk = chunk;
            s->peer = mt_pp_op_is_comm(op) ? peer : -1;
            s->group = group;
            s->slot = -1;
        }
    }
    e->n++;
}

static void group_begin(emitter *e) {
    e->group = e->n_groups;
    e->open_ops = 0;
}

static void group_end(emitter *e) {
    if (e->open_ops > 0) e->n_groups++; /* an empty group uses no id */
    e->group = -1;
}

static void fwd(emitter *e, int mb, int chunk) { put(e, MT_PP_FWD, mb, chunk, -1); }
static void bwd(emitter *e, int mb, int chunk) { put(e, MT_PP_BWD, mb, chunk, -1); }
/* Transfers skip themselves where the virtual stage has no neighbour on that side. */
static void send_act(emitter *e, int mb, int chunk) {
    if (!vlast(e, chunk)) put(e, MT_PP_SEND_ACT, mb, chunk, next_stage(e));
}
static void recv_act(emitter *e, int mb, int chunk) {
    if (!vfirst(e, chunk)) put(e, MT_PP_RECV_ACT, mb, chunk, prev_stage(e));
}
static void send_grad(emitter *e, int mb, int chunk) {
    if (!vfirst(e, chunk)) put(e, MT_PP_SEND_GRAD, mb, chunk, prev_stage(e));
}
static void recv_grad(emitter *e, int mb, int chunk) {
    if (!vlast(e, chunk)) put(e, MT_PP_RECV_GRAD, mb, chunk, next_stage(e));
}

/* ---------- AFAB and 1F1B ---------- */

/* GPipe: every forward, then every backward, each transfer blocking on its own. */
static void gen_afab(emitter *e, int m) {
    e->warmup = m;
    for (int i = 0; i < m; i++) {
        recv_act(e, i, 0);
        fwd(e, i, 0);
        send_act(e, i, 0);
    }
    for (int i = 0; i < m && !e->fwd_only; i++) {
        recv_grad(e, i, 0);
        bwd(e, i, 0);
        send_grad(e, i, 0);
    }
}

/* forward_backward_pipelining_without_interleaving. */
static void gen_1f1b(emitter *e, int m) {
    int p = e->p, s = e->stage;
    int w = p - s - 1 < m ? p - s - 1 : m, r = m - w;
    e->warmup = w;
    for (int i = 0; i < w; i++) { /* recv_forward; forward; send_forward */
        recv_act(e, i, 0);
        fwd(e, i, 0);
        send_act(e, i, 0);
    }
    if (r > 0) recv_act(e, w, 0); /* the first steady forward's input */
    for (int i = 0; i < r; i++) {
        fwd(e, w + i, 0);
        group_begin(e); /* send_forward_recv_backward */
        send_act(e, w + i, 0);
        recv_grad(e, i, 0);
        group_end(e);
        bwd(e, i, 0);
        group_begin(e); /* send_backward_recv_forward (send_backward on the last iteration) */
        send_grad(e, i, 0);
        if (i + 1 < r) recv_act(e, w + i + 1, 0);
        group_end(e);
    }
    for (int i = r; i < m; i++) { /* recv_backward; backward; send_backward */
        recv_grad(e, i, 0);
        bwd(e, i, 0);
        send_grad(e, i, 0);
    }
}

/* ---------- interleaved 1F1B ---------- */

/* Virtual micro-batch k (0 .. m v - 1) of forward_backward_pipelining_with_interleaving with
 * microbatch_group_size_per_vp_stage = p: groups of p micro-batches run through chunk 0, then
 * chunk 1, ...; backwards walk the same order with the chunks reversed. */
static int iv_mb(int p, int v, int k) { return (k / (p * v)) * p + k % p; }
static int iv_chunk(int p, int v, int k, int forward) {
    int c = (k % (p * v)) / p;
    return forward ? c : v - 1 - c;
}

/* Megatron's recv_tensor_from_previous_stage: what stage `stage` receives in the comm group
 * after virtual step k. A non-leading stage receives the input of its own step k + 1. The
 * leading stage (stage 0 forward, stage p-1 backward) is p-1 steps ahead of the ending stage,
 * so it receives what the ending stage produced at step k - (p-1), unless that was the final
 * chunk (the loss / the first layers) or nothing was produced yet. Returns 0 when nothing is
 * received; else the (mb, chunk) on this stage the data is for. */
static int iv_recv(const emitter *e, int k, int forward, int *mb, int *chunk) {
    int p = e->p, v = e->v, leading = forward ? e->stage == 0 : e->stage == p - 1;
    if (!leading) {
        *mb = iv_mb(p, v, k + 1);
        *chunk = iv_chunk(p, v, k + 1, forward);
        return 1;
    }
    int j = k - (p - 1);
    if (j < 0) return 0;
    int c = iv_chunk(p, v, j, forward);
    if (c == (forward ? v - 1 : 0)) return 0;
    *mb = iv_mb(p, v, j);
    *chunk = forward ? c + 1 : c - 1;
    return 1;
}

static int iv_warmup(int p, int m, int v, int s) {
    long long w = 2LL * (p - s - 1) + (long long)(v - 1) * p, total = (long long)m * v;
    return (int)(w < total ? w : total);
}

static void gen_interleaved(emitter *e, int m) {
    int p = e->p, v = e->v, total = m * v;
    int w = e->fwd_only ? total : iv_warmup(p, m, v, e->stage), r = total - w, mb, c;
    e->warmup = w;

    recv_act(e, iv_mb(p, v, 0), iv_chunk(p, v, 0, 1)); /* input of the first forward */
    for (int k = 0; k < w; k++) {
        int fmb = iv_mb(p, v, k), fc = iv_chunk(p, v, k, 1);
        fwd(e, fmb, fc);
        group_begin(e); /* send_forward_recv_forward, or on the last warm-up step with a steady
                           phase to come send_forward_backward_recv_forward_backward, which also
                           receives the first backward's gradient */
        send_act(e, fmb, fc);
        if (k + 1 < total && iv_recv(e, k, 1, &mb, &c)) recv_act(e, mb, c);
        if (k == w - 1 && r > 0) recv_grad(e, iv_mb(p, v, 0), iv_chunk(p, v, 0, 0));
        group_end(e);
    }
    for (int k = 0; k < r; k++) {
        int fk = w + k;
        int fmb = iv_mb(p, v, fk), fc = iv_chunk(p, v, fk, 1);
        int bmb = iv_mb(p, v, k), bc = iv_chunk(p, v, k, 0);
        fwd(e, fmb, fc);
        bwd(e, bmb, bc);
        group_begin(e); /* send_forward_backward_recv_forward_backward */
        send_act(e, fmb, fc);
        send_grad(e, bmb, bc);
        if (k + 1 < r && iv_recv(e, fk, 1, &mb, &c)) recv_act(e, mb, c);
        if (iv_recv(e, k, 0, &mb, &c)) recv_grad(e, mb, c);
        group_end(e);
    }
    if (e->fwd_only) return; /* Megatron's forward_only: every forward is warm-up, no backward */
    if (r == 0) recv_grad(e, iv_mb(p, v, 0), iv_chunk(p, v, 0, 0)); /* all forwards were warm-up */
    for (int k = r; k < total; k++) {
        int bmb = iv_mb(p, v, k), bc = iv_chunk(p, v, k, 0);
        bwd(e, bmb, bc);
        group_begin(e); /* send_backward_recv_backward */
        send_grad(e, bmb, bc);
        if (k + 1 < total && iv_recv(e, k, 0, &mb, &c)) recv_grad(e, mb, c);
        group_end(e);
    }
}

/* ---------- public ---------- */

const char *mt_schedule_name(mt_sched kind) {
    switch (kind) {
    case MT_SCHED_AFAB: return "afab";
    case MT_SCHED_1F1B: return "1f1b";
    case MT_SCHED_INTERLEAVED: return "interleaved";
    default: return "?";
    }
}

const char *mt_pp_op_name(mt_pp_op op) {
    static const char *const names[MT_PP_OPS] = { "F", "B", "send_act", "recv_act", "send_grad", "recv_grad" };
    return op >= 0 && op < MT_PP_OPS ? names[op] : "?";
}

mt_sched mt_schedule_default(int p, int v) {
    (void)p;
    return v > 1 ? MT_SCHED_INTERLEAVED : MT_SCHED_1F1B;
}

mt_status mt_schedule_check(mt_sched kind, int p, int m, int v) {
    if (kind < 0 || kind >= MT_SCHED_COUNT)
        return mt_errorf(MT_ERR_INTERNAL, "pipeline schedule: unknown kind %d", (int)kind);
    if (p < 1)
        return mt_errorf(MT_ERR_CONFIG, "parallel.pipeline = %d: a pipeline needs at least 1 stage; set "
                         "parallel.pipeline >= 1", p);
    if (v < 1)
        return mt_errorf(MT_ERR_CONFIG, "parallel.virtual_pipeline = %d: needs at least 1 model chunk per stage "
                         "(1 = no interleaving); set parallel.virtual_pipeline >= 1", v);
    if (m < 1)
        return mt_errorf(MT_ERR_CONFIG, "%s pipeline schedule with m = %d micro-batches: m = training.global_batch "
                         "/ (training.micro_batch * parallel.data) must be >= 1; raise training.global_batch",
                         mt_schedule_name(kind), m);
    if (v > 1 && kind != MT_SCHED_INTERLEAVED)
        return mt_errorf(MT_ERR_CONFIG, "parallel.virtual_pipeline = %d model chunks per stage need the "
                         "interleaved schedule, not %s; set parallel.virtual_pipeline: 1 or use interleaving",
                         v, mt_schedule_name(kind));
    if (v > 1 && p == 1)
        return mt_errorf(MT_ERR_CONFIG, "parallel.virtual_pipeline = %d model chunks need pipeline parallelism "
                         "(parallel.pipeline = 1); set parallel.pipeline > 1 or parallel.virtual_pipeline: 1", v);
    if (kind == MT_SCHED_INTERLEAVED && m % p != 0) {
        int lo = m / p * p, hi = lo + p;
        if (lo > 0)
            return mt_errorf(MT_ERR_CONFIG, "interleaved pipeline schedule (parallel.virtual_pipeline = %d): "
                             "the micro-batch count m = training.global_batch / (training.micro_batch * "
                             "parallel.data) = %d is not a multiple of parallel.pipeline = %d (micro-batches run "
                             "in groups of p, as in Megatron); set training.global_batch so that m = %d or %d, "
                             "or parallel.virtual_pipeline: 1", v, m, p, lo, hi);
        return mt_errorf(MT_ERR_CONFIG, "interleaved pipeline schedule (parallel.virtual_pipeline = %d): "
                         "the micro-batch count m = training.global_batch / (training.micro_batch * "
                         "parallel.data) = %d is not a multiple of parallel.pipeline = %d (micro-batches run "
                         "in groups of p, as in Megatron); raise training.global_batch so that m = %d, "
                         "or set parallel.virtual_pipeline: 1", v, m, p, hi);
    }
    if ((long long)m * v > INT_MAX / 6)
        return mt_errorf(MT_ERR_CONFIG, "pipeline schedule: m * v = %d * %d micro-batch chunks is too many for one "
                         "table; lower training.global_batch or parallel.virtual_pipeline", m, v);
    return MT_OK;
}

static void run(mt_sched kind, int p, int m, int v, int stage, emitter *e) {
    e->p = p;
    e->v = v;
    e->stage = stage;
    e->group = -1;
    switch (kind) {
    case MT_SCHED_AFAB: gen_afab(e, m); break;
    case MT_SCHED_1F1B: e->fwd_only ? gen_afab(e, m) : gen_1f1b(e, m); break; /* forward-only 1F1B = recv, F, send */
    default: gen_interleaved(e, m); break;
    }
}

/* Validates quietly for the int-returning helpers (keeps the caller's error message). */
static int valid(mt_sched kind, int p, int m, int v) {
    if (kind < 0 || kind >= MT_SCHED_COUNT || p < 1 || m < 1 || v < 1) return 0;
    if (v > 1 && (kind != MT_SCHED_INTERLEAVED || p == 1)) return 0;
    if (kind == MT_SCHED_INTERLEAVED && m % p) return 0;
    return (long long)m * v <= INT_MAX / 6;
}

int mt_schedule_max_steps(mt_sched kind, int p, int m, int v) {
    if (!valid(kind, p, m, v)) return 0;
    int ends = p == 1 ? 2 : p == 2 ? 1 : 0; /* stages that are both first and last, or one of them */
    return 6 * m * v - 2 * m * ends;
}

int mt_schedule_max_in_flight(mt_sched kind, int p, int m, int v, int stage) {
    if (!valid(kind, p, m, v) || stage < 0 || stage >= p) return 0;
    if (kind == MT_SCHED_AFAB) return m;
    if (kind == MT_SCHED_1F1B) return p - stage < m ? p - stage : m;
    emitter e = { 0 };
    run(kind, p, m, v, stage, &e);
    return e.peak;
}

int mt_schedule_warmup(mt_sched kind, int p, int m, int v, int stage) {
    if (!valid(kind, p, m, v) || stage < 0 || stage >= p) return 0;
    if (kind == MT_SCHED_AFAB) return m;
    if (kind == MT_SCHED_1F1B) return p - stage - 1 < m ? p - stage - 1 : m;
    return iv_warmup(p, m, v, stage);
}

double mt_schedule_bubble_formula(mt_sched kind, int p, int m, int v) {
    if (!valid(kind, p, m, v)) return 0.0;
    double vm = kind == MT_SCHED_INTERLEAVED ? (double)v * m : (double)m;
    return (double)(p - 1) / (vm + p - 1);
}

/* Gives each (mb, chunk) a buffer from its entry (RECV_ACT, or F on virtual stage 0) to its B
 * (to its F in a forward-only table). A slot is reused only when none is free, so the count
 * equals the most held at once. The free list is a stack threaded through the releasing steps'
 * peer field (unused by F/B), restored to -1 at the end. */
static void assign_slots(mt_pp_step *st, int n, int first_stage, int fwd_only) {
    const mt_pp_op release = fwd_only ? MT_PP_FWD : MT_PP_BWD;
    int free_top = -1, n_slots = 0;
    for (int i = 0; i < n; i++) {
        mt_pp_step *s = &st[i];
        int enters = s->op == MT_PP_RECV_ACT || (s->op == MT_PP_FWD && first_stage && s->chunk == 0);
        /* sent from grad-out (act-out when forward-only) after the slot was released: no slot */
        if (s->op == MT_PP_SEND_GRAD || (fwd_only && s->op == MT_PP_SEND_ACT)) continue;
        if (enters) {
            if (free_top >= 0) {
                int next = st[free_top].peer;
                s->slot = st[free_top].slot;
                st[free_top].peer = -1;
                free_top = next;
            } else {
                s->slot = n_slots++;
            }
        } else {
            for (int j = i - 1; j >= 0; j--) { /* the (mb, chunk)'s earlier step; a few in-flight windows back */
                if (st[j].mb == s->mb && st[j].chunk == s->chunk && st[j].slot >= 0) {
                    s->slot = st[j].slot;
                    break;
                }
            }
        }
        if (s->op == release) { /* push: the link lives in the releasing step's unused peer field */
            s->peer = free_top;
            free_top = i;
        }
    }
    while (free_top >= 0) {
        int next = st[free_top].peer;
        st[free_top].peer = -1;
        free_top = next;
    }
}

/* mt_schedule_build and mt_schedule_build_forward: the table of one stage, forward and backward
 * steps or (fwd_only) forward steps only; *n_slots (may be NULL) gets the peak of live slots */
static mt_status build_table(mt_sched kind, int p, int m, int v, int stage, int fwd_only, mt_pp_step *steps,
                             int max_steps, int *n_steps, int *n_slots) {
    mt_status st = mt_schedule_check(kind, p, m, v);
    if (st != MT_OK) return st;
    if (stage < 0 || stage >= p)
        return mt_errorf(MT_ERR_INTERNAL, "pipeline schedule: stage %d is outside 0..%d (parallel.pipeline = %d)",
                         stage, p - 1, p);
    if (!steps || !n_steps || max_steps < 0)
        return mt_errorf(MT_ERR_INTERNAL, "pipeline schedule: no steps array given");
    emitter e = { 0 };
    e.steps = steps;
    e.cap = max_steps;
    e.fwd_only = fwd_only;
    run(kind, p, m, v, stage, &e);
    if (e.overflow)
        return mt_errorf(MT_ERR_INTERNAL, "%spipeline schedule %s p=%d m=%d v=%d stage %d: needs %d steps, the array "
                         "holds %d; size it with mt_schedule_max_steps", fwd_only ? "forward-only " : "",
                         mt_schedule_name(kind), p, m, v, stage, e.n, max_steps);
    assign_slots(steps, e.n, stage == 0, fwd_only);
    *n_steps = e.n;
    if (n_slots) *n_slots = e.peak;
    return MT_OK;
}

mt_status mt_schedule_build(mt_sched kind, int p, int m, int v, int stage, mt_pp_step *steps, int max_steps,
                            int *n_steps) {
    return build_table(kind, p, m, v, stage, 0, steps, max_steps, n_steps, NULL);
}

mt_status mt_schedule_build_forward(mt_sched kind, int p, int m, int v, int stage, mt_pp_step *steps, int max_steps,
                                    int *n_steps, int *n_slots) {
    return build_table(kind, p, m, v, stage, 1, steps, max_steps, n_steps, n_slots);
}

int mt_pp_step_format(const mt_pp_step *s, char *buf, int n_buf) {
    if (!mt_pp_op_is_comm(s->op))
        return snprintf(buf, (size_t)n_buf, "%s mb%d c%d s%d", mt_pp_op_name(s->op), s->mb, s->chunk, s->slot);
    int out = s->op == MT_PP_SEND_ACT || s->op == MT_PP_SEND_GRAD;
    return snprintf(buf, (size_t)n_buf, "%s mb%d c%d %s%d g%d", mt_pp_op_name(s->op), s->mb, s->chunk,
                    out ? "->" : "<-", s->peer, s->group);
}
