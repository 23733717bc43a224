/* bench_attention.c — `make bench`: the CPU backend's flash-style attention (the backend's
 * attention_fwd / attention_bwd) against the kernel it replaced, in one run, at a gpt125m head
 * shape (H = 12, D = 64, micro-batch 1) for T = 512, 1024, 2048 (argv: other T values).
 * (Tile stacks: 2 x 64 x 128 f32 per thread, the backward's p and dS tiles.)
 * Prints per T: forward and backward ms (best of MT_BENCH_REPS, default 3), tokens/s of
 * forward + backward and its ratio new / old, the bytes each kernel needs per layer (saved for
 * backward + backward scratch), and the worst difference between the two kernels' out / dqkv.
 * The baseline (old_attention_fwd / _bwd below) is a verbatim copy of the kernel before issue
 * 15 — blocked OpenBLAS GEMMs over a materialised (B, H, T, T) f32 probability matrix plus a
 * (B, H, T, T) dprobs scratch — kept here only as the reference point; nothing else uses it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "core/backend.h"
#include "core/cpu/cpu_backend.h"

/* ---------------- OLD kernel (baseline, pre-issue-15, materialised T x T) ---------------- */

#define OLD_BLOCK 256

static inline void old_softmax_causal_row(float *p, int t, int T) {
    const int n = t + 1;
    const float mx = mt_cpu_max_f(p, (size_t)n);
    for (int j = 0; j < n; j++) p[j] = mt_cpu_expf(p[j] - mx);
    const float sum = (float)mt_cpu_sum_d(p, (size_t)n);
    const float inv = 1.0f / sum;
    for (int j = 0; j < n; j++) p[j] *= inv;
    for (int j = n; j < T; j++) p[j] = 0.0f;
}

static void old_attention_fwd(int nt, float *out, float *probs, const float *qkv, int B, int T, int H, int KV, int D) {
    const int S3 = (H + 2 * KV) * D, SO = H * D, group = H / KV;
    const float scale = 1.0f / sqrtf((float)D);
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int bh = 0; bh < B * H; bh++) {
        const int b = bh / H, h = bh % H;
        const float *q = qkv + (size_t)b * T * S3 + (size_t)h * D;
        const float *k = qkv + (size_t)b * T * S3 + (size_t)(H + h / group) * D;
        const float *v = qkv + (size_t)b * T * S3 + (size_t)(H + KV + h / group) * D;
        float *P = probs + (size_t)bh * T * T;
        float *o = out + (size_t)b * T * SO + (size_t)h * D;
        for (int r0 = 0; r0 < T; r0 += OLD_BLOCK) {
            const int r1 = r0 + OLD_BLOCK < T ? r0 + OLD_BLOCK : T;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, r1, D, scale, q + (size_t)r0 * S3, S3, k,
                        S3, 0.0f, P + (size_t)r0 * T, T);
            for (int t = r0; t < r1; t++) old_softmax_causal_row(P + (size_t)t * T, t, T);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, D, r1, 1.0f, P + (size_t)r0 * T, T, v, S3,
                        0.0f, o + (size_t)r0 * SO, SO);
        }
    }
}

static inline void old_softmax_bwd_row(float *dp, const float *p, int t, int T, float scale) {
    const int n = t + 1;
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int j = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++) acc[l] += (double)p[j + l] * dp[j + l];
    for (; j < n; j++) acc[j & 7] += (double)p[j] * dp[j];
    const float dot = (float)(((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])));
    for (j = 0; j < n; j++) dp[j] = p[j] * (dp[j] - dot) * scale;
    for (j = n; j < T; j++) dp[j] = 0.0f;
}

static void old_attention_bwd(int nt, float *dqkv, float *dprobs, const float *dout, const float *qkv,
                              const float *probs, int B, int T, int H, int KV, int D) {
    const int S3 = (H + 2 * KV) * D, SO = H * D, group = H / KV;
    const float scale = 1.0f / sqrtf((float)D);
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int bg = 0; bg < B * KV; bg++) {
        const int b = bg / KV, g = bg % KV;
        const size_t base = (size_t)b * T * S3;
        const float *k = qkv + base + (size_t)(H + g) * D, *v = qkv + base + (size_t)(H + KV + g) * D;
        float *dk = dqkv + base + (size_t)(H + g) * D, *dv = dqkv + base + (size_t)(H + KV + g) * D;
        for (int t = 0; t < T; t++) {
            memset(dk + (size_t)t * S3, 0, (size_t)D * sizeof *dk);
            memset(dv + (size_t)t * S3, 0, (size_t)D * sizeof *dv);
        }
        for (int h = g * group; h < (g + 1) * group; h++) {
            const float *q = qkv + base + (size_t)h * D;
            float *dq = dqkv + base + (size_t)h * D;
            const float *dO = dout + (size_t)b * T * SO + (size_t)h * D;
            const float *P = probs + ((size_t)b * H + h) * T * T;
            float *dS = dprobs + ((size_t)b * H + h) * T * T;
            for (int r0 = 0; r0 < T; r0 += OLD_BLOCK) {
                const int r1 = r0 + OLD_BLOCK < T ? r0 + OLD_BLOCK : T, nr = r1 - r0;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, r1, D, 1.0f, dO + (size_t)r0 * SO, SO, v, S3,
                            0.0f, dS + (size_t)r0 * T, T);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r1, D, nr, 1.0f, P + (size_t)r0 * T, T,
                            dO + (size_t)r0 * SO, SO, 1.0f, dv, S3);
                for (int t = r0; t < r1; t++) old_softmax_bwd_row(dS + (size_t)t * T, P + (size_t)t * T, t, T, scale);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, D, r1, 1.0f, dS + (size_t)r0 * T, T, k, S3,
                            0.0f, dq + (size_t)r0 * S3, S3);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r1, D, nr, 1.0f, dS + (size_t)r0 * T, T,
                            q + (size_t)r0 * S3, S3, 1.0f, dk, S3);
            }
        }
    }
}

/* ---------------- harness ---------------- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *filled(size_t n, unsigned seed, float amp) {
    float *p = malloc(n * sizeof *p);
    if (!p) return NULL;
    uint64_t x = 0x9E3779B97F4A7C15ull ^ seed;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        p[i] = amp * ((float)(x >> 40) / 16777216.0f * 2.0f - 1.0f);
    }
    return p;
}

static double max_rel_diff(const float *a, const float *b, size_t n) {
    double e = 0.0, m = 1e-30;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - b[i]);
        e = d > e ? d : e;
        m = fabs((double)b[i]) > m ? fabs((double)b[i]) : m;
    }
    return e / m;
}

static int bench_T(mt_backend *be, int nt, int T, int reps) {
    const int B = 1, H = 12, KV = 12, D = 64;
    const size_t nqkv = (size_t)B * T * (H + 2 * KV) * D, nout = (size_t)B * T * H * D;
    const size_t nP = (size_t)B * H * T * T, nL = (size_t)B * H * T;
    float *qkv = filled(nqkv, 1, 1.0f), *dout = filled(nout, 2, 1.0f);
    float *out_n = calloc(nout, 4), *out_o = calloc(nout, 4), *dq_n = calloc(nqkv, 4), *dq_o = calloc(nqkv, 4);
    float *lse = calloc(nL, 4), *delta = calloc(nL, 4), *probs = calloc(nP, 4), *dprobs = calloc(nP, 4);
    if (!qkv || !dout || !out_n || !out_o || !dq_n || !dq_o || !lse || !delta || !probs || !dprobs) {
        fprintf(stderr, "bench_attention: out of memory at T=%d\n", T);
        return 1;
    }
    double fo = 1e30, bo = 1e30, fn = 1e30, bn = 1e30;
    mt_attention_fwd_args fa = {out_n, lse, qkv, B, T, H, KV, D, 0};
    mt_attention_bwd_args ba = {dq_n, delta, dout, qkv, out_n, lse, B, T, H, KV, D, 0};
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        old_attention_fwd(nt, out_o, probs, qkv, B, T, H, KV, D);
        double t1 = now_s();
        old_attention_bwd(nt, dq_o, dprobs, dout, qkv, probs, B, T, H, KV, D);
        double t2 = now_s();
        if (MT_BE_CALL(be, attention_fwd, &fa) != MT_OK) return 1;
        double t3 = now_s();
        if (MT_BE_CALL(be, attention_bwd, &ba) != MT_OK) return 1;
        double t4 = now_s();
        fo = fmin(fo, t1 - t0), bo = fmin(bo, t2 - t1), fn = fmin(fn, t3 - t2), bn = fmin(bn, t4 - t3);
    }
    const double tok_o = B * T / (fo + bo), tok_n = B * T / (fn + bn);
    const double mem_o = (double)nP * 4 * 2, mem_n = (double)nL * 4 * 2 + (double)nt * 2 * 64 * 128 * 4;
    printf("| %5d | %8.1f %8.1f | %8.1f %8.1f | %9.0f %9.0f | %5.2fx | %10.1f %8.3f | %8.1e %8.1e |\n", T, 1e3 * fo,
           1e3 * bo, 1e3 * fn, 1e3 * bn, tok_o, tok_n, tok_n / tok_o, mem_o / 1048576.0, mem_n / 1048576.0,
           max_rel_diff(out_n, out_o, nout), max_rel_diff(dq_n, dq_o, nqkv));
    free(qkv), free(dout), free(out_n), free(out_o), free(dq_n), free(dq_o);
    free(lse), free(delta), free(probs), free(dprobs);
    return 0;
}

int main(int argc, char **argv) {
    mt_backend be;
    if (mt_backend_cpu_create(&be, 0) != MT_OK) {
        fprintf(stderr, "bench_attention: %s\n", mt_last_error());
        return 1;
    }
    const int nt = ((mt_cpu_ctx *)be.ctx)->n_threads;
    const int reps = getenv("MT_BENCH_REPS") ? atoi(getenv("MT_BENCH_REPS")) : 3;
    printf("attention, CPU backend (%s), B=1 H=12 KV=12 D=64 (gpt125m heads), fp32, best of %d\n", be.device_name,
           reps > 0 ? reps : 1);
    printf("old = materialised (B,H,T,T) probs + dprobs (pre-issue-15 kernel); new = flash-style, 64 query x 128 key tiles\n");
    printf("memory = what one layer's attention needs: saved for backward + backward scratch (+ new: tile stacks)\n");
    printf("| %5s | %17s | %17s | %19s | %6s | %19s | %17s |\n", "T", "old fwd/bwd ms", "new fwd/bwd ms",
           "tokens/s old/new", "new/old", "MiB old / new", "diff out / dqkv");
    printf("|-------|-------------------|-------------------|---------------------|--------|---------------------|"
           "-------------------|\n");
    static const int def[] = {512, 1024, 2048};
    int rc = 0;
    if (argc > 1)
        for (int i = 1; i < argc && !rc; i++) rc = bench_T(&be, nt, atoi(argv[i]), reps > 0 ? reps : 1);
    else
        for (int i = 0; i < 3 && !rc; i++) rc = bench_T(&be, nt, def[i], reps > 0 ? reps : 1);
    mt_backend_destroy(&be);
    return rc;
}
