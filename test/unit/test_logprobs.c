/* test_logprobs.c — train/logprobs.h without a checkpoint: the scorer on a small random model
 * (gpt and llama) reads the loss of the right position (the completion's logprobs over every
 * possible next token sum to 1; a full row's logprobs add up to the model's own loss sum; a
 * shorter sequence gives the same logprobs for the tokens both have: causal, padding does not
 * matter) and refuses bad sequences; and mt_logprobs_compare: the largest difference and where,
 * non-finite values, files that do not score the same text. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/backend.h"
#include "core/recipe/recipe.h"
#include "core/rng.h"
#include "parallel/parallel_state.h"
#include "test/test.h"
#include "test/unit/tiny_model.h"
#include "train/logprobs.h"

enum { V = 37, T = 8 };

static void check_scoring(const char *arch) {
    static mt_recipe r;
    static mt_parallel_state ps;
    tiny_recipe(&r, arch, T);
    CHECK(mt_recipe_set(&r, "model.init_std", "0.3", "test") == MT_OK);
    if (!strcmp(arch, "llama")) {
        CHECK(mt_recipe_set(&r, "model.kv_heads", "2", "test") == MT_OK);
        CHECK(mt_recipe_set(&r, "model.ffn_hidden", "24", "test") == MT_OK);
    }
    mt_status st = tiny_batch_validate(&r, 1);
    mt_pstate_single(&ps);
    mt_backend be;
    CHECK(mt_backend_cpu_create(&be, 1) == MT_OK);
    mt_logprobs lp;
    memset(&lp, 0, sizeof lp);
    lp.r = &r;
    lp.be = &be;
    lp.ps = &ps;
    lp.n_micro = 1;
    lp.has_losses = 1;
    st = mt_model_init(&lp.model, &r, &be, 1, 1, 0);
    CHECKF(st == MT_OK, "%s", mt_last_error());
    if (st != MT_OK) return;
    lp.have_model = 1;
    lp.row = malloc((T + 1) * sizeof *lp.row);
    lp.losses = malloc(T * sizeof *lp.losses);

    int32_t ids[T + 1];
    for (int i = 0; i <= T; i++) ids[i] = (int32_t)(mt_rng_u64(11, 3, (uint64_t)i) % V);
    double lps[T + 1], lps2[T + 1];

    /* every possible next token after a prompt of 3: the probabilities sum to 1 */
    double total = 0;
    for (int v = 0; v < V; v++) {
        int32_t s[4] = {ids[0], ids[1], ids[2], v};
        st = mt_logprobs_score(&lp, s, 4, 3, lps);
        CHECKF(st == MT_OK, "%s", mt_last_error());
        total += exp(lps[0]);
    }
    CHECK_NEAR(total, 1.0, 1e-5, 0);

    /* a full row with a one-token prompt: the logprobs are minus the model's token losses */
    st = mt_logprobs_score(&lp, ids, T + 1, 1, lps);
    CHECKF(st == MT_OK, "%s", mt_last_error());
    double sum = 0;
    for (int k = 0; k < T; k++) {
        sum += lps[k];
        CHECKF(lps[k] < 0, "logprob %d = %g", k, lps[k]);
    }
    float loss = 0, gsq = 0;
    CHECK(mt_model_zero_grads(&lp.model) == MT_OK);
    CHECK(mt_model_step_micro(&lp.model, ids, 0.0f, 0) == MT_OK);
    CHECK(mt_model_read_scalars(&lp.model, &loss, &gsq) == MT_OK);
    CHECK_NEAR(-sum, loss, 1e-4, 1e-5);

    /* causal: the first 5 tokens after a prompt of 2 score the same in a sequence of 7 and of 9
     * (the rest of the row is padding in one, text in the other) */
    st = mt_logprobs_score(&lp, ids, 7, 2, lps2);
    CHECKF(st == MT_OK, "%s", mt_last_error());
    CHECK(mt_logprobs_score(&lp, ids, T + 1, 2, lps) == MT_OK);
    for (int k = 0; k < 5; k++) CHECK_NEAR(lps2[k], lps[k], 1e-6, 0);

    /* refused */
    CHECK(mt_logprobs_score(&lp, ids, 3, 0, lps) == MT_ERR_CONFIG);
    CHECK(mt_logprobs_score(&lp, ids, T + 2, 1, lps) == MT_ERR_CONFIG);
    CHECK_STR_CONTAINS(mt_last_error(), "model.seq_length + 1 = 9");
    int32_t bad[3] = {1, V, 2};
    CHECK(mt_logprobs_score(&lp, bad, 3, 1, lps) == MT_ERR_DATA);
    CHECK_STR_CONTAINS(mt_last_error(), "outside the model's vocabulary [0, 37)");

    mt_logprobs_close(&lp);
    mt_backend_destroy(&be);
}

static char dir[64];

static const char *write_file(const char *name, const char *text) {
    static char paths[32][128];
    static int k = 0;
    char *p = paths[k++ % 32];
    snprintf(p, 128, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return p;
}

static void check_compare(void) {
    snprintf(dir, sizeof dir, "/tmp/mt-test-logprobs.XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    const char *a = write_file("a.jsonl",
                               "{\"prompt\": \"In the\", \"prompt_tokens\": [1, 2], \"tokens\": [3, 4], "
                               "\"logprobs\": [-1.5, -2.25], \"sum\": -3.75}\n"
                               "\n"
                               "{\"prompt\": \"be\\nginning\", \"tokens\": [5], \"logprobs\": [-0.5]}\n");
    const char *b = write_file("b.jsonl",
                               "{\"prompt\": \"In the\", \"prompt_tokens\": [1, 2], \"tokens\": [3, 4], "
                               "\"logprobs\": [-1.5, -2.2], \"sum\": -3.7}\n"
                               "{\"tokens\": [5], \"logprobs\": [-0.5001]}\n");
    mt_logprobs_diff d;
    mt_status st = mt_logprobs_compare(a, b, &d);
    CHECKF(st == MT_OK, "%s", mt_last_error());
    CHECK(d.n_lines == 2 && d.n_tokens == 3);
    CHECK_NEAR(d.max_abs, 0.05, 1e-12, 0);
    CHECK(d.worst_line == 1 && d.worst_token == 1);
    CHECK(!strcmp(d.worst_prompt, "In the"));
    CHECK_NEAR(d.max_abs_sum, 0.05, 1e-12, 0);
    CHECK(mt_logprobs_compare(a, a, &d) == MT_OK && d.max_abs == 0);

    /* NaN and infinities: a NaN differs from everything, the same infinity does not */
    const char *n1 = write_file("n1.jsonl", "{\"tokens\": [1, 2], \"logprobs\": [NaN, -Infinity]}\n");
    const char *n2 = write_file("n2.jsonl", "{\"tokens\": [1, 2], \"logprobs\": [-1, -Infinity]}\n");
    CHECK(mt_logprobs_compare(n1, n2, &d) == MT_OK && isinf(d.max_abs) && d.worst_token == 0);
    const char *n3 = write_file("n3.jsonl", "{\"tokens\": [1, 2], \"logprobs\": [-1, -Infinity]}\n");
    CHECK(mt_logprobs_compare(n2, n3, &d) == MT_OK && d.max_abs == 0);

    /* not the same text */
    const char *c1 = write_file("c1.jsonl", "{\"tokens\": [3, 9], \"logprobs\": [-1, -2]}\n");
    const char *c2 = write_file("c2.jsonl", "{\"tokens\": [3, 4], \"logprobs\": [-1, -2]}\n");
    CHECK(mt_logprobs_compare(c1, c2, &d) == MT_ERR_DATA);
    CHECK_STR_CONTAINS(mt_last_error(), "completion tokens differ at index 1 (9 vs 4)");
    const char *c3 = write_file("c3.jsonl", "{\"prompt_tokens\": [7], \"tokens\": [3, 4], \"logprobs\": [-1, -2]}\n");
    const char *c4 = write_file("c4.jsonl", "{\"prompt_tokens\": [7, 8], \"tokens\": [3, 4], \"logprobs\": [-1, -2]}\n");
    CHECK(mt_logprobs_compare(c3, c4, &d) == MT_ERR_DATA);
    CHECK_STR_CONTAINS(mt_last_error(), "has 1 prompt tokens");
    CHECK(mt_logprobs_compare(a, c2, &d) == MT_ERR_DATA); /* 3 lines (one blank) vs 1 */
    CHECK_STR_CONTAINS(mt_last_error(), "ends after 1 line(s)");
    const char *p1 = write_file("p1.jsonl", "{\"prompt\": \"x\", \"tokens\": [3, 4], \"logprobs\": [-1, -2]}\n");
    const char *p2 = write_file("p2.jsonl", "{\"prompt\": \"y\", \"tokens\": [3, 4], \"logprobs\": [-1, -2]}\n");
    CHECK(mt_logprobs_compare(p1, p2, &d) == MT_ERR_DATA);
    CHECK_STR_CONTAINS(mt_last_error(), "the \"prompt\" texts differ");
    /* malformed, each file against itself */
    static const struct { const char *name, *text, *needle; } bad[] = {
        {"m1.jsonl", "{\"tokens\": [3, 4], \"logprobs\": [-1]}\n", "1 logprobs for 2 tokens"},
        {"m2.jsonl", "{\"tokens\": [3.5], \"logprobs\": [-1]}\n", "\"tokens\"[0] is not an integer"},
        {"m3.jsonl", "{\"tokens\": [3], \"logprobs\": [-1]\n", "m3.jsonl:1"},
        {"e.jsonl", "\n", ""},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        const char *f = write_file(bad[k].name, bad[k].text);
        CHECK(mt_logprobs_compare(f, f, &d) == MT_ERR_DATA);
        CHECK_STR_CONTAINS(mt_last_error(), bad[k].needle);
    }
    CHECK(mt_logprobs_compare("/nonexistent/x.jsonl", a, &d) == MT_ERR_IO);
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

int main(void) {
    check_scoring("gpt");
    check_scoring("llama");
    check_compare();
    TEST_MAIN_END();
}
