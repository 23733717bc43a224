/* fused_emu.cpp — runs cuda/cuda_layernorm.cu's fused residual add + norm forward, the norm backwards and
 * cuda/cuda_init.cu's init_normal on the CPU under test/cuda_emu/inc:
 *  - add_layernorm_fwd / add_rmsnorm_fwd against the emulated GPU's own add (cuda_act.cu's
 *    scalar add kernel's rounding, bf16(a + b)) followed by its norm_fwd kernel: the same bits, with
 *    the scalar kernels (C % 8 != 0) and the 16-byte ones (C % 8 == 0);
 *    and against the CPU backend's fused op at 1e-4 nmse (bf16 outputs, as the parity test);
 *    in place (out_resid == a) too;
 *  - layernorm_bwd / rmsnorm_bwd against the CPU backend (both dinp kernels, the weight gradients);
 *  - init_normal against the CPU backend bit for bit: on the host both use glibc's log / cos, so
 *    this checks the kernel's indexing (grid-stride loop, offset, counter pairs 2i / 2i+1) and
 *    the transform, not CUDA's libm (test/ops/test_cuda_parity.c does that on a GPU).
 * Built and run by test/cuda_emu/run.sh. */
#include "layernorm_host.cpp"
#include "init_host.cpp"
#define EMU_NAME_WIDTH 34
#include "emu_main.h"

static void add_norm(int rms, int N, int C, int in_place) {
    printf("  add_%s_fwd N=%d C=%d%s%s\n", rms ? "rmsnorm" : "layernorm", N, C, in_place ? " (in place)" : "",
           C % 8 == 0 ? " (16-byte kernels)" : " (scalar kernels)");
    const size_t n = (size_t)N * C;
    std::vector<float> a(n), b(n), w(C), bias(C);
    for (size_t i = 0; i < n; i++) a[i] = rb(2.0f * frand() + 0.5f), b[i] = rb(0.5f * frand());
    for (int j = 0; j < C; j++) w[j] = rb(1.0f + 0.2f * frand()), bias[j] = rb(0.2f * frand());
    bf16 *ga = to_bf16(a), *gb = to_bf16(b), *gw = to_bf16(w), *gbias = to_bf16(bias);
    bf16 *gr = in_place ? ga : (bf16 *)aligned_alloc(256, n * 2 + 256), *go = (bf16 *)aligned_alloc(256, n * 2 + 256);
    std::vector<float> gm(N), gs(N);
    /* unfused on the emulated GPU first (reads a before an in-place fused call overwrites it) */
    bf16 *ur = (bf16 *)aligned_alloc(256, n * 2 + 256), *uo = (bf16 *)aligned_alloc(256, n * 2 + 256);
    for (size_t i = 0; i < n; i++) ur[i] = __float2bfloat16_rn(__bfloat162float(ga[i]) + __bfloat162float(gb[i]));
    std::vector<float> um(N), us(N);
    mt_norm_fwd_args nf = {uo, rms ? NULL : um.data(), us.data(), ur, gw, rms ? NULL : gbias, N, C, 1e-5f};
    if ((rms ? mt_cuda_rmsnorm_fwd(&g_be, &nf) : mt_cuda_layernorm_fwd(&g_be, &nf)) != MT_OK) { printf("norm failed: %s\n", mt_last_error()); fails++; }
    mt_add_norm_fwd_args fa = {gr, go, rms ? NULL : gm.data(), gs.data(), ga, gb, gw, rms ? NULL : gbias, N, C, 1e-5f};
    if ((rms ? mt_cuda_add_rmsnorm_fwd(&g_be, &fa) : mt_cuda_add_layernorm_fwd(&g_be, &fa)) != MT_OK) { printf("add_norm failed: %s\n", mt_last_error()); fails++; }
    same_bits("out_resid vs add kernel", gr, ur, n * 2);
    same_bits("out vs add + norm_fwd kernels", go, uo, n * 2);
    same_bits("rstd vs norm_fwd kernel", gs.data(), us.data(), (size_t)N * 4);
    if (!rms) same_bits("mean vs norm_fwd kernel", gm.data(), um.data(), (size_t)N * 4);
    /* the CPU reference */
    std::vector<float> cr(n), co(n), cm(N), cs(N);
    mt_add_norm_fwd_args ca = {cr.data(), co.data(), rms ? NULL : cm.data(), cs.data(), a.data(), b.data(), w.data(),
                               rms ? NULL : bias.data(), N, C, 1e-5f};
    if ((rms ? MT_BE_CALL(&g_cpu, add_rmsnorm_fwd, &ca) : MT_BE_CALL(&g_cpu, add_layernorm_fwd, &ca)) != MT_OK) { printf("cpu failed\n"); fails++; }
    cmp("out_resid vs CPU", from_bf16(gr, n).data(), cr.data(), n, 1e-4);
    cmp("out vs CPU", from_bf16(go, n).data(), co.data(), n, 1e-4);
    cmp("rstd vs CPU", gs.data(), cs.data(), N, 1e-6);
    free(ga); free(gb); free(gw); free(gbias); if (!in_place) free(gr); free(go); free(ur); free(uo);
}

/* layernorm_bwd / rmsnorm_bwd (dinp +=, dweight / dbias +=) against the CPU backend from the same
 * bf16 inputs and the CPU's saved statistics: C % 8 == 0 takes the 16-byte dinp kernel, other C the
 * scalar one; dinp at 1e-4 nmse (bf16 output), the f32 weight gradients at 1e-6 */
static void norm_bwd(int rms, int N, int C) {
    printf("  %s_bwd N=%d C=%d (%s dinp kernel)\n", rms ? "rmsnorm" : "layernorm", N, C, C % 8 ? "scalar" : "16-byte");
    const size_t n = (size_t)N * C;
    std::vector<float> x(n), dy(n), dx0(n), w(C), bias(C), y(n), mean(N), rstd(N);
    for (size_t i = 0; i < n; i++) x[i] = rb(2.0f * frand() + 0.5f), dy[i] = rb(frand()), dx0[i] = rb(0.5f * frand());
    for (int j = 0; j < C; j++) w[j] = rb(1.0f + 0.2f * frand()), bias[j] = rb(0.2f * frand());
    mt_norm_fwd_args cf = {y.data(), rms ? NULL : mean.data(), rstd.data(), x.data(), w.data(), rms ? NULL : bias.data(), N, C, 1e-5f};
    if ((rms ? MT_BE_CALL(&g_cpu, rmsnorm_fwd, &cf) : MT_BE_CALL(&g_cpu, layernorm_fwd, &cf)) != MT_OK) { printf("cpu fwd failed\n"); fails++; return; }
    std::vector<float> cdx(dx0), cdw(C, 0.25f), cdb(C, -0.5f), gdw(cdw), gdb(cdb);
    mt_norm_bwd_args cb = {cdx.data(), cdw.data(), rms ? NULL : cdb.data(), dy.data(), x.data(), w.data(), rms ? NULL : mean.data(), rstd.data(), N, C};
    if ((rms ? MT_BE_CALL(&g_cpu, rmsnorm_bwd, &cb) : MT_BE_CALL(&g_cpu, layernorm_bwd, &cb)) != MT_OK) { printf("cpu bwd failed\n"); fails++; return; }
    bf16 *gx = to_bf16(x), *gdy = to_bf16(dy), *gdx = to_bf16(dx0), *gw = to_bf16(w);
    g_ctx.scratch_bytes = (size_t)2 * C * sizeof(float) * 64;
    g_ctx.scratch = (float *)aligned_alloc(256, g_ctx.scratch_bytes);
    mt_norm_bwd_args gb = {gdx, gdw.data(), rms ? NULL : gdb.data(), gdy, gx, gw, rms ? NULL : mean.data(), rstd.data(), N, C};
    if ((rms ? mt_cuda_rmsnorm_bwd(&g_be, &gb) : mt_cuda_layernorm_bwd(&g_be, &gb)) != MT_OK) { printf("cuda bwd failed: %s\n", mt_last_error()); fails++; }
    cmp("dinp (+=) vs CPU", from_bf16(gdx, n).data(), cdx.data(), n, 1e-4);
    cmp("dweight (+=) vs CPU", gdw.data(), cdw.data(), C, 1e-6);
    if (!rms) cmp("dbias (+=) vs CPU", gdb.data(), cdb.data(), C, 1e-6);
    free(g_ctx.scratch); g_ctx.scratch = NULL; g_ctx.scratch_bytes = 0;
    free(gx); free(gdy); free(gdx); free(gw);
}

static void init_normal(size_t n, uint64_t offset, int n_sm) {
    printf("  init_normal n=%zu offset=%llu (grid of at most %d blocks)\n", n, (unsigned long long)offset, n_sm * 32);
    g_ctx.n_sm = n_sm;
    std::vector<float> c(n), g(n, NAN);
    mt_init_normal_args ac = {c.data(), n, 1234, 0xfeedULL, offset, 0.02}, ag = {g.data(), n, 1234, 0xfeedULL, offset, 0.02};
    if (MT_BE_CALL(&g_cpu, init_normal, &ac) != MT_OK || mt_cuda_init_normal(&g_be, &ag) != MT_OK) { printf("call failed\n"); fails++; return; }
    same_bits("values vs CPU", g.data(), c.data(), n * 4);
}

int main() {
    if (mt_backend_cpu_create(&g_cpu, 1) != MT_OK) return 1;
    memset(&g_be, 0, sizeof g_be); g_be.ctx = &g_ctx; g_ctx.n_sm = 4;
    for (int rms = 0; rms <= 1; rms++) {
        add_norm(rms, 9, 23, 0);    /* rows over two blocks of 8, C not a multiple of 32 */
        add_norm(rms, 3, 300, 1);   /* in place */
        add_norm(rms, 9, 40, 0);    /* 16-byte forward kernels: 5 of 32 lanes busy */
        add_norm(rms, 3, 264, 1);   /* 16-byte, in place, lane 0 takes a second step (264 > 256) */
        norm_bwd(rms, 19, 40);      /* 16-byte dinp kernel, rows over three blocks */
        norm_bwd(rms, 5, 300);      /* scalar dinp kernel, several steps per lane */
        norm_bwd(rms, 7, 23);       /* scalar dinp kernel */
    }
    init_normal(1, 0, 1);
    init_normal(5000, 77, 1);       /* grid-stride: 32 blocks of 256 threads cover 8192 > 5000 */
    init_normal(20000, 123456789, 1); /* grid-stride loop: 20000 > 32 * 256 */
    mt_backend_destroy(&g_cpu);
    printf("%s\n", fails ? "FAILURES" : "all ok"); return fails != 0;
}
