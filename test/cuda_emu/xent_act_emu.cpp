/* xent_act_emu.cpp — runs cuda/cuda_xent.cu's fused cross-entropy (the one-pass statistics, its
 * 16-byte vector path and its scalar path) and cuda/cuda_act.cu's vectorised GeLU / squared ReLU / add / cast
 * (vector body and scalar tail) on the CPU under test/cuda_emu/inc, against the CPU backend.
 * Tolerances as test/ops/cuda_parity_check.h: 1e-4 (bf16 outputs), 1e-6 (fp32 losses).
 * Built and run by test/cuda_emu/run.sh. */
#include "xent_host.cpp"
#include "act_host.cpp"
#include "emu_main.h"
static void xent(int N, int V, int Vp) {
    printf("  xent_fwd_bwd N=%d V=%d Vp=%d (%s path)\n", N, V, Vp, Vp % 8 ? "scalar" : "16-byte");
    std::vector<float> lg((size_t)N * Vp), loss(N); std::vector<int32_t> tg(N);
    for (auto &x : lg) x = rb(4.0f * frand());
    for (int r = 0; r < N; r++) tg[r] = r % 5 == 4 ? -1 : (int32_t)((size_t)((frand() + 1.0f) * 0.5f * V) % (size_t)V);
    bf16 *g = to_bf16(lg); std::vector<float> gl(N, NAN);
    mt_xent_args c = {lg.data(), loss.data(), tg.data(), N, V, Vp, 1.0f / N}, a = {g, gl.data(), tg.data(), N, V, Vp, 1.0f / N};
    if (MT_BE_CALL(&g_cpu, xent_fwd_bwd, &c) != MT_OK || mt_cuda_xent_fwd_bwd(&g_be, &a) != MT_OK) { printf("call failed: %s\n", mt_last_error()); fails++; return; }
    cmp("losses (f32)", gl.data(), loss.data(), N, 1e-6);
    cmp("dlogits (act)", from_bf16(g, lg.size()).data(), lg.data(), lg.size(), 1e-4);
    free(g);
}
static void act(size_t n, size_t offset) {
    printf("  gelu/squared_relu/add/cast n=%zu offset=%zu (%s)\n", n, offset, offset ? "unaligned: scalar" : "16-byte body + scalar tail");
    std::vector<float> x(n), y(n), d(n), f(n), o(n);
    for (size_t i = 0; i < n; i++) x[i] = rb(3.0f * frand()), y[i] = rb(frand()), d[i] = rb(frand()), f[i] = 2.0f * frand();
    bf16 *gx = to_bf16(x), *gy = to_bf16(y), *gd = to_bf16(d), *go = (bf16 *)aligned_alloc(256, n * 2 + 256 + 64);
    float *gf = (float *)aligned_alloc(256, n * 4 + 256 + 64); memcpy(gf + offset, f.data(), n * 4);
    bf16 *xo = go + offset; /* an unaligned output forces the scalar kernels */
    mt_gelu_fwd_args gc = {o.data(), x.data(), n}, gg = {xo, gx, n};
    MT_BE_CALL(&g_cpu, gelu_fwd, &gc); mt_cuda_gelu_fwd(&g_be, &gg);
    cmp("gelu fwd", from_bf16(xo, n).data(), o.data(), n, 1e-4);
    mt_gelu_bwd_args bc = {o.data(), d.data(), x.data(), n}, bg = {xo, gd, gx, n};
    MT_BE_CALL(&g_cpu, gelu_bwd, &bc); mt_cuda_gelu_bwd(&g_be, &bg);
    cmp("gelu bwd", from_bf16(xo, n).data(), o.data(), n, 1e-4);
    for (int bwd = 0; bwd < 2; bwd++) { /* squared ReLU forward, then backward (dout = d) */
        mt_squared_relu_fwd_args fc = {o.data(), x.data(), n}, fg = {xo, gx, n};
        mt_squared_relu_bwd_args bc = {o.data(), d.data(), x.data(), n}, bg = {xo, gd, gx, n};
        if (bwd) MT_BE_CALL(&g_cpu, squared_relu_bwd, &bc), mt_cuda_squared_relu_bwd(&g_be, &bg);
        else MT_BE_CALL(&g_cpu, squared_relu_fwd, &fc), mt_cuda_squared_relu_fwd(&g_be, &fg);
        cmp(bwd ? "squared_relu bwd" : "squared_relu fwd", from_bf16(xo, n).data(), o.data(), n, 1e-4);
    }
    mt_add_args ac = {o.data(), x.data(), y.data(), n}, ag = {xo, gx, gy, n};
    MT_BE_CALL(&g_cpu, add, &ac); mt_cuda_add(&g_be, &ag);
    cmp("add", from_bf16(xo, n).data(), o.data(), n, 1e-4);
    mt_cast_args cc = {o.data(), f.data(), n}, cg = {xo, gf + offset, n};
    MT_BE_CALL(&g_cpu, cast_f32_to_act, &cc); mt_cuda_cast_f32_to_act(&g_be, &cg);
    cmp("cast", from_bf16(xo, n).data(), o.data(), n, 1e-4);
    free(gx); free(gy); free(gd); free(go); free(gf);
}
int main() {
    if (mt_backend_cpu_create(&g_cpu, 1) != MT_OK) return 1;
    memset(&g_be, 0, sizeof g_be); g_be.ctx = &g_ctx;
    xent(1, 1, 1);
    xent(7, 50, 64);
    xent(6, 50, 61);
    xent(4, 1000, 1024);
    xent(3, 5003, 5008);
    act(1, 0);
    act(1003, 0);
    act(1003, 1);
    act(4096, 0);
    mt_backend_destroy(&g_cpu);
    printf("%s\n", fails ? "FAILURES" : "all ok"); return fails != 0;
}
