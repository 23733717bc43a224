/* test_cuda_parity_train.c — CUDA vs CPU parity (the method and the two tolerances, TOL_ACT for
 * bf16 act outputs and TOL_F32 for fp32 ones, in cuda_parity_check.h) of the ops at the ends of a
 * training step: the embedding (vocab shards, learned positions, a position offset), the fused
 * cross-entropy and its three vocab-parallel phases on one shard, and AdamW. The layer ops, the
 * device placement and the op table are in test_cuda_parity.c.
 * The two tolerances cover every op here, for the reasons given in the header:
 *  - act outputs (embedding out, the xent gradients, AdamW's param) are one bf16 rounding of an
 *    fp32 result (the vocab-parallel gradient: two, as its exp is stored in bf16 between
 *    phases) -> TOL_ACT;
 *  - f32 outputs (embedding dwte/dwpe increments, xent losses and stats, adamw master
 *    increment / m / v) differ only by fp32 summation order, expf vs the CPU's polynomial exp
 *    (~1 ulp) and FMA contraction -> TOL_F32. The dwte scatter is also required to repeat bit
 *    for bit (no float atomics).
 * Without a GPU it exits 77 with "skipped: <reason>" as its last line (that creating the CUDA
 * backend then fails cleanly is checked by test_cuda_parity.c). */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/ops/cuda_parity_check.h"

/* ---- embedding (vocab shard) ---- */

static void test_embedding(int B, int T, int C, int vocab_total, int vocab_start, int n_vocab, int with_wpe,
                           int pos_offset) {
    printf("  embedding B=%d T=%d C=%d shard [%d, %d) of %d wpe=%d pos_offset=%d\n", B, T, C, vocab_start,
           vocab_start + n_vocab, vocab_total, with_wpe, pos_offset);
    const size_t rows = (size_t)B * T, max_pos = (size_t)pos_offset + T + 3;
    int32_t *h_tok = malloc(rows * sizeof(int32_t) + 4);
    for (size_t r = 0; r < rows; r++) /* a small id range for some rows: repeated tokens */
        h_tok[r] = (int32_t)((r % 3 == 0 ? (size_t)((frand() + 1.0f) * 4.0f) + vocab_start
                                         : (size_t)((frand() + 1.0f) * 0.5f * vocab_total)) % (size_t)vocab_total);
    float *h_wte = host_rand((size_t)n_vocab * C, 1.0f, 0.0f), *h_wpe = host_rand(max_pos * C, 0.5f, 0.0f);
    float *h_dout = host_rand(rows * C, 1.0f, 0.0f);
    float *h_dwte0 = host_rand((size_t)n_vocab * C, 1.0f, 0.0f), *h_dwpe0 = host_rand(max_pos * C, 1.0f, 0.0f);
    pair_t tok = ipair_new(h_tok, rows), wte = pair_new(h_wte, (size_t)n_vocab * C, 1);
    pair_t wpe = pair_new(h_wpe, max_pos * C, 1), out = pair_new(NULL, rows * C, 1);
    pair_t dout = pair_new(h_dout, rows * C, 1), dwte = pair_new(h_dwte0, (size_t)n_vocab * C, 0);
    pair_t dwpe = pair_new(h_dwpe0, max_pos * C, 0);

    mt_embedding_fwd_args fc = {out.cpu, tok.cpu, wte.cpu, with_wpe ? wpe.cpu : NULL, B, T, C, vocab_start,
                                n_vocab, pos_offset};
    mt_embedding_fwd_args fg = {out.gpu, tok.gpu, wte.gpu, with_wpe ? wpe.gpu : NULL, B, T, C, vocab_start,
                                n_vocab, pos_offset};
    RUN_BOTH(embedding_fwd, fc, fg);
    compare("fwd out (act)", &out, 1, NULL, TOL_ACT);

    mt_embedding_bwd_args bc = {dwte.cpu, with_wpe ? dwpe.cpu : NULL, dout.cpu, tok.cpu, B, T, C, vocab_start,
                                n_vocab, pos_offset};
    mt_embedding_bwd_args bg = {dwte.gpu, with_wpe ? dwpe.gpu : NULL, dout.gpu, tok.gpu, B, T, C, vocab_start,
                                n_vocab, pos_offset};
    RUN_BOTH(embedding_bwd, bc, bg);
    compare("bwd dwte += (f32, increment)", &dwte, 0, h_dwte0, TOL_F32);
    if (with_wpe) compare("bwd dwpe += (f32, increment)", &dwpe, 0, h_dwpe0, TOL_F32);

    /* determinism of the scatter */
    float *first = malloc((size_t)n_vocab * C * sizeof(float) + 1);
    down(&g_cuda, first, dwte.gpu, (size_t)n_vocab * C, MT_F32);
    up(&g_cuda, dwte.gpu, h_dwte0, (size_t)n_vocab * C, MT_F32);
    if (with_wpe) up(&g_cuda, dwpe.gpu, h_dwpe0, max_pos * C, MT_F32);
    CHECKF(MT_BE_CALL(&g_cuda, embedding_bwd, &bg) == MT_OK, "cuda embedding_bwd (repeat): %s", mt_last_error());
    check_same_bits("embedding_bwd dwte", first, &dwte);
    free(first);

    pair_t *all[] = {&tok, &wte, &wpe, &out, &dout, &dwte, &dwpe};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) pair_free(all[i]);
    free(h_tok); free(h_wte); free(h_wpe); free(h_dout); free(h_dwte0); free(h_dwpe0);
}

/* ---- cross-entropy: fused, and the three vocab-parallel phases on one shard ---- */

static int32_t *host_targets(int N, int V) { /* every 5th row ignored (-1) */
    int32_t *t = malloc((size_t)N * sizeof(int32_t) + 4);
    for (int r = 0; r < N; r++) t[r] = r % 5 == 4 ? -1 : (int32_t)((size_t)((frand() + 1.0f) * 0.5f * V) % (size_t)V);
    return t;
}

static void test_xent(int N, int V, int Vp) {
    printf("  xent_fwd_bwd N=%d V=%d Vp=%d\n", N, V, Vp);
    const size_t n = (size_t)N * Vp;
    float *h_logits = host_rand(n, 4.0f, 0.0f);
    int32_t *h_tgt = host_targets(N, V);
    pair_t logits = pair_new(h_logits, n, 1), tgt = ipair_new(h_tgt, (size_t)N), losses = pair_new(NULL, (size_t)N, 0);
    const float dloss = 1.0f / (float)N;
    mt_xent_args c = {logits.cpu, losses.cpu, tgt.cpu, N, V, Vp, dloss};
    mt_xent_args g = {logits.gpu, losses.gpu, tgt.gpu, N, V, Vp, dloss};
    RUN_BOTH(xent_fwd_bwd, c, g);
    compare("losses (f32)", &losses, 0, NULL, TOL_F32);
    compare("dlogits * dloss, in place (act)", &logits, 1, NULL, TOL_ACT);
    pair_free(&logits); pair_free(&tgt); pair_free(&losses);
    free(h_logits); free(h_tgt);
}

static void test_xent_vp(int N, int V, int vocab_start, int n_cols) {
    printf("  xent_vp phases N=%d V=%d shard [%d, %d)\n", N, V, vocab_start, vocab_start + n_cols);
    const size_t n = (size_t)N * n_cols;
    float *h_logits = host_rand(n, 4.0f, 0.0f);
    int32_t *h_tgt = host_targets(N, V);
    pair_t logits = pair_new(h_logits, n, 1), tgt = ipair_new(h_tgt, (size_t)N);
    pair_t stats = pair_new(NULL, 3 * (size_t)N, 0), losses = pair_new(NULL, (size_t)N, 0);
    const float dloss = 1.0f / (float)N;
    mt_xent_vp_args c = {logits.cpu, stats.cpu, losses.cpu, tgt.cpu, N, V, vocab_start, n_cols, dloss};
    mt_xent_vp_args g = {logits.gpu, stats.gpu, losses.gpu, tgt.gpu, N, V, vocab_start, n_cols, dloss};
    /* one shard without the allreduces: each phase reads this shard's own stats */
    RUN_BOTH(xent_vp_max, c, g);
    RUN_BOTH(xent_vp_sumexp, c, g);
    compare("after sumexp: exp(x - max) (act)", &logits, 1, NULL, TOL_ACT);
    compare("after sumexp: stats max|sum|x_t (f32)", &stats, 0, NULL, TOL_F32);
    RUN_BOTH(xent_vp_finish, c, g);
    compare("losses (f32)", &losses, 0, NULL, TOL_F32);
    compare("gradient, in place (act)", &logits, 1, NULL, TOL_ACT);
    pair_free(&logits); pair_free(&tgt); pair_free(&stats); pair_free(&losses);
    free(h_logits); free(h_tgt);
}

/* ---- adamw ---- */

static void test_adamw(size_t n) {
    printf("  adamw n=%zu\n", n);
    float *h_master = host_rand(n, 1.0f, 0.0f), *h_grad = host_rand(n, 2.0f, 0.0f);
    float *h_m = host_rand(n, 0.1f, 0.0f), *h_v = host_rand(n, 0.01f, 0.011f); /* v > 0 */
    pair_t master = pair_new(h_master, n, 0), grad = pair_new(h_grad, n, 0), m = pair_new(h_m, n, 0);
    pair_t v = pair_new(h_v, n, 0), param = pair_new(NULL, n, 1);
    const float b1 = 0.9f, b2 = 0.95f;
    mt_adamw_args c = {master.cpu, param.cpu, grad.cpu, m.cpu, v.cpu, n, 1e-3f, b1, b2, 1e-8f, 0.1f, 0.5f,
                       1.0f - b1 * b1 * b1, 1.0f - b2 * b2 * b2, 0};
    mt_adamw_args g = c;
    g.master = master.gpu; g.param = param.gpu; g.grad = grad.gpu; g.m = m.gpu; g.v = v.gpu;
    RUN_BOTH(adamw, c, g);
    compare("master (f32, increment)", &master, 0, h_master, TOL_F32);
    compare("m (f32)", &m, 0, NULL, TOL_F32);
    compare("v (f32)", &v, 0, NULL, TOL_F32);
    compare("param = master (act)", &param, 1, NULL, TOL_ACT);
    pair_t *all[] = {&master, &grad, &m, &v, &param};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) pair_free(all[i]);
    free(h_master); free(h_grad); free(h_m); free(h_v);
}

int main(void) {
    char why[512] = "";
    if (!mt_cuda_available(why, sizeof why)) {
        printf("%s: %d checks, %d failed\n", __FILE__, mt_test_checks, mt_test_failures);
        printf("skipped: %s\n", why);
        return 77;
    }
    printf("CUDA: %s\n", why);
    if (!parity_open()) return 1;

    test_embedding(2, 9, 5, 50, 0, 50, 1, 0);
    test_embedding(4, 64, 768, 1000, 0, 1000, 1, 0);   /* GPT-2-like, learned positions */
    test_embedding(3, 33, 96, 1000, 250, 250, 0, 0);   /* a vocab shard, rope model (no wpe) */
    test_embedding(2, 16, 64, 300, 200, 100, 1, 7);    /* last shard, position offset */

    test_xent(1, 1, 1);
    test_xent(7, 50, 64);              /* padding columns */
    test_xent(64, 50257, 50304);       /* GPT-2 vocabulary */
    test_xent_vp(9, 1000, 0, 1000);    /* one rank: the whole vocabulary */
    test_xent_vp(33, 1000, 768, 256);  /* last shard: 232 real columns + 24 padding */
    test_xent_vp(16, 50257, 25152, 25152);

    test_adamw(1);
    test_adamw(1000);
    test_adamw((size_t)5 << 20);

    parity_close();
    TEST_MAIN_END();
}
