/* schedule_sim.c — mt_schedule_simulate: runs the p stage tables of one iteration together and
 * checks them. Transfers are matched like NCCL / comm_shm send-recv without tags: the k-th send
 * from a to b pairs with the k-th recv on b from a. A comm group is posted when its stage
 * reaches it; a transfer completes once both ends are posted (rendezvous: the strictest
 * blocking a send can have, so a table that passes here also runs with eager sends); a group
 * completes when all its transfers have. Compute has no contention, so each stage's clock is a
 * max-plus function of its predecessors and no global event queue is needed: stages advance in
 * turn until all finish, or none can move (deadlock).
 * Rule: allocates its working memory and frees it on every path; never exits. */
#include "plan/schedule_sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int src, dst, seq, is_recv; /* sort key */
    int stage, idx;             /* where the op sits */
} comm_ref;

static int cmp_ref(const void *a, const void *b) {
    const comm_ref *x = a, *y = b;
    if (x->src != y->src) return x->src < y->src ? -1 : 1;
    if (x->dst != y->dst) return x->dst < y->dst ? -1 : 1;
    if (x->seq != y->seq) return x->seq < y->seq ? -1 : 1;
    return x->is_recv - y->is_recv;
}

typedef struct {
    int p, m, v;
    const mt_pp_step *const *t;
    const int *n;
    int *off;         /* off[s] = index of stage s's first step in the flat arrays */
    int *partner;     /* flat index of the partner op, -1 for F/B */
    double *done;     /* completion time of a transfer once matched */
    char *matched;
    int *gend;        /* for a transfer: flat index one past the end of its group */
    /* the run: per stage */
    int *pc;          /* next step */
    int *posted;      /* 1: the comm group at pc is posted */
    double *clock;    /* the stage's time */
    double *post_time;/* when the group at pc was posted */
} sim;

static int vstage(const sim *S, int stage, int chunk) { return chunk * S->p + stage; }

static const char *describe(const sim *S, int s, int i, char *buf, int n) {
    char step[96];
    mt_pp_step_format(&S->t[s][i], step, sizeof step);
    snprintf(buf, (size_t)n, "stage %d step %d (%s)", s, i, step);
    return buf;
}

/* Field ranges and group numbering of one table. */
static mt_status check_fields(const sim *S, int s) {
    const mt_pp_step *t = S->t[s];
    int last_group = -1;
    char d[160];
    for (int i = 0; i < S->n[s]; i++) {
        const mt_pp_step *x = &t[i];
        if (x->op < 0 || x->op >= MT_PP_OPS || x->mb < 0 || x->mb >= S->m || x->chunk < 0 || x->chunk >= S->v)
            return mt_errorf(MT_ERR_INTERNAL, "schedule: stage %d step %d: op %d mb %d chunk %d out of range "
                             "(m %d, v %d)", s, i, (int)x->op, x->mb, x->chunk, S->m, S->v);
        if (!mt_pp_op_is_comm(x->op)) {
            if (x->peer != -1 || x->group != -1)
                return mt_errorf(MT_ERR_INTERNAL, "schedule: %s: F/B carries peer %d group %d (want -1)",
                                 describe(S, s, i, d, sizeof d), x->peer, x->group);
            continue;
        }
        if (x->peer < 0 || x->peer >= S->p || x->peer == s)
            return mt_errorf(MT_ERR_INTERNAL, "schedule: %s: peer %d is not another stage of %d",
                             describe(S, s, i, d, sizeof d), x->peer, S->p);
        int contiguous = i > 0 && t[i - 1].group == x->group;
        if (x->group != last_group + 1 && !(x->group == last_group && contiguous))
            return mt_errorf(MT_ERR_INTERNAL, "schedule: %s: comm group %d after group %d (groups count up from 0 "
                             "and are runs of consecutive steps)", describe(S, s, i, d, sizeof d), x->group, last_group);
        last_group = x->group;
    }
    return MT_OK;
}

/* Pairs every send with its recv (k-th a->b with k-th on b from a) and checks they agree. */
static mt_status pair_transfers(sim *S) {
    int n_comm = 0;
    for (int s = 0; s < S->p; s++)
        for (int i = 0; i < S->n[s]; i++) n_comm += mt_pp_op_is_comm(S->t[s][i].op);
    mt_status st = MT_OK;
    comm_ref *refs = malloc(((size_t)n_comm + 1) * sizeof *refs);
    if (!refs) {
        st = mt_errorf(MT_ERR_OOM, "schedule simulator: out of memory for %d transfers", n_comm);
        goto out;
    }
    int k = 0;
    for (int s = 0; s < S->p; s++) {
        for (int i = 0; i < S->n[s]; i++) {
            const mt_pp_step *x = &S->t[s][i];
            if (!mt_pp_op_is_comm(x->op)) continue;
            comm_ref *r = &refs[k++];
            r->is_recv = !mt_pp_op_is_send(x->op);
            r->src = r->is_recv ? x->peer : s;
            r->dst = r->is_recv ? s : x->peer;
            r->stage = s;
            r->idx = i;
            r->seq = i; /* table order for now; renumbered per (src, dst, direction) below */
        }
    }
    /* Sends of a pair all sit on src, recvs all on dst: sorting by (src, dst, table index) puts each
     * side in its table order, and the rank within that side is the message number. */
    qsort(refs, (size_t)n_comm, sizeof *refs, cmp_ref);
    {
        int i = 0;
        while (i < n_comm) {
            int j = i;
            while (j < n_comm && refs[j].src == refs[i].src && refs[j].dst == refs[i].dst) j++;
            int n_send = 0, n_recv = 0;
            for (int q = i; q < j; q++) refs[q].seq = refs[q].is_recv ? n_recv++ : n_send++;
            if (n_send != n_recv) {
                st = mt_errorf(MT_ERR_INTERNAL, "schedule: stage %d sends %d messages to stage %d, which receives %d "
                               "from it", refs[i].src, n_send, refs[i].dst, n_recv);
                goto out;
            }
            i = j;
        }
    }
    qsort(refs, (size_t)n_comm, sizeof *refs, cmp_ref);
    for (int i = 0; i + 1 < n_comm; i += 2) {
        comm_ref *a = &refs[i], *b = &refs[i + 1]; /* a: send, b: recv, same (src, dst, seq) */
        const mt_pp_step *x = &S->t[a->stage][a->idx], *y = &S->t[b->stage][b->idx];
        char da[160], db[160];
        int want = x->op == MT_PP_SEND_ACT ? MT_PP_RECV_ACT : MT_PP_RECV_GRAD;
        int dv = x->op == MT_PP_SEND_ACT ? 1 : -1;
        if (a->is_recv || !b->is_recv || a->src != b->src || a->dst != b->dst || a->seq != b->seq) {
            st = mt_errorf(MT_ERR_INTERNAL, "schedule simulator: internal pairing error");
            goto out;
        }
        if ((int)y->op != want || y->mb != x->mb ||
            vstage(S, b->stage, y->chunk) != vstage(S, a->stage, x->chunk) + dv) {
            st = mt_errorf(MT_ERR_INTERNAL, "schedule: message %d from stage %d to stage %d is sent by %s but "
                           "received by %s (kind, micro-batch and virtual stage %+d must agree)", a->seq, a->src,
                           a->dst, describe(S, a->stage, a->idx, da, sizeof da),
                           describe(S, b->stage, b->idx, db, sizeof db), dv);
            goto out;
        }
        S->partner[S->off[a->stage] + a->idx] = S->off[b->stage] + b->idx;
        S->partner[S->off[b->stage] + b->idx] = S->off[a->stage] + a->idx;
    }
out:
    free(refs);
    return st;
}

/* Per-stage order of events: dependencies, buffers and slots (table order; time-independent). */
static mt_status check_stage(const sim *S, int s, int fwd_only, unsigned char *state, int *slot_owner,
                             mt_pp_stage_stats *ss) {
    enum { GOT_ACT = 1, DID_F = 2, SENT_ACT = 4, GOT_GRAD = 8, DID_B = 16, SENT_GRAD = 32 };
    const int m = S->m, v = S->v, n_mc = m * v;
    memset(state, 0, (size_t)n_mc);
    for (int q = 0; q < n_mc; q++) slot_owner[q] = -1;
    int live = 0, stashed = 0, out_act = -1, out_grad = -1, max_slot = -1;
    char d[160];
    ss->max_in_flight = ss->max_stashed = 0;
    ss->n_groups = 0;
    for (int i = 0; i < S->n[s]; i++) {
        const mt_pp_step *x = &S->t[s][i];
        int id = x->mb * v + x->chunk;
        int first = s == 0 && x->chunk == 0, last = s == S->p - 1 && x->chunk == v - 1;
        unsigned char *f = &state[id];
        const char *bad = NULL;
        if (mt_pp_op_is_comm(x->op) && x->group + 1 > ss->n_groups) ss->n_groups = x->group + 1;
        if (fwd_only && (x->op == MT_PP_BWD || x->op == MT_PP_RECV_GRAD || x->op == MT_PP_SEND_GRAD))
            return mt_errorf(MT_ERR_INTERNAL, "schedule: %s: backward step in a forward-only table",
                             describe(S, s, i, d, sizeof d));
        switch (x->op) {
        case MT_PP_RECV_ACT:
            if (first) bad = "virtual stage 0 receives an activation";
            else if (*f & (GOT_ACT | DID_F)) bad = "activation received twice or after F";
            else if (x->peer != (s + S->p - 1) % S->p) bad = "activation not from the previous stage";
            *f |= GOT_ACT;
            break;
        case MT_PP_FWD:
            if (*f & DID_F) bad = "forwarded twice";
            else if (!first && !(*f & GOT_ACT)) bad = "F before its activation arrived";
            else if (out_act >= 0) bad = "F overwrites act-out before the previous output was sent";
            *f |= DID_F;
            if (!last) out_act = id;
            stashed += !fwd_only;
            break;
        case MT_PP_SEND_ACT:
            if (last) bad = "the last virtual stage sends an activation";
            else if (!(*f & DID_F) || (*f & SENT_ACT)) bad = "activation sent before F or twice";
            else if (out_act != id) bad = "sends an activation that is not in act-out";
            else if (x->peer != (s + 1) % S->p) bad = "activation not sent to the next stage";
            *f |= SENT_ACT;
            out_act = -1;
            break;
        case MT_PP_RECV_GRAD:
            if (last) bad = "the last virtual stage receives a gradient";
            else if (!(*f & DID_F) || (*f & (GOT_GRAD | DID_B))) bad = "gradient received before F, twice or after B";
            else if (x->peer != (s + 1) % S->p) bad = "gradient not from the next stage";
            *f |= GOT_GRAD;
            break;
        case MT_PP_BWD:
            if (*f & DID_B) bad = "backwarded twice";
            else if (!(*f & DID_F)) bad = "B before F";
            else if (!last && !(*f & GOT_GRAD)) bad = "B before its gradient arrived";
            else if (out_grad >= 0) bad = "B overwrites grad-out before the previous gradient was sent";
            *f |= DID_B;
            if (!first) out_grad = id;
            stashed--;
            break;
        case MT_PP_SEND_GRAD:
            if (first) bad = "virtual stage 0 sends a gradient";
            else if (!(*f & DID_B) || (*f & SENT_GRAD)) bad = "gradient sent before B or twice";
            else if (out_grad != id) bad = "sends a gradient that is not in grad-out";
            else if (x->peer != (s + S->p - 1) % S->p) bad = "gradient not sent to the previous stage";
            else if (x->slot != -1) bad = "SEND_GRAD carries a slot (want -1)";
            *f |= SENT_GRAD;
            out_grad = -1;
            break;
        default: break;
        }
        /* slots: an (mb, chunk) enters at RECV_ACT (or F on virtual stage 0), leaves at B (F when
         * forward-only); transfers after the release carry slot -1 */
        if (!bad && fwd_only && x->op == MT_PP_SEND_ACT && x->slot != -1) bad = "forward-only SEND_ACT carries a slot";
        if (!bad && x->op != MT_PP_SEND_GRAD && !(fwd_only && x->op == MT_PP_SEND_ACT)) {
            int enters = x->op == MT_PP_RECV_ACT || (x->op == MT_PP_FWD && first);
            if (x->slot < 0 || x->slot >= n_mc) {
                bad = "slot out of range";
            } else if (enters) {
                if (slot_owner[x->slot] >= 0) bad = "slot still held by another micro-batch";
                slot_owner[x->slot] = id;
                if (x->slot > max_slot) max_slot = x->slot;
                if (++live > ss->max_in_flight) ss->max_in_flight = live;
            } else if (slot_owner[x->slot] != id) {
                bad = "slot differs from the one its micro-batch entered with";
            }
            if (!bad && x->op == (fwd_only ? MT_PP_FWD : MT_PP_BWD)) {
                slot_owner[x->slot] = -1;
                live--;
            }
        }
        if (stashed > ss->max_stashed) ss->max_stashed = stashed;
        if (bad) return mt_errorf(MT_ERR_INTERNAL, "schedule: %s: %s", describe(S, s, i, d, sizeof d), bad);
    }
    for (int q = 0; q < n_mc; q++) {
        int first = s == 0 && q % v == 0, last = s == S->p - 1 && q % v == v - 1;
        unsigned want = fwd_only ? DID_F | (first ? 0 : GOT_ACT) | (last ? 0 : SENT_ACT)
                                 : DID_F | DID_B | (first ? 0 : GOT_ACT | SENT_GRAD) | (last ? 0 : SENT_ACT | GOT_GRAD);
        if (state[q] != want)
            return mt_errorf(MT_ERR_INTERNAL, "schedule: stage %d: micro-batch %d chunk %d is incomplete (%s%s%s%s%s%s"
                             "missing)", s, q / v, q % v, state[q] & DID_F ? "" : "F ", state[q] & DID_B ? "" : "B ",
                             first || (state[q] & GOT_ACT) ? "" : "recv_act ",
                             last || (state[q] & SENT_ACT) ? "" : "send_act ",
                             last || (state[q] & GOT_GRAD) ? "" : "recv_grad ",
                             first || (state[q] & SENT_GRAD) ? "" : "send_grad ");
    }
    ss->n_slots = max_slot + 1;
    ss->n_steps = S->n[s];
    return MT_OK;
}

/* Stage s runs its steps in order from S->pc[s] as far as it can: F and B take their cost, a comm
 * group is posted when reached and completes once every transfer in it has met its posted partner.
 * Returns 1 when anything moved. */
static int advance_stage(sim *S, int s, const mt_pp_sim_opts *o, mt_pp_stage_stats *ss, double *const *start) {
    const int p = S->p;
    int *pc = S->pc;
    double *clock = S->clock;
    int progress = 0;
    while (pc[s] < S->n[s]) {
        int i = pc[s], g = S->off[s] + i;
        const mt_pp_step *x = &S->t[s][i];
        if (!mt_pp_op_is_comm(x->op)) {
            double c = x->op == MT_PP_FWD ? (o->f_vstage ? o->f_vstage[x->chunk * p + s]
                                             : o->f_stage ? o->f_stage[s] : o->f)
                                          : (o->b_vstage ? o->b_vstage[x->chunk * p + s]
                                             : o->b_stage ? o->b_stage[s] : o->b);
            if (start) start[s][i] = clock[s];
            clock[s] += c;
            ss[s].busy += c;
            pc[s]++;
            progress = 1;
            continue;
        }
        int end = S->gend[g];
        if (!S->posted[s]) {
            S->posted[s] = 1;
            S->post_time[s] = clock[s];
            progress = 1;
        }
        int all = 1;
        for (int q = g; q < end; q++) {
            if (S->matched[q]) continue;
            int r = S->partner[q], t = 0;
            while (S->off[t + 1] <= r) t++;
            int at = S->off[t] + pc[t];
            if (S->posted[t] && r >= at && r < S->gend[at]) { /* partner's group is posted */
                double d = (S->post_time[s] > S->post_time[t] ? S->post_time[s] : S->post_time[t]) + o->p2p;
                S->done[q] = S->done[r] = d;
                S->matched[q] = S->matched[r] = 1;
                progress = 1;
            } else {
                all = 0;
            }
        }
        if (!all) break;
        double t_end = clock[s];
        for (int q = g; q < end; q++) {
            if (start) start[s][q - S->off[s]] = S->post_time[s];
            if (S->done[q] > t_end) t_end = S->done[q];
        }
        clock[s] = t_end;
        S->posted[s] = 0;
        pc[s] = end - S->off[s];
        progress = 1;
    }
    return progress;
}

/* Runs the stages in turn until all finish; MT_ERR_INTERNAL naming where every unfinished stage
 * waits when none can move (deadlock). */
static mt_status run_stages(sim *S, const mt_pp_sim_opts *o, mt_pp_stage_stats *ss, double *const *start) {
    for (;;) {
        int progress = 0, finished = 0;
        for (int s = 0; s < S->p; s++) {
            progress |= advance_stage(S, s, o, ss, start);
            finished += S->pc[s] == S->n[s];
        }
        if (finished == S->p) return MT_OK;
        if (!progress) { /* deadlock: say where every unfinished stage waits */
            char msg[1024];
            int len = snprintf(msg, sizeof msg, "schedule deadlock (no stage can move):");
            for (int s = 0; s < S->p && len < (int)sizeof msg - 1; s++) {
                if (S->pc[s] == S->n[s]) continue;
                char d[160];
                len += snprintf(msg + len, sizeof msg - (size_t)len, " %s waits;", describe(S, s, S->pc[s], d, sizeof d));
            }
            return mt_errorf(MT_ERR_INTERNAL, "%s", msg);
        }
    }
}

mt_status mt_schedule_simulate(int p, int m, int v, const mt_pp_step *const *tables, const int *n_steps,
                               const mt_pp_sim_opts *opts, mt_pp_sim_result *res, mt_pp_stage_stats *stats,
                               double *const *start) {
    const mt_pp_sim_opts unit = MT_PP_SIM_UNIT, *o = opts ? opts : &unit;
    mt_status st = MT_OK;
    sim S = { 0 };
    unsigned char *state = NULL;
    int *slot_owner = NULL;
    mt_pp_stage_stats *ss = stats;
    if (p < 1 || m < 1 || v < 1 || !tables || !n_steps || !res)
        return mt_errorf(MT_ERR_CONFIG, "schedule simulator: p %d, m %d, v %d must be >= 1 and tables, n_steps, res given",
                         p, m, v);
    if ((long long)m * v > (1 << 26))
        return mt_errorf(MT_ERR_CONFIG, "schedule simulator: m * v = %lld is too large", (long long)m * v);
    S.p = p;
    S.m = m;
    S.v = v;
    S.t = tables;
    S.n = n_steps;
    int total = 0;
    S.off = malloc(sizeof(int) * ((size_t)p + 1));
    if (!S.off) goto oom;
    for (int s = 0; s < p; s++) {
        if (n_steps[s] < 0 || (n_steps[s] > 0 && !tables[s])) {
            st = mt_errorf(MT_ERR_CONFIG, "schedule simulator: stage %d has no table", s);
            goto out;
        }
        S.off[s] = total;
        total += n_steps[s];
    }
    S.off[p] = total;
    S.partner = malloc(sizeof(int) * ((size_t)total + 1));
    S.gend = malloc(sizeof(int) * ((size_t)total + 1));
    S.done = calloc((size_t)total + 1, sizeof(double));
    S.matched = calloc((size_t)total + 1, 1);
    S.pc = calloc((size_t)p, sizeof(int));
    S.posted = calloc((size_t)p, sizeof(int));
    S.clock = calloc((size_t)p, sizeof(double));
    S.post_time = calloc((size_t)p, sizeof(double));
    state = malloc((size_t)m * v);
    slot_owner = malloc(sizeof(int) * (size_t)m * v);
    if (!ss) ss = calloc((size_t)p, sizeof *ss);
    if (!S.partner || !S.gend || !S.done || !S.matched || !S.pc || !S.posted || !S.clock || !S.post_time || !state ||
        !slot_owner || !ss)
        goto oom;
    memset(ss, 0, sizeof *ss * (size_t)p);

    for (int s = 0; s < p; s++) {
        MT_CHECK(check_fields(&S, s));
        MT_CHECK(check_stage(&S, s, o->forward_only, state, slot_owner, &ss[s]));
        for (int i = n_steps[s] - 1; i >= 0; i--) { /* group ends */
            int g = S.off[s] + i;
            S.partner[g] = -1;
            if (!mt_pp_op_is_comm(tables[s][i].op)) S.gend[g] = g + 1;
            else if (i + 1 < n_steps[s] && tables[s][i + 1].group == tables[s][i].group) S.gend[g] = S.gend[g + 1];
            else S.gend[g] = g + 1;
        }
    }
    MT_CHECK(pair_transfers(&S));

    MT_CHECK(run_stages(&S, o, ss, start));

    res->makespan = 0;
    for (int s = 0; s < p; s++) {
        ss[s].finish = S.clock[s];
        if (S.clock[s] > res->makespan) res->makespan = S.clock[s];
    }
    res->bubble = res->bubble_max = 0;
    for (int s = 0; s < p; s++) {
        ss[s].idle = res->makespan - ss[s].busy;
        double b = res->makespan > 0 ? ss[s].idle / res->makespan : 0;
        res->bubble += b / p;
        if (b > res->bubble_max) res->bubble_max = b;
    }
    goto out;
oom:
    st = mt_errorf(MT_ERR_OOM, "schedule simulator: out of memory for %d stages", p);
out:
    if (ss != stats) free(ss);
    free(S.off);
    free(S.partner);
    free(S.gend);
    free(S.done);
    free(S.matched);
    free(S.pc);
    free(S.posted);
    free(S.clock);
    free(S.post_time);
    free(state);
    free(slot_owner);
    return st;
}
