/* test_schedule.c — the pipeline schedule tables (parallel/schedule.h) and their simulator.
 * Exhaustive over p 1..8, m 1..32, v 1..4 (v > 1 for interleaved only, m % p == 0 there), all
 * three kinds, every stage:
 *  - table sizes are 6mv - 2m([s==0] + [s==p-1]); each (mb, chunk) forwarded and backwarded
 *    exactly once per stage, backwards of a chunk in micro-batch order;
 *  - sends and recvs pair up 1:1 in order per (src, dst) with the same kind and micro-batch and
 *    adjacent virtual stages (checked here independently of the simulator);
 *  - the simulator (rendezvous sends, grouped transfers progress together) finds every
 *    dependency respected and no deadlock, with F = B = 1 and with B = 2F;
 *  - makespan is exactly (F+B)(m+p-1) for AFAB and 1F1B and (F+B)(vm+p-1) interleaved, so the
 *    bubble equals (p-1)/(m+p-1) and (p-1)/(vm+p-1) exactly;
 *  - in flight: AFAB m, 1F1B min(p - s, m) (stage 0: min(p, m)), interleaved
 *    min(2(p-s-1) + (v-1)p + 1, mv) — measured equal to mt_schedule_max_in_flight and to the
 *    slots the table uses; warm-up forwards equal Megatron's num_warmup_microbatches;
 *  - forward-only (evaluation) tables: 3mv - m([s==0] + [s==p-1]) steps, no deadlock, one
 *    input buffer per stage, makespan exactly F (vm + p - 1).
 * Golden tables from Megatron's loops, mutated tables the simulator must reject (deadlock of
 * ungrouped sends, early F, gradient-before-activation order between two stages, reused slot,
 * lost message, double backward, overwritten act-out, naive interleaved forward), and the
 * config errors.
 * `test_schedule --chart` prints the timelines shown in docs/pipeline.md. ~0.3 s. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/schedule_sim.h"
#include "test/test.h"

#define P_MAX 8
#define M_MAX 32
#define V_MAX 4
#define CAP (6 * M_MAX * V_MAX)

static mt_pp_step g_tab[P_MAX][CAP];
static int g_n[P_MAX];

static int build_all(mt_sched kind, int p, int m, int v) {
    for (int s = 0; s < p; s++) {
        mt_status st = mt_schedule_build(kind, p, m, v, s, g_tab[s], CAP, &g_n[s]);
        if (st != MT_OK) {
            fprintf(stderr, "build %s p%d m%d v%d s%d: %s\n", mt_schedule_name(kind), p, m, v, s, mt_last_error());
            return 0;
        }
    }
    return 1;
}

static mt_status simulate(int p, int m, int v, double f, double b, mt_pp_sim_result *r, mt_pp_stage_stats *st) {
    const mt_pp_step *t[P_MAX];
    for (int s = 0; s < p; s++) t[s] = g_tab[s];
    mt_pp_sim_opts c = { f, b, NULL, NULL, 0.0, 0, NULL, NULL };
    return mt_schedule_simulate(p, m, v, t, g_n, &c, r, st, NULL);
}

/* The table's compute steps as "F0.0 B1.1 ..." (mb.chunk). */
static void compute_order(const mt_pp_step *t, int n, char *out, size_t n_out) {
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < n && len + 16 < n_out; i++)
        if (!mt_pp_op_is_comm(t[i].op))
            len += (size_t)snprintf(out + len, n_out - len, "%s%s%d.%d", len ? " " : "", t[i].op == MT_PP_FWD ? "F" : "B",
                                    t[i].mb, t[i].chunk);
}

static void full_table(const mt_pp_step *t, int n, char *out, size_t n_out) {
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < n && len + 48 < n_out; i++) {
        char b[64];
        mt_pp_step_format(&t[i], b, sizeof b);
        len += (size_t)snprintf(out + len, n_out - len, "%s%s", len ? " | " : "", b);
    }
}

static void test_golden(void) {
    char got[8192];
    /* 1F1B p=4 m=8: stage 0 warms up with 3 forwards, the last stage alternates from the start */
    CHECK(build_all(MT_SCHED_1F1B, 4, 8, 1));
    compute_order(g_tab[0], g_n[0], got, sizeof got);
    CHECK_STR_CONTAINS(got, "F0.0 F1.0 F2.0 F3.0 B0.0 F4.0 B1.0 F5.0 B2.0 F6.0 B3.0 F7.0 B4.0 B5.0 B6.0 B7.0");
    CHECK(strlen(got) == strlen("F0.0 F1.0 F2.0 F3.0 B0.0 F4.0 B1.0 F5.0 B2.0 F6.0 B3.0 F7.0 B4.0 B5.0 B6.0 B7.0"));
    compute_order(g_tab[3], g_n[3], got, sizeof got);
    CHECK(!strcmp(got, "F0.0 B0.0 F1.0 B1.0 F2.0 B2.0 F3.0 B3.0 F4.0 B4.0 F5.0 B5.0 F6.0 B6.0 F7.0 B7.0"));
    /* stage 2 of 4, m=3: Megatron's recv_forward / send_forward warm-up, recv_forward before the
     * steady phase, send_forward_recv_backward and send_backward_recv_forward groups, cool-down */
    CHECK(build_all(MT_SCHED_1F1B, 4, 3, 1));
    full_table(g_tab[2], g_n[2], got, sizeof got);
    const char *want2 =
        "recv_act mb0 c0 <-1 g0 | F mb0 c0 s0 | send_act mb0 c0 ->3 g1 | recv_act mb1 c0 <-1 g2 | F mb1 c0 s1 | "
        "send_act mb1 c0 ->3 g3 | recv_grad mb0 c0 <-3 g3 | B mb0 c0 s0 | send_grad mb0 c0 ->1 g4 | "
        "recv_act mb2 c0 <-1 g4 | F mb2 c0 s0 | send_act mb2 c0 ->3 g5 | recv_grad mb1 c0 <-3 g5 | B mb1 c0 s1 | "
        "send_grad mb1 c0 ->1 g6 | recv_grad mb2 c0 <-3 g7 | B mb2 c0 s0 | send_grad mb2 c0 ->1 g8";
    CHECKF(!strcmp(got, want2), "\n got %s\nwant %s", got, want2);
    /* Interleaved p=2 v=2 m=4 (Megatron's virtual micro-batch order: groups of p micro-batches
     * through chunk 0 then chunk 1; backwards with chunks reversed). Stage 0 warm-up 2(p-1) + (v-1)p = 4. */
    CHECK(build_all(MT_SCHED_INTERLEAVED, 2, 4, 2));
    compute_order(g_tab[0], g_n[0], got, sizeof got);
    CHECK(!strcmp(got, "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0"));
    compute_order(g_tab[1], g_n[1], got, sizeof got);
    CHECK(!strcmp(got, "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0"));
    /* stage 0 receives chunk-0 outputs of stage 1 for its chunk 1 (p-1 virtual steps behind), and
     * the first steady group batches all four transfers */
    full_table(g_tab[0], g_n[0], got, sizeof got);
    CHECK_STR_CONTAINS(got, "F mb1 c0 s1 | send_act mb1 c0 ->1 g1 | recv_act mb0 c1 <-1 g1 | F mb0 c1 s2");
    CHECK_STR_CONTAINS(got, "B mb1 c1 s3 | send_act mb3 c0 ->1 g5 | send_grad mb1 c1 ->1 g5 | recv_act mb2 c1 <-1 g5 | "
                            "recv_grad mb0 c0 <-1 g5");
    CHECK(mt_schedule_warmup(MT_SCHED_INTERLEAVED, 2, 4, 2, 0) == 4);
    CHECK(mt_schedule_warmup(MT_SCHED_INTERLEAVED, 2, 4, 2, 1) == 2);
    CHECK(mt_schedule_warmup(MT_SCHED_1F1B, 4, 8, 1, 0) == 3);
    CHECK(mt_schedule_warmup(MT_SCHED_1F1B, 4, 2, 1, 0) == 2);
    CHECK(mt_schedule_default(4, 1) == MT_SCHED_1F1B && mt_schedule_default(4, 2) == MT_SCHED_INTERLEAVED);
}

static int vstage(int p, int s, int chunk) { return chunk * p + s; }

/* Sends a->b and recvs on b from a, in table order, must agree one by one. Independent of the
 * simulator's pairing. Returns the number of messages checked. */
static long check_pairs(int p, int m, int v, const char *what) {
    long n_msgs = 0;
    for (int a = 0; a < p; a++)
        for (int b = 0; b < p; b++) {
            if (a == b) continue;
            int i = 0, j = 0;
            for (;;) {
                while (i < g_n[a] && !((g_tab[a][i].op == MT_PP_SEND_ACT || g_tab[a][i].op == MT_PP_SEND_GRAD) &&
                                       g_tab[a][i].peer == b))
                    i++;
                while (j < g_n[b] && !((g_tab[b][j].op == MT_PP_RECV_ACT || g_tab[b][j].op == MT_PP_RECV_GRAD) &&
                                       g_tab[b][j].peer == a))
                    j++;
                if (i == g_n[a] || j == g_n[b]) {
                    CHECKF(i == g_n[a] && j == g_n[b], "%s: unpaired message %d->%d", what, a, b);
                    break;
                }
                const mt_pp_step *x = &g_tab[a][i], *y = &g_tab[b][j];
                int act = x->op == MT_PP_SEND_ACT;
                int ok = y->op == (act ? MT_PP_RECV_ACT : MT_PP_RECV_GRAD) && y->mb == x->mb &&
                         vstage(p, b, y->chunk) == vstage(p, a, x->chunk) + (act ? 1 : -1);
                CHECKF(ok, "%s: %d->%d message %ld: sent %s mb%d c%d, received %s mb%d c%d", what, a, b, n_msgs,
                       mt_pp_op_name(x->op), x->mb, x->chunk, mt_pp_op_name(y->op), y->mb, y->chunk);
                if (!ok) return n_msgs;
                n_msgs++;
                i++;
                j++;
            }
        }
    (void)m;
    (void)v;
    return n_msgs;
}

static void test_exhaustive(void) {
    long configs = 0, tables = 0, steps = 0, msgs = 0, sims = 0;
    double worst_bubble_err = 0;
    for (int kind = 0; kind < MT_SCHED_COUNT; kind++)
        for (int p = 1; p <= P_MAX; p++)
            for (int m = 1; m <= M_MAX; m++)
                for (int v = 1; v <= V_MAX; v++) {
                    int valid = v == 1 || (kind == MT_SCHED_INTERLEAVED && p > 1);
                    if (kind == MT_SCHED_INTERLEAVED && m % p) valid = 0;
                    mt_status cst = mt_schedule_check(kind, p, m, v);
                    CHECKF((cst == MT_OK) == valid, "check %s p%d m%d v%d = %d", mt_schedule_name(kind), p, m, v, cst);
                    if (!valid) {
                        CHECK(cst == MT_ERR_CONFIG);
                        CHECK(mt_schedule_max_steps(kind, p, m, v) == 0);
                        continue;
                    }
                    char what[64];
                    snprintf(what, sizeof what, "%s p=%d m=%d v=%d", mt_schedule_name(kind), p, m, v);
                    if (!build_all(kind, p, m, v)) {
                        CHECKF(0, "%s: build failed", what);
                        continue;
                    }
                    configs++;
                    tables += p;
                    int max_n = 0;
                    for (int s = 0; s < p; s++) {
                        int want = 6 * m * v - 2 * m * ((s == 0) + (s == p - 1));
                        CHECKF(g_n[s] == want, "%s stage %d: %d steps, want %d", what, s, g_n[s], want);
                        if (g_n[s] > max_n) max_n = g_n[s];
                        steps += g_n[s];
                        /* each (mb, chunk) F and B exactly once; B of a chunk in mb order; warm-up */
                        int nf[M_MAX * V_MAX] = { 0 }, nb[M_MAX * V_MAX] = { 0 }, next_b[V_MAX] = { 0 };
                        int warm = -1, n_f = 0, order_ok = 1;
                        for (int i = 0; i < g_n[s]; i++) {
                            const mt_pp_step *x = &g_tab[s][i];
                            if (x->op == MT_PP_FWD) {
                                nf[x->mb * v + x->chunk]++;
                                n_f++;
                            } else if (x->op == MT_PP_BWD) {
                                nb[x->mb * v + x->chunk]++;
                                if (x->mb != next_b[x->chunk]++) order_ok = 0;
                                if (warm < 0) warm = n_f;
                            }
                        }
                        int once = 1;
                        for (int q = 0; q < m * v; q++) once &= nf[q] == 1 && nb[q] == 1;
                        CHECKF(once, "%s stage %d: some (mb, chunk) not forwarded/backwarded exactly once", what, s);
                        CHECKF(order_ok, "%s stage %d: backwards of a chunk out of micro-batch order", what, s);
                        /* Megatron's warm-up, then the steady phase opens with one more forward */
                        int w = mt_schedule_warmup(kind, p, m, v, s), want_f = w + 1 < m * v ? w + 1 : m * v;
                        CHECKF(warm == want_f, "%s stage %d: %d forwards before the first backward, warm-up %d",
                               what, s, warm, w);
                    }
                    CHECKF(max_n == mt_schedule_max_steps(kind, p, m, v), "%s: max steps %d vs %d", what, max_n,
                           mt_schedule_max_steps(kind, p, m, v));
                    msgs += check_pairs(p, m, v, what);

                    /* simulate: F = B = 1, then B = 2F; exact makespan and bubble */
                    double vm = kind == MT_SCHED_INTERLEAVED ? (double)v * m : (double)m;
                    double formula = mt_schedule_bubble_formula(kind, p, m, v);
                    CHECK_NEAR(formula, (p - 1) / (vm + p - 1), 0, 1e-15);
                    for (int bi = 0; bi < 2; bi++) {
                        double b = bi ? 2.0 : 1.0;
                        mt_pp_sim_result r;
                        mt_pp_stage_stats st[P_MAX];
                        mt_status sst = simulate(p, m, v, 1.0, b, &r, st);
                        sims++;
                        CHECKF(sst == MT_OK, "%s B=%g: %s", what, b, mt_last_error());
                        if (sst != MT_OK) continue;
                        CHECKF(r.makespan == (1.0 + b) * (vm + p - 1), "%s B=%g: makespan %g, want %g", what, b,
                               r.makespan, (1.0 + b) * (vm + p - 1));
                        double err = r.bubble - formula;
                        if (err < 0) err = -err;
                        if (err > worst_bubble_err) worst_bubble_err = err;
                        CHECKF(err < 1e-12 && r.bubble_max - formula < 1e-12, "%s B=%g: bubble %.15f, formula %.15f",
                               what, b, r.bubble, formula);
                        if (bi) continue;
                        for (int s = 0; s < p; s++) {
                            int bound;
                            if (kind == MT_SCHED_AFAB) bound = m;
                            else if (kind == MT_SCHED_1F1B) bound = p - s < m ? p - s : m;
                            else bound = 2 * (p - s - 1) + (v - 1) * p + 1 < m * v ? 2 * (p - s - 1) + (v - 1) * p + 1 : m * v;
                            CHECKF(st[s].max_in_flight == bound && st[s].max_stashed == bound &&
                                       st[s].n_slots == bound && mt_schedule_max_in_flight(kind, p, m, v, s) == bound,
                                   "%s stage %d: in flight %d, stashed %d, slots %d, api %d, bound %d", what, s,
                                   st[s].max_in_flight, st[s].max_stashed, st[s].n_slots,
                                   mt_schedule_max_in_flight(kind, p, m, v, s), bound);
                            if (kind == MT_SCHED_1F1B && s == 0) CHECK(st[s].max_in_flight <= p);
                            CHECK(st[s].busy == m * v * (1.0 + b) / (kind == MT_SCHED_INTERLEAVED ? 1 : v));
                        }
                    }

                    /* forward-only (evaluation) tables: F and activation transfers, one input buffer,
                     * makespan F (vm + p - 1) */
                    int fwd_ok = 1;
                    for (int st_i = 0; st_i < p; st_i++) {
                        int n_slots = -1;
                        fwd_ok &= mt_schedule_build_forward(kind, p, m, v, st_i, g_tab[st_i], CAP, &g_n[st_i],
                                                            &n_slots) == MT_OK;
                        CHECKF(g_n[st_i] == 3 * m * v - m * ((st_i == 0) + (st_i == p - 1)) && n_slots == 1,
                               "%s forward-only stage %d: %d steps, %d slots", what, st_i, g_n[st_i], n_slots);
                    }
                    CHECKF(fwd_ok, "%s forward-only: %s", what, mt_last_error());
                    if (fwd_ok) {
                        const mt_pp_step *t[P_MAX];
                        for (int st_i = 0; st_i < p; st_i++) t[st_i] = g_tab[st_i];
                        mt_pp_sim_opts o = MT_PP_SIM_UNIT;
                        o.forward_only = 1;
                        mt_pp_sim_result r;
                        mt_pp_stage_stats st[P_MAX];
                        mt_status fst = mt_schedule_simulate(p, m, v, t, g_n, &o, &r, st, NULL);
                        sims++;
                        CHECKF(fst == MT_OK, "%s forward-only: %s", what, mt_last_error());
                        CHECKF(fst != MT_OK || r.makespan == vm + p - 1, "%s forward-only: makespan %g, want %g", what,
                               r.makespan, vm + p - 1);
                        for (int st_i = 0; fst == MT_OK && st_i < p; st_i++)
                            CHECK(st[st_i].max_in_flight == 1 && st[st_i].max_stashed == 0);
                        /* and a training simulation refuses a forward-only table */
                        CHECK(mt_schedule_simulate(p, m, v, t, g_n, NULL, &r, NULL, NULL) == MT_ERR_INTERNAL);
                    }
                }
    printf("exhaustive: %ld configurations, %ld stage tables, %ld steps, %ld messages paired, %ld simulations, "
           "worst |bubble - formula| %.2g\n", configs, tables, steps, msgs, sims, worst_bubble_err);
    /* AFAB and 1F1B: 8*32 each; interleaved: sum over p of floor(32/p) = 85 with v = 1, 53 per v > 1 (p > 1) */
    CHECK(configs == 256 + 256 + 85 + 3 * 53);
}

/* ---------- the simulator rejects broken tables ---------- */

static mt_status sim_quiet(int p, int m, int v) {
    mt_pp_sim_result r;
    mt_clear_error();
    return simulate(p, m, v, 1.0, 1.0, &r, NULL);
}

static int find(int s, mt_pp_op op, int mb, int chunk) {
    for (int i = 0; i < g_n[s]; i++)
        if (g_tab[s][i].op == op && g_tab[s][i].mb == mb && g_tab[s][i].chunk == chunk) return i;
    return -1;
}

/* Gives step i a comm group of its own, placed after the rest of its group (renumbering after). */
static void split_off(int s, int i) {
    mt_pp_step x = g_tab[s][i];
    int g = x.group, end = i;
    while (end + 1 < g_n[s] && g_tab[s][end + 1].group == g) end++;
    memmove(&g_tab[s][i], &g_tab[s][i + 1], sizeof x * (size_t)(end - i));
    g_tab[s][end] = x;
    for (int j = end; j < g_n[s]; j++)
        if (g_tab[s][j].group >= 0 && (j == end || g_tab[s][j].group > g)) g_tab[s][j].group++;
}

static void test_sim_rejects(void) {
    /* valid baseline */
    CHECK(build_all(MT_SCHED_1F1B, 2, 2, 1) && sim_quiet(2, 2, 1) == MT_OK);

    /* 1. ungrouped send_forward_recv_backward / send_backward_recv_forward with sends first:
     * both stages block in a send (the deadlock group_start/group_end exists for) */
    CHECK(build_all(MT_SCHED_1F1B, 2, 2, 1));
    int i0 = find(0, MT_PP_SEND_ACT, 1, 0), i1 = find(1, MT_PP_SEND_GRAD, 0, 0);
    CHECK(i0 >= 0 && i1 >= 0 && g_tab[0][i0].group == g_tab[0][i0 + 1].group && g_tab[1][i1].group == g_tab[1][i1 + 1].group);
    split_off(0, i0 + 1); /* stage 0: send act1, then recv grad0, each alone */
    split_off(1, i1 + 1); /* stage 1: send grad0, then recv act1, each alone */
    CHECK(sim_quiet(2, 2, 1) == MT_ERR_INTERNAL);
    if (getenv("SCHED_SHOW")) fprintf(stderr, "%s\n", mt_last_error());
    CHECK_STR_CONTAINS(mt_last_error(), "deadlock");
    CHECK_STR_CONTAINS(mt_last_error(), "stage 0 step");
    CHECK_STR_CONTAINS(mt_last_error(), "stage 1 step");
    /* the same split with the recv first on one side is fine (a rendezvous needs one side waiting) */
    CHECK(build_all(MT_SCHED_1F1B, 2, 2, 1));
    split_off(0, i0 + 1);
    split_off(1, i1); /* stage 1: recv act1 first, then send grad0 */
    CHECK(sim_quiet(2, 2, 1) == MT_OK);

    /* 2. F before its activation arrived */
    CHECK(build_all(MT_SCHED_1F1B, 3, 4, 1));
    int r = find(1, MT_PP_RECV_ACT, 0, 0), f = find(1, MT_PP_FWD, 0, 0);
    CHECK(r >= 0 && f == r + 1);
    mt_pp_step tmp = g_tab[1][r];
    g_tab[1][r] = g_tab[1][f];
    g_tab[1][f] = tmp;
    CHECK(sim_quiet(3, 4, 1) == MT_ERR_INTERNAL);
    CHECK_STR_CONTAINS(mt_last_error(), "F before its activation arrived");

    /* 3. pp=2 interleaved: stage 0 sends stage 1 both an activation and a gradient in one group;
     * with the gradient first, the in-order pairing hands the gradient to stage 1's activation
     * receive (Megatron once required pp > 2 for interleaving; the tables order sends act-first) */
    CHECK(build_all(MT_SCHED_INTERLEAVED, 2, 4, 2));
    int sa2 = find(0, MT_PP_SEND_ACT, 2, 0), sg0 = find(0, MT_PP_SEND_GRAD, 0, 1);
    CHECK(sa2 >= 0 && sg0 == sa2 + 1 && g_tab[0][sa2].group == g_tab[0][sg0].group);
    mt_pp_step tmp3 = g_tab[0][sa2];
    g_tab[0][sa2] = g_tab[0][sg0];
    g_tab[0][sg0] = tmp3;
    CHECK(sim_quiet(2, 4, 2) == MT_ERR_INTERNAL);
    CHECK_STR_CONTAINS(mt_last_error(), "is sent by stage 0");
    CHECK_STR_CONTAINS(mt_last_error(), "send_grad mb0 c1");
    CHECK_STR_CONTAINS(mt_last_error(), "recv_act mb2 c0");

    /* 4. two live micro-batches in one slot */
    CHECK(build_all(MT_SCHED_1F1B, 4, 8, 1));
    int e1 = find(0, MT_PP_FWD, 1, 0);
    CHECK(e1 >= 0 && g_tab[0][e1].slot == 1);
    for (int i = e1; i < g_n[0]; i++)
        if (g_tab[0][i].mb == 1 && g_tab[0][i].op != MT_PP_SEND_GRAD) g_tab[0][i].slot = 0;
    CHECK(sim_quiet(4, 8, 1) == MT_ERR_INTERNAL);
    CHECK_STR_CONTAINS(mt_last_error(), "slot still held");

    /* 5. a lost message: stage 2 never receives mb 3's gradient */
    CHECK(build_all(MT_SCHED_1F1B, 4, 8, 1));
    int lg = find(2, MT_PP_RECV_GRAD, 3, 0);
    CHECK(lg >= 0);
    g_tab[2][lg].op = MT_PP_SEND_GRAD; /* now stage 2 "sends" where it should receive */
    g_tab[2][lg].slot = -1;
    CHECK(sim_quiet(4, 8, 1) == MT_ERR_INTERNAL);
    CHECK(strstr(mt_last_error(), "gradient") != NULL || strstr(mt_last_error(), "messages") != NULL);

    /* 6. a micro-batch backwarded twice / another never */
    CHECK(build_all(MT_SCHED_AFAB, 2, 3, 1));
    int b2 = find(1, MT_PP_BWD, 2, 0);
    CHECK(b2 >= 0);
    g_tab[1][b2].mb = 1;
    CHECK(sim_quiet(2, 3, 1) == MT_ERR_INTERNAL);

    /* 7. act-out overwritten: two forwards before the first output is sent */
    CHECK(build_all(MT_SCHED_AFAB, 2, 3, 1));
    int sa = find(0, MT_PP_SEND_ACT, 0, 0), f1 = find(0, MT_PP_FWD, 1, 0);
    CHECK(sa >= 0 && f1 == sa + 1);
    tmp = g_tab[0][sa];
    g_tab[0][sa] = g_tab[0][f1];
    g_tab[0][f1] = tmp;
    CHECK(sim_quiet(2, 3, 1) == MT_ERR_INTERNAL);
    CHECK_STR_CONTAINS(mt_last_error(), "act-out");

    /* 8. why forward-only interleaved keeps Megatron's batched groups: the same virtual order with
     * each transfer blocking on its own deadlocks for every p >= 2 (stage p-1 blocks sending chunk
     * 0's output to stage 0, which is still blocked sending its chunk 0 outputs down the pipe) */
    for (int p = 2; p <= 4; p++) {
        int m = p, v = 2;
        for (int s = 0; s < p; s++) {
            int n = 0, g = 0;
            for (int k = 0; k < m * v; k++) {
                int mb = (k / (p * v)) * p + k % p, c = (k % (p * v)) / p;
                if (!(s == 0 && c == 0))
                    g_tab[s][n++] = (mt_pp_step){ MT_PP_RECV_ACT, mb, c, (s + p - 1) % p, g++, 0 };
                g_tab[s][n++] = (mt_pp_step){ MT_PP_FWD, mb, c, -1, -1, 0 };
                if (!(s == p - 1 && c == v - 1))
                    g_tab[s][n++] = (mt_pp_step){ MT_PP_SEND_ACT, mb, c, (s + 1) % p, g++, -1 };
            }
            g_n[s] = n;
        }
        const mt_pp_step *t[P_MAX];
        for (int s = 0; s < p; s++) t[s] = g_tab[s];
        mt_pp_sim_opts o = MT_PP_SIM_UNIT;
        o.forward_only = 1;
        mt_pp_sim_result r;
        mt_status st = mt_schedule_simulate(p, m, v, t, g_n, &o, &r, NULL, NULL);
        CHECKF(st == MT_ERR_INTERNAL && strstr(mt_last_error(), "deadlock"),
               "naive interleaved forward p=%d: %s", p, st ? mt_last_error() : "ok");
    }
}

/* ---------- costs other than unit ---------- */

static void test_costs(void) {
    /* slower last stage (the loss): 1F1B p=4 m=8; the bubble exceeds the formula and the slow stage
     * is the busiest; still no deadlock (deadlock freedom does not depend on timing) */
    CHECK(build_all(MT_SCHED_1F1B, 4, 8, 1));
    const mt_pp_step *t[P_MAX];
    for (int s = 0; s < 4; s++) t[s] = g_tab[s];
    double fs[4] = { 1, 1, 1, 1.5 }, bs[4] = { 2, 2, 2, 3 };
    mt_pp_sim_opts c = { 1, 2, fs, bs, 0.0, 0, NULL, NULL };
    mt_pp_sim_result r;
    mt_pp_stage_stats st[4];
    CHECK(mt_schedule_simulate(4, 8, 1, t, g_n, &c, &r, st, NULL) == MT_OK);
    CHECK(st[3].busy == 8 * 4.5 && st[3].idle < st[0].idle);
    CHECK(r.makespan >= 8 * 4.5 + 3 * 3.0);
    /* a transfer latency adds to every hop: 1F1B makespan (F+B)(m+p-1) + 2(p-1) x latency at least */
    mt_pp_sim_opts c2 = { 1, 1, NULL, NULL, 0.25, 0, NULL, NULL };
    CHECK(mt_schedule_simulate(4, 8, 1, t, g_n, &c2, &r, NULL, NULL) == MT_OK);
    CHECK(r.makespan >= 2 * (8 + 3) + 2 * 3 * 0.25);
    /* start times: F of mb 0 on stage s starts at s (unit costs) */
    double st0[4][CAP], *starts[4] = { st0[0], st0[1], st0[2], st0[3] };
    CHECK(mt_schedule_simulate(4, 8, 1, t, g_n, NULL, &r, NULL, starts) == MT_OK);
    for (int s = 0; s < 4; s++) CHECK(starts[s][find(s, MT_PP_FWD, 0, 0)] == s);
}

/* ---------- invalid arguments ---------- */

static void test_invalid(void) {
    mt_pp_step steps[64];
    int n = 0;
    CHECK(mt_schedule_build(MT_SCHED_INTERLEAVED, 4, 6, 2, 0, steps, 64, &n) == MT_ERR_CONFIG);
    CHECK_STR_CONTAINS(mt_last_error(), "parallel.virtual_pipeline = 2");
    CHECK_STR_CONTAINS(mt_last_error(), "training.global_batch");
    CHECK_STR_CONTAINS(mt_last_error(), "m = training.global_batch / (training.micro_batch * parallel.data) = 6");
    CHECK_STR_CONTAINS(mt_last_error(), "not a multiple of parallel.pipeline = 4");
    CHECK_STR_CONTAINS(mt_last_error(), "m = 4 or 8");
    /* refused (kind, p, m, v) and what the message must say */
    static const struct {
        mt_sched kind;
        int p, m, v;
        const char *says;
    } refused[] = {
        {MT_SCHED_INTERLEAVED, 4, 3, 2, "so that m = 4"},
        {MT_SCHED_1F1B, 0, 4, 1, "parallel.pipeline = 0"},
        {MT_SCHED_INTERLEAVED, 4, 4, 0, "parallel.virtual_pipeline = 0"},
        {MT_SCHED_1F1B, 4, 0, 1, "raise training.global_batch"},
        {MT_SCHED_1F1B, 4, 8, 2, "need the interleaved schedule"},
        {MT_SCHED_INTERLEAVED, 1, 8, 2, "set parallel.pipeline > 1 or parallel.virtual_pipeline: 1"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        CHECKF(mt_schedule_check(refused[i].kind, refused[i].p, refused[i].m, refused[i].v) == MT_ERR_CONFIG,
               "case %zu", i);
        CHECK_STR_CONTAINS(mt_last_error(), refused[i].says);
    }
    CHECK(mt_schedule_check(MT_SCHED_INTERLEAVED, 4, 1 << 28, 4) == MT_ERR_CONFIG);
    CHECK(mt_schedule_check((mt_sched)7, 4, 8, 1) == MT_ERR_INTERNAL);
    CHECK(mt_schedule_build(MT_SCHED_1F1B, 4, 8, 1, 4, steps, 64, &n) == MT_ERR_INTERNAL);
    CHECK_STR_CONTAINS(mt_last_error(), "stage 4 is outside 0..3");
    CHECK(mt_schedule_build(MT_SCHED_1F1B, 4, 8, 1, 1, steps, 10, &n) == MT_ERR_INTERNAL);
    CHECK_STR_CONTAINS(mt_last_error(), "needs 48 steps, the array holds 10");
    CHECK(mt_schedule_max_in_flight(MT_SCHED_1F1B, 4, 8, 1, 4) == 0);
    CHECK(mt_schedule_max_steps(MT_SCHED_INTERLEAVED, 4, 6, 2) == 0);
    CHECK(mt_schedule_bubble_formula(MT_SCHED_1F1B, 16, 8, 1) > 0.65 && mt_schedule_bubble_formula(MT_SCHED_1F1B, 16, 8, 1) < 0.66);
}

/* ---------- timelines for docs/pipeline.md ---------- */

static void chart(mt_sched kind, int p, int m, int v) {
    if (!build_all(kind, p, m, v)) return;
    const mt_pp_step *t[P_MAX];
    static double st_buf[P_MAX][CAP];
    double *starts[P_MAX];
    for (int s = 0; s < p; s++) {
        t[s] = g_tab[s];
        starts[s] = st_buf[s];
    }
    mt_pp_sim_result r;
    mt_pp_stage_stats ss[P_MAX];
    if (mt_schedule_simulate(p, m, v, t, g_n, NULL, &r, ss, starts) != MT_OK) return;
    int T = (int)r.makespan;
    printf("%s p=%d m=%d v=%d: makespan %d, bubble %.3f = (p-1)/(%sm+p-1)\n", mt_schedule_name(kind), p, m, v, T, r.bubble,
           kind == MT_SCHED_INTERLEAVED ? "v" : "");
    for (int s = 0; s < p; s++) {
        char line[4 * 300];
        memset(line, '.', sizeof line);
        for (int i = 0; i < g_n[s]; i++) {
            const mt_pp_step *x = &g_tab[s][i];
            if (mt_pp_op_is_comm(x->op)) continue;
            int at = (int)starts[s][i];
            char c = x->op == MT_PP_FWD ? (x->chunk ? 'f' : 'F') : (x->chunk ? 'b' : 'B');
            if (at < 300) {
                line[at * 3] = c;
                line[at * 3 + 1] = (char)(x->mb < 10 ? '0' + x->mb : 'a' + x->mb - 10);
                line[at * 3 + 2] = ' ';
            }
        }
        for (int u = 0; u < T && u < 300; u++)
            if (line[u * 3] == '.') line[u * 3 + 1] = line[u * 3 + 2] = ' ';
        line[(T < 300 ? T : 300) * 3] = 0;
        printf("  stage %d |%s| in flight %d\n", s, line, ss[s].max_in_flight);
    }
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--chart")) {
        chart(MT_SCHED_AFAB, 4, 8, 1);
        chart(MT_SCHED_1F1B, 4, 8, 1);
        chart(MT_SCHED_INTERLEAVED, 4, 8, 2);
        return 0;
    }
    test_golden();
    test_exhaustive();
    test_sim_rejects();
    test_costs();
    test_invalid();
    TEST_MAIN_END();
}
