/* test_act_memory.c — activation memory: measured against `mtrain plan`, and recompute's bits.
 * A gpt125m-shaped model (hidden 768, 12 heads, learned positions, tied embeddings; 2 layers and
 * a 4096-token vocabulary to keep the test short) at T = 64, 256 and 1024 (one sequence per
 * micro-batch), each with training.recompute none, selective and full:
 *   - measured: the growth of the process's peak resident memory (VmHWM, reset through
 *     /proc/self/clear_refs) over one micro-batch's forward and backward, from a state where the
 *     weights and gradients are already resident — the activation pages the step really touches
 *     (4 KiB pages: the activation block is marked MADV_NOHUGEPAGE here, so a 2 MiB huge page
 *     does not round it up), plus anything else the step would allocate;
 *   - it must be within 5% of the plan's activation figure (mt_plan_compute, the fp32 trainer
 *     mode `mtrain plan` prints), and the plan's figure within 0.1% of the bytes the trainer
 *     allocates (the layouts are the same, up to 256-byte alignment);
 *   - the loss and every gradient element are bitwise equal across none / selective / full
 *     (recompute reruns the same ops on the same inputs);
 *   - activation memory falls none > selective > full.
 * One warm-up step first, so OpenBLAS's and OpenMP's one-time buffers are resident before any
 * measurement. Skips (77) where /proc/self/clear_refs cannot reset the peak. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/backend.h"
#include "plan/plan.h"
#include "core/recipe/recipe.h"
#include "core/rng.h"
#include "test/test.h"
#include "test/unit/plan_host.h"
#include "train/model.h"

static long status_kib(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    const size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') v = atol(line + n + 1);
    if (f) fclose(f);
    return v;
}

static int reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return 0;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

static void set(mt_recipe *r, const char *key, const char *value) {
    CHECKF(mt_recipe_set(r, key, value, "test") == MT_OK, "%s = %s: %s", key, value, mt_last_error());
}

static void make_recipe(mt_recipe *r, int T, int B, const char *rc) {
    char t[16], b[16];
    snprintf(t, sizeof t, "%d", T);
    snprintf(b, sizeof b, "%d", B);
    mt_recipe_defaults(r);
    set(r, "model.arch", "gpt");
    set(r, "model.layers", "2");
    set(r, "model.hidden", "768");
    set(r, "model.heads", "12");
    set(r, "model.vocab", "4096");
    set(r, "model.seq_length", t);
    set(r, "model.tie_embeddings", "true");
    set(r, "training.micro_batch", b);
    set(r, "training.global_batch", b);
    set(r, "training.iters", "1");
    set(r, "training.precision", "fp32");
    set(r, "training.backend", "cpu");
    set(r, "training.recompute", rc);
    CHECKF(mt_recipe_validate(r, 1) == MT_OK, "T %d %s: %s", T, rc, mt_last_error());
}

typedef struct {
    double plan_bytes, alloc_bytes, measured_bytes;
    float loss;
    float *grads;
    size_t n_grads;
} step_result;

/* init, one micro-batch forward + backward, the measurements; 0 when the model could not be made */
static int run_step(mt_backend *be, const mt_recipe *r, int measure, step_result *res) {
    const int B = r->training.micro_batch, T = r->model.seq_length, N = B * T;
    memset(res, 0, sizeof *res);
    static mt_plan p;
    CHECK(plan_on_host(r, &p) == MT_OK);
    CHECK(p.mode == MT_PLAN_TRAINER_FP32);
    res->plan_bytes = p.first.acts_bytes;
    mt_model m;
    mt_status st = mt_model_init(&m, r, be, B, 1, 0);
    CHECKF(st == MT_OK, "%s", mt_last_error());
    if (st != MT_OK) return 0;
    res->alloc_bytes = (double)m.bytes_acts;
    (void)madvise(m.acts.base, m.bytes_acts, MADV_NOHUGEPAGE); /* count 4 KiB pages (page-aligned block) */
    int32_t *tokens = malloc((size_t)B * (T + 1) * sizeof *tokens);
    for (int i = 0; i < B * (T + 1); i++) tokens[i] = (int32_t)(mt_rng_u64(5, 1, (uint64_t)i) % 4096);
    CHECK(mt_model_zero_grads(&m) == MT_OK); /* the gradients resident before the measurement starts */
    long rss0 = 0;
    if (measure) {
        reset_peak();
        rss0 = status_kib("VmRSS");
    }
    CHECK(mt_model_step_micro(&m, tokens, 1.0f / N, 1) == MT_OK);
    if (measure) res->measured_bytes = (double)(status_kib("VmHWM") - rss0) * 1024.0;
    float gsq = 0;
    CHECK(mt_model_read_scalars(&m, &res->loss, &gsq) == MT_OK);
    res->n_grads = m.bytes_grads / 4;
    res->grads = malloc(m.bytes_grads);
    memcpy(res->grads, m.grads, m.bytes_grads);
    free(tokens);
    mt_model_free(&m);
    return 1;
}

int main(void) {
    if (!reset_peak() || status_kib("VmHWM") < 0) {
        printf("skip: /proc/self/clear_refs cannot reset the peak resident memory here\n");
        return 77;
    }
    mt_backend be;
    /* the CPU backend prefaults its large blocks at allocation; here pages must fault when first
       touched, so that resident memory grows by what forward and backward really use */
    setenv("MT_CPU_PREFAULT", "0", 1);
    CHECK(mt_backend_cpu_create(&be, 0) == MT_OK);
    static mt_recipe r;
    step_result warm;
    make_recipe(&r, 1024, 1, "none");
    if (run_step(&be, &r, 0, &warm)) free(warm.grads);

    const int Ts[] = {64, 256, 1024}, Bs[] = {1, 1, 1};
    const char *const rcs[] = {"none", "selective", "full"};
    for (int ti = 0; ti < 3; ti++) {
        step_result res[3];
        int ok[3];
        for (int k = 0; k < 3; k++) {
            make_recipe(&r, Ts[ti], Bs[ti], rcs[k]);
            ok[k] = run_step(&be, &r, 1, &res[k]);
            if (!ok[k]) continue;
            const step_result *s = &res[k];
            printf("T %4d B %d recompute %-9s: activations plan %7.2f MiB, allocated %7.2f MiB, measured peak %7.2f "
                   "MiB (%+.2f%% of plan)\n",
                   Ts[ti], Bs[ti], rcs[k], s->plan_bytes / 1048576, s->alloc_bytes / 1048576,
                   s->measured_bytes / 1048576, 100 * (s->measured_bytes / s->plan_bytes - 1));
            CHECK_NEAR(s->measured_bytes, s->plan_bytes, 0, 0.05);
            CHECK_NEAR(s->alloc_bytes, s->plan_bytes, 0, 0.001);
        }
        if (!ok[0] || !ok[1] || !ok[2]) continue;
        for (int k = 1; k < 3; k++) {
            CHECKF(memcmp(&res[k].loss, &res[0].loss, sizeof(float)) == 0, "T %d %s: loss %.9g, none %.9g", Ts[ti],
                   rcs[k], res[k].loss, res[0].loss);
            CHECKF(res[k].n_grads == res[0].n_grads &&
                       memcmp(res[k].grads, res[0].grads, res[0].n_grads * sizeof(float)) == 0,
                   "T %d %s: gradients differ from those without recompute", Ts[ti], rcs[k]);
        }
        CHECK(res[0].alloc_bytes > res[1].alloc_bytes && res[1].alloc_bytes > res[2].alloc_bytes);
        printf("T %4d: loss %.9g and %zu gradient elements bitwise equal for none, selective and full\n", Ts[ti],
               res[0].loss, res[0].n_grads);
        for (int k = 0; k < 3; k++) free(res[k].grads);
    }
    mt_backend_destroy(&be);
    TEST_MAIN_END();
}
