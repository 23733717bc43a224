/* attention_tc_emu.cpp — runs the tensor-core flash-attention kernels of cuda/cuda_attention_mma.cu
 * (mma.sync fragments in registers, ldmatrix loads) on the CPU (test/cuda_emu/inc: host
 * stand-ins for the CUDA runtime, mma.sync and ldmatrix) and compares
 * them with the CPU backend's attention (the reference), forward and backward, by normalised
 * MSE. Tolerances as test/ops/cuda_parity_check.h: 1e-4 for bf16 outputs (out, dqkv: one bf16
 * rounding of the output plus P and dS rounded to bf16 before their GEMMs, nmse ~5e-6 expected),
 * 1e-6 for lse (fp32). Outputs start as 1e30 and shared memory as garbage, so an element never
 * written or a tile row never zeroed shows. What this cannot check: the hardware's mma
 * fragments, shared-memory limits, timing; test_cuda_parity does that on a GPU.
 * Built and run by test/cuda_emu/run.sh (not part of make test: ~1 min of compile and a few of
 * run on 2 cores). */
#include "attention_mma_host.cpp" /* cuda/cuda_attention_mma.cu with its launches rewritten */
#define EMU_SEED 0x9E3779B97F4A7C15ull
#define EMU_NAME_WIDTH 12
#include "emu_main.h"
typedef mt_status (*fwd_fn)(mt_backend *, const mt_attention_fwd_args *, int *);
typedef mt_status (*bwd_fn)(mt_backend *, const mt_attention_bwd_args *, int *);
static void run_impl(const char *name, fwd_fn fwd, bwd_fn bwd, int B, int T, int H, int KV, int D) {
    printf("  %s B=%d T=%d H=%d KV=%d D=%d\n", name, B, T, H, KV, D);
    mt_backend cpu; if (mt_backend_cpu_create(&cpu, 1) != MT_OK) { printf("cpu create failed\n"); exit(1); }
    const size_t S3 = (size_t)(H + 2 * KV) * D, nq = (size_t)B * T * S3, no = (size_t)B * T * H * D, nl = (size_t)B * H * T;
    std::vector<float> qkv(nq), dout(no), out(no), lse(nl), dqkv(nq), delta(nl);
    for (auto &x : qkv) x = rb(1.5f * frand());
    for (auto &x : dout) x = rb(frand());
    mt_attention_fwd_args fc = {out.data(), lse.data(), qkv.data(), B, T, H, KV, D};
    if (MT_BE_CALL(&cpu, attention_fwd, &fc) != MT_OK) { printf("cpu fwd: %s\n", mt_last_error()); exit(1); }
    bf16 *gq = (bf16 *)aligned_alloc(256, nq * 2 + 256), *gdo = (bf16 *)aligned_alloc(256, no * 2 + 256);
    bf16 *go = (bf16 *)aligned_alloc(256, no * 2 + 256), *gdq = (bf16 *)aligned_alloc(256, nq * 2 + 256);
    std::vector<float> glse(nl, NAN), gdelta(nl);
    for (size_t i = 0; i < nq; i++) gq[i] = __float2bfloat16_rn(qkv[i]);
    for (size_t i = 0; i < no; i++) gdo[i] = __float2bfloat16_rn(dout[i]), go[i] = __float2bfloat16_rn(1e30f);
    mt_cuda_ctx ctx = {}; mt_backend be; memset(&be, 0, sizeof be); be.ctx = &ctx;
    mt_attention_fwd_args fg = {go, glse.data(), gq, B, T, H, KV, D};
    int done = 0;
    if (fwd(&be, &fg, &done) != MT_OK || !done) { printf("tc fwd not run\n"); fails++; return; }
    std::vector<float> o2(no); for (size_t i = 0; i < no; i++) o2[i] = __bfloat162float(go[i]);
    cmp("out", o2.data(), out.data(), no, 1e-4);
    cmp("lse", glse.data(), lse.data(), nl, 1e-6);
    /* backward from the CPU's out (bf16) and lse on both sides */
    for (size_t i = 0; i < no; i++) { out[i] = rb(out[i]); go[i] = __float2bfloat16_rn(out[i]); }
    mt_attention_bwd_args bc = {dqkv.data(), delta.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T, H, KV, D};
    if (MT_BE_CALL(&cpu, attention_bwd, &bc) != MT_OK) { printf("cpu bwd: %s\n", mt_last_error()); exit(1); }
    for (int b = 0; b < B; b++) for (int h = 0; h < H; h++) for (int t = 0; t < T; t++) {
        float acc = 0; const size_t row = ((size_t)b * T + t) * H * D + (size_t)h * D;
        for (int d = 0; d < D; d++) acc += __bfloat162float(gdo[row + d]) * __bfloat162float(go[row + d]);
        gdelta[((size_t)b * H + h) * T + t] = acc;
    }
    for (size_t i = 0; i < nq; i++) gdq[i] = __float2bfloat16_rn(1e30f);
    mt_attention_bwd_args bg = {gdq, gdelta.data(), gdo, gq, go, lse.data(), B, T, H, KV, D};
    if (bwd(&be, &bg, &done) != MT_OK || !done) { printf("tc bwd not run\n"); fails++; return; }
    std::vector<float> d2(nq); for (size_t i = 0; i < nq; i++) d2[i] = __bfloat162float(gdq[i]);
    cmp("dqkv", d2.data(), dqkv.data(), nq, 1e-4);
    /* the q, k, v parts separately */
    std::vector<float> a, c; for (int part = 0; part < 3; part++) { a.clear(); c.clear();
        const size_t lo = part == 0 ? 0 : part == 1 ? (size_t)H * D : (size_t)(H + KV) * D, hi = part == 0 ? (size_t)H * D : part == 1 ? (size_t)(H + KV) * D : S3;
        for (size_t r = 0; r < (size_t)B * T; r++) for (size_t j = lo; j < hi; j++) { a.push_back(d2[r * S3 + j]); c.push_back(dqkv[r * S3 + j]); }
        cmp(part == 0 ? "  dq" : part == 1 ? "  dk" : "  dv", a.data(), c.data(), a.size(), 1e-4); }
    free(gq); free(gdo); free(go); free(gdq); mt_backend_destroy(&cpu);
}
static void run(int B, int T, int H, int KV, int D) {
    run_impl("mma", mt_cuda_attention_mma_fwd, mt_cuda_attention_mma_bwd, B, T, H, KV, D);
}
int main(int argc, char **argv) {
    const int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    run(1, 1, 1, 1, 32);
    run(2, 17, 4, 2, 32);
    run(1, 130, 2, 2, 64);
    run(1, 77, 3, 1, 96);
    if (!quick) {
        run(1, 150, 2, 1, 128);
        run(2, 200, 4, 1, 32);
    }
    printf("%s\n", fails ? "FAILURES" : "all ok"); return fails != 0;
}
