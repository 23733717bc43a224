/* test_plan_uneven.c — uneven pipeline stages (parallel.first_stage_layers / last_stage_layers /
 * embedding_in_split / loss_in_split, core/recipe/recipe_stages.c) in the validator, the trainer's
 * refusal and `mtrain plan`:
 *  1. Megatron's split rules: 126 layers on 16 stages refused evenly, accepted as 7 / 8 x 14 / 7 both
 *     ways (first/last counts, or the embedding and the loss counted as layers); the bad splits refused
 *     naming the key;
 *  2. the trainer accepts them, and its stage layouts hold the split's layers with their global indices;
 *     a split that does not add up, or first / last counts with interleaving, is refused by the layout
 *     naming the keys;
 *  3. per-stage memory: the plan's first and last stage equal the trainer's allocations for them
 *     (mt_model_init_stage and the pipeline's slots: weights, gradients, optimizer exactly, activations
 *     within 0.1%); each end stage of an uneven layout equals, exactly, the same stage of the even
 *     layout that gives it the same number of layers (whose memory test_plan checks against the
 *     trainer's buffers), and the two spellings of one split give the same plan;
 *  4. the plan's bubble equals the schedule simulator's (mt_schedule_simulate run here on the trainer's
 *     1F1B tables with each stage's forward FLOPs, B = 2 F) to 1e-12, and the --timeline path's
 *     (mt_pp_vstage_flops + mt_pp_timeline_build) exactly; it exceeds the even formula; interleaved
 *     with the embedding / loss counted, the timeline of the chunks' costs written out by hand;
 *  5. Llama 3 405B (configs/llama3-405b.yaml, 126 layers, pp 16) plans and --search ranks uneven
 *     layouts. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/model/model_layout.h"
#include "parallel/schedule.h"
#include "plan/plan.h"
#include "plan/schedule_sim.h"
#include "plan/schedule_timeline.h"
#include "core/recipe/recipe.h"
#include "train/model.h"
#include "train/train.h"
#include "test/recipe_load.h"
#include "test/test.h"

static mt_recipe g_r;

/* A shipped recipe with "key=value" overrides, not validated. */
static mt_recipe *load_raw(const char *name, const char *const *sets) {
    mt_test_recipe_load(&g_r, name, sets);
    return &g_r;
}

/* Validation of `name` + sets on `world` ranks fails naming `key`. */
static void expect_refused(const char *name, int world, const char *const *sets, const char *key) {
    mt_recipe *r = load_raw(name, sets);
    mt_status st = mt_recipe_validate(r, world);
    CHECKF(st == MT_ERR_CONFIG && strstr(mt_last_error(), key), "%s: %s", key, mt_last_error());
    mt_clear_error();
}

static void test_split_rules(void) {
    static const char *const even[] = { "parallel.embedding_in_split=false", "parallel.loss_in_split=false", NULL };
    expect_refused("llama3-405b", 8192, even, "model.layers"); /* 126 % 16 */
    mt_recipe *r = load_raw("llama3-405b", NULL);
    CHECKF(mt_recipe_validate(r, 8192) == MT_OK, "%s", mt_last_error());
    CHECK(mt_recipe_uneven_stages(r));
    int sum = 0;
    for (int s = 0; s < 16; s++) sum += mt_recipe_stage_layers(r, s);
    CHECK(sum == 126);
    CHECK(mt_recipe_stage_layers(r, 0) == 7 && mt_recipe_stage_layers(r, 1) == 8 && mt_recipe_stage_layers(r, 14) == 8 &&
          mt_recipe_stage_layers(r, 15) == 7);
    static const char *const ends[] = { "parallel.embedding_in_split=false", "parallel.loss_in_split=false",
                                        "parallel.first_stage_layers=7", "parallel.last_stage_layers=7", NULL };
    r = load_raw("llama3-405b", ends);
    CHECKF(mt_recipe_validate(r, 8192) == MT_OK, "%s", mt_last_error());
    CHECK(mt_recipe_stage_layers(r, 0) == 7 && mt_recipe_stage_layers(r, 7) == 8 && mt_recipe_stage_layers(r, 15) == 7);
    /* 126 - 7 = 119 do not split over 15 stages */
    static const char *const first_only[] = { "parallel.embedding_in_split=false", "parallel.loss_in_split=false",
                                              "parallel.first_stage_layers=7", NULL };
    expect_refused("llama3-405b", 8192, first_only, "parallel.first_stage_layers");
    static const char *const both_ways[] = { "parallel.first_stage_layers=7", "parallel.last_stage_layers=7", NULL };
    expect_refused("llama3-405b", 8192, both_ways, "cannot be combined");
    /* interleaved: the counted ends too (Megatron-Core), 126 + 2 = 128 places in 16 x 2 chunks of 4; not in
     * 16 x 3; first / last counts not with interleaving */
    static const char *const interleaved[] = { "parallel.virtual_pipeline=2", NULL };
    r = load_raw("llama3-405b", interleaved);
    CHECKF(mt_recipe_validate(r, 8192) == MT_OK, "%s", mt_last_error());
    CHECK(mt_recipe_chunk_layers(r, 0, 0) == 3 && mt_recipe_chunk_layers(r, 0, 1) == 4 &&
          mt_recipe_chunk_layers(r, 15, 0) == 4 && mt_recipe_chunk_layers(r, 15, 1) == 3);
    CHECK(mt_recipe_chunk_first_layer(r, 0, 1) == 63 && mt_recipe_chunk_first_layer(r, 1, 0) == 3);
    static const char *const v3[] = { "parallel.virtual_pipeline=3", NULL };
    expect_refused("llama3-405b", 8192, v3, "= 128 do not split into parallel.pipeline x parallel.virtual_pipeline");
    static const char *const ends_v2[] = { "parallel.embedding_in_split=false", "parallel.loss_in_split=false",
                                           "parallel.first_stage_layers=7", "parallel.last_stage_layers=7",
                                           "parallel.virtual_pipeline=2", NULL };
    expect_refused("llama3-405b", 8192, ends_v2, "interleaved");
    static const char *const no_pp[] = { "parallel.first_stage_layers=2", NULL };
    expect_refused("gpt-tiny", 1, no_pp, "parallel.pipeline > 1");
    static const char *const emb_only[] = { "parallel.loss_in_split=false", NULL }; /* 126 + 1 = 127 on 16 */
    expect_refused("llama3-405b", 8192, emb_only, "parallel.embedding_in_split");
}

/* The trainer accepts uneven stages (train_support.c), and its stage layouts hold the split's layers:
 * local layer l of stage s is global layer first_layer(s) + l (init streams, checkpoint boxes). */
static void test_trainer_layouts(void) {
    mt_recipe *r = load_raw("llama3-405b", NULL);
    CHECK(mt_recipe_validate(r, 8192) == MT_OK);
    char note[256];
    CHECKF(mt_train_check_supported(r, note, sizeof note) == MT_OK, "%s", mt_last_error());
    mt_param_layout *pl = malloc(sizeof *pl);
    CHECK(pl != NULL);
    int next = 0; /* every layer on exactly one stage, in order */
    for (int s = 0; s < 16 && pl; s++) {
        CHECKF(mt_param_layout_build_stage(r, s, pl) == MT_OK, "%s", mt_last_error());
        CHECK(pl->L == mt_recipe_stage_layers(r, s) && pl->L_global == 126);
        CHECK(mt_param_global_layer(pl, 0) == next && mt_param_global_layer(pl, pl->L - 1) == next + pl->L - 1);
        CHECK(mt_recipe_stage_first_layer(r, s) == next);
        next += pl->L;
    }
    CHECK(next == 126);
    /* a split that does not add up (not validated) and interleaving: refused by the layout, naming the keys */
    static const char *const bad[] = { "model.layers=7", "parallel.pipeline=2", "parallel.first_stage_layers=9", NULL };
    r = load_raw("gpt-tiny", bad);
    CHECK(pl && mt_param_layout_build_stage(r, 0, pl) == MT_ERR_CONFIG &&
          strstr(mt_last_error(), "parallel.first_stage_layers"));
    mt_clear_error();
    static const char *const vpp[] = { "model.layers=8", "parallel.pipeline=2", "parallel.first_stage_layers=2",
                                       "parallel.virtual_pipeline=2", NULL };
    r = load_raw("gpt-tiny", vpp);
    CHECK(pl && mt_param_layout_build_stage(r, 1, pl) == MT_ERR_UNSUPPORTED &&
          strstr(mt_last_error(), "virtual_pipeline"));
    mt_clear_error();
    free(pl);
}

/* The plan of gpt-tiny with `layers` layers on pp 4 (micro-batch 1, 8 micro-batches) + sets; returns its
 * recipe (validated; until the next load). */
static mt_recipe *plan_tiny(int layers, const char *const *sets, mt_plan *p) {
    char lk[32];
    snprintf(lk, sizeof lk, "model.layers=%d", layers);
    const char *all[8] = { lk, "parallel.pipeline=4", "training.micro_batch=1" };
    int n = 3;
    for (int i = 0; sets && sets[i] && n < 7; i++) all[n++] = sets[i];
    all[n] = NULL;
    mt_recipe *r = load_raw("gpt-tiny", all);
    CHECKF(mt_recipe_validate(r, 4) == MT_OK, "%s", mt_last_error());
    mt_gpu_spec host;
    mt_gpu_host(&host, 1.0);
    mt_plan_opts o;
    mt_plan_opts_defaults(&o);
    CHECKF(mt_plan_compute(r, 4, &host, &o, p) == MT_OK, "%s", mt_last_error());
    return r;
}

static void same_rank(const mt_plan_rank *a, const mt_plan_rank *b) {
    CHECK(a->n_elems == b->n_elems && a->n_params == b->n_params);
    CHECK(a->weights_bytes == b->weights_bytes && a->grads_bytes == b->grads_bytes && a->optim_bytes == b->optim_bytes);
    CHECK(a->n_layer_mbs == b->n_layer_mbs);
    CHECK_NEAR(a->acts_bytes, b->acts_bytes, 0, 1e-12);
    CHECK_NEAR(a->total_bytes, b->total_bytes, 0, 1e-12);
}

static void test_stage_memory(void) {
    static mt_plan un, un2, even1, even3;
    /* 8 layers on 4 stages as 1 / 3 / 3 / 1 */
    static const char *const ends[] = { "parallel.first_stage_layers=1", "parallel.last_stage_layers=1", NULL };
    plan_tiny(8, ends, &un);
    CHECK(un.uneven && un.n_layers_first == 1 && un.n_layers_mid == 3 && un.n_layers_last == 1);
    plan_tiny(4, NULL, &even1);  /* 1 layer per stage */
    plan_tiny(12, NULL, &even3); /* 3 layers per stage */
    same_rank(&un.first, &even1.first);
    same_rank(&un.last, &even1.last);
    /* the embedding and loss counted: (6 + 2) / 4 = 2, first and last 1 */
    static const char *const counted[] = { "parallel.embedding_in_split=true", "parallel.loss_in_split=true", NULL };
    static const char *const ends6[] = { "parallel.first_stage_layers=1", "parallel.last_stage_layers=1", NULL };
    plan_tiny(6, counted, &un);
    plan_tiny(6, ends6, &un2);
    CHECK(un.n_layers_mid == 2 && un2.n_layers_mid == 2);
    same_rank(&un.first, &un2.first);
    same_rank(&un.last, &un2.last);
    CHECK(un.bubble == un2.bubble && un.t_step_s == un2.t_step_s);
    printf("uneven 1/3/3/1: first stage %.0f bytes (even 1-layer stage %.0f), last %.0f; 3-layer stage %.0f\n",
           un.first.total_bytes, even1.first.total_bytes, un.last.total_bytes, even3.first.total_bytes);
}

/* Plan memory against the trainer's allocations on the first and the last stage of an uneven layout:
 * mt_model_init_stage (fp32, CPU backend) for weights, gradients and optimizer state (exact), and the
 * activations: the model's buffer once per schedule slot (mt_schedule_max_in_flight, as train/pipeline.c
 * allocates them) plus the activation sent and the gradient received (mt_pipeline_extra_bytes'
 * 2 N_r C). Tolerance 0.1% on activations: the layout's 256-byte alignment of each of its buffers. */
static void check_stage_alloc(const char *name, int world, const char *const *sets) {
    const char *all[12] = { "training.precision=fp32", "training.backend=cpu" };
    int n = 2;
    for (int i = 0; sets[i] && n < 11; i++) all[n++] = sets[i];
    all[n] = NULL;
    mt_recipe *r = load_raw(name, all);
    CHECKF(mt_recipe_validate(r, world) == MT_OK, "%s", mt_last_error());
    mt_gpu_spec host;
    mt_gpu_host(&host, 0);
    mt_plan_opts o;
    mt_plan_opts_defaults(&o);
    static mt_plan p;
    CHECKF(mt_plan_compute(r, world, &host, &o, &p) == MT_OK, "%s", mt_last_error());
    CHECK(p.uneven && p.mode == MT_PLAN_TRAINER_FP32);
    const int pp = r->parallel.pipeline, m = mt_recipe_micro_batches(r);
    mt_backend be;
    CHECK(mt_backend_cpu_create(&be, 1) == MT_OK);
    printf("%s", name);
    for (int i = 0; sets[i]; i++) printf(" %s", sets[i]);
    for (int k = 0; k < 2; k++) {
        const int stage = k ? pp - 1 : 0;
        const mt_plan_rank *rk = k ? &p.last : &p.first;
        static mt_model md;
        mt_status st = mt_model_init_stage(&md, r, &be, r->training.micro_batch, 1, 0, stage);
        CHECKF(st == MT_OK, "%s", mt_last_error());
        if (st != MT_OK) continue;
        CHECK(md.pl.L == mt_recipe_stage_layers(r, stage));
        const int v = r->parallel.virtual_pipeline > 1 ? r->parallel.virtual_pipeline : 1;
        const int slots = mt_schedule_max_in_flight(mt_schedule_default(pp, v), pp, m, v, stage);
        const double acts = (double)slots * md.bytes_acts + 2.0 * md.al.N_r * md.pl.C * 4;
        CHECK(rk->weights_bytes == (double)md.bytes_params && rk->grads_bytes == (double)md.bytes_grads &&
              rk->optim_bytes == (double)md.bytes_optim);
        CHECK_NEAR(rk->acts_bytes, acts, 0, 1e-3);
        printf("; %s stage (%d layers): weights %.0f = %zu, grads %.0f = %zu, optimizer %.0f = %zu, acts plan %.0f vs "
               "trainer %.0f (%+.3f%%)", k ? "last" : "first", md.pl.L, rk->weights_bytes, md.bytes_params,
               rk->grads_bytes, md.bytes_grads, rk->optim_bytes, md.bytes_optim, rk->acts_bytes, acts,
               100 * (rk->acts_bytes / acts - 1));
        mt_model_free(&md);
    }
    printf("\n");
    mt_backend_destroy(&be);
}

static void test_stage_alloc(void) {
    static const char *const g7[] = { "model.layers=7", "parallel.pipeline=2", "parallel.first_stage_layers=3",
                                      "training.micro_batch=2", NULL };
    static const char *const g6[] = { "model.layers=6", "parallel.pipeline=4", "parallel.first_stage_layers=1",
                                      "parallel.last_stage_layers=1", "training.micro_batch=1", NULL };
    static const char *const l7[] = { "model.layers=7", "parallel.pipeline=2", "parallel.loss_in_split=true",
                                      "training.micro_batch=2", "training.recompute=selective", NULL };
    check_stage_alloc("gpt-tiny", 2, g7);
    check_stage_alloc("gpt-tiny", 4, g6);
    check_stage_alloc("llama-tiny", 2, l7);
    /* interleaved, both ends counted: 8 chunks of 1, the first and the last holding no layer */
    static const char *const g6v[] = { "model.layers=6", "parallel.pipeline=4", "parallel.virtual_pipeline=2",
                                       "parallel.embedding_in_split=true", "parallel.loss_in_split=true",
                                       "training.micro_batch=1", NULL };
    check_stage_alloc("gpt-tiny", 4, g6v);
}

/* The bubble of stage costs f (B = 2 f) through mt_schedule_simulate on the trainer's tables. */
static double simulate_bubble(int p, int m, const double *f, double *makespan) {
    const mt_sched kind = mt_schedule_default(p, 1);
    const int cap = mt_schedule_max_steps(kind, p, m, 1);
    mt_pp_step *steps = calloc((size_t)p * cap, sizeof *steps);
    const mt_pp_step *tables[16];
    int n_steps[16];
    double b[16];
    CHECK(steps != NULL && p <= 16);
    for (int s = 0; s < p; s++) {
        CHECK(mt_schedule_build(kind, p, m, 1, s, steps + (size_t)s * cap, cap, &n_steps[s]) == MT_OK);
        tables[s] = steps + (size_t)s * cap;
        b[s] = 2.0 * f[s];
    }
    mt_pp_sim_opts o = MT_PP_SIM_UNIT;
    o.f_stage = f;
    o.b_stage = b;
    mt_pp_sim_result res;
    CHECKF(mt_schedule_simulate(p, m, 1, tables, n_steps, &o, &res, NULL, NULL) == MT_OK, "%s", mt_last_error());
    free(steps);
    *makespan = res.makespan;
    return res.bubble;
}

/* plan_tiny, and the model's own forward FLOPs per token of a layer and of the head into fl */
static mt_recipe *plan_tiny_flops(int layers, const char *const *sets, mt_plan *p, mt_model_fwd_flops *fl) {
    mt_recipe *r = plan_tiny(layers, sets, p);
    mt_param_layout *pl = malloc(sizeof *pl);
    CHECK(pl && mt_param_layout_build(r, pl) == MT_OK);
    mt_model_fwd_flops_per_token(pl, 0, 1, fl);
    free(pl);
    return r;
}

static void test_bubble(void) {
    static mt_plan p;
    static const char *const ends[] = { "parallel.first_stage_layers=1", "parallel.last_stage_layers=1", NULL };
    mt_model_fwd_flops fl; /* each stage's forward FLOPs per token, from the model's own count */
    mt_recipe *r = plan_tiny_flops(8, ends, &p, &fl);
    const double f[4] = { fl.layer, 3 * fl.layer, 3 * fl.layer, fl.layer + fl.head };
    double makespan;
    const double sim = simulate_bubble(4, 8, f, &makespan);
    CHECK_NEAR(p.bubble, sim, 1e-12, 0);
    const double worst = 3.0 * fmax(f[1], f[3]);
    CHECK_NEAR(p.bubble_sim_makespan, makespan / worst, 1e-12, 0);
    /* the --timeline path */
    double fv[4], bv[4];
    CHECK(mt_pp_vstage_flops(r, fv, 4) == MT_OK);
    for (int s = 0; s < 4; s++) bv[s] = 2 * fv[s];
    mt_pp_timeline tl;
    CHECK(mt_pp_timeline_build(mt_schedule_default(4, 1), 4, 8, 1, fv, bv, &tl) == MT_OK);
    CHECK(tl.bubble == p.bubble);
    mt_pp_timeline_free(&tl);
    CHECK(p.bubble > mt_plan_bubble_fraction(4, 8, 1) + 0.01);
    printf("uneven 1/3/3/1, m 8: bubble %.4f simulated = plan %.4f (even formula %.4f)\n", sim, p.bubble,
           mt_plan_bubble_fraction(4, 8, 1));
}

/* Interleaved with both ends counted (6 layers, pp 4, vpp 2: chunks of 1, virtual stage 0 the embedding
 * alone, virtual stage 7 the loss alone): the plan's bubble is the timeline of those chunk costs, written
 * out here (0, then one layer each, then the output layer alone), and the --timeline path gives the same. */
static void test_bubble_interleaved(void) {
    static mt_plan p;
    static const char *const both[] = { "parallel.virtual_pipeline=2", "parallel.embedding_in_split=true",
                                        "parallel.loss_in_split=true", NULL };
    mt_model_fwd_flops fl;
    mt_recipe *r = plan_tiny_flops(6, both, &p, &fl);
    double f[8], b[8], fv[8];
    for (int i = 0; i < 8; i++) f[i] = i == 0 ? 0.0 : i == 7 ? fl.head : fl.layer;
    for (int i = 0; i < 8; i++) b[i] = 2 * f[i];
    mt_pp_timeline tl;
    CHECK(mt_pp_timeline_build(mt_schedule_default(4, 2), 4, 8, 2, f, b, &tl) == MT_OK);
    CHECK_NEAR(p.bubble, tl.bubble, 1e-12, 0);
    CHECK(mt_pp_vstage_flops(r, fv, 8) == MT_OK);
    for (int i = 0; i < 8; i++) CHECK(fv[i] == f[i]);
    printf("interleaved 6 layers pp 4 vpp 2, embedding and loss counted, m 8: bubble %.4f = timeline %.4f (even "
           "formula %.4f)\n", p.bubble, tl.bubble, mt_plan_bubble_fraction(4, 8, 2));
    mt_pp_timeline_free(&tl);
}

static void test_llama405b(void) {
    mt_recipe *r = load_raw("llama3-405b", NULL);
    CHECK(mt_recipe_validate(r, 8192) == MT_OK);
    const mt_gpu_spec *h100 = mt_gpu_find("h100-80g");
    mt_plan_opts o;
    mt_plan_opts_defaults(&o);
    static mt_plan p;
    CHECKF(mt_plan_compute(r, 8192, h100, &o, &p) == MT_OK, "%s", mt_last_error());
    CHECK(p.uneven && p.n_layers_first == 7 && p.n_layers_mid == 8 && p.n_layers_last == 7);
    /* the first stage keeps 16 micro-batches of its 7 layers in flight, the last one of 7 */
    CHECK(p.first.n_layer_mbs == 112 && p.last.n_layer_mbs == 7);
    CHECK(p.t_step_s > 0 && p.bubble > 0.3 && p.bubble < 0.4);
    static mt_plan_search_result s;
    CHECKF(mt_plan_search(r, 8192, h100, &o, &s) == MT_OK, "%s", mt_last_error());
    CHECK(s.n_fit > 0 && s.top[0].plan.uneven);
    printf("llama3-405b pp 16 (7/8/7): bubble %.3f, step %.2f s, first stage %.1f GiB; --search #1 pp %d\n", p.bubble,
           p.t_step_s, p.first.total_bytes / 1073741824.0, s.top[0].plan.pp);
}

int main(void) {
    test_split_rules();
    test_trainer_layouts();
    test_stage_memory();
    test_stage_alloc();
    test_bubble();
    test_bubble_interleaved();
    test_llama405b();
    TEST_MAIN_END();
}
