/* embed_emu.cpp — runs cuda/cuda_embed.cu (the forward, and the backward that buckets the tokens by
 * id: keys, sort, one block per vocabulary row summing its run in token order) on the CPU under
 * test/cuda_emu/inc, against the CPU backend. The weight gradients must be bit-identical: both sum
 * the same bf16 values of dout in token order into the same fp32 start values (+=). Cases: a
 * whole vocabulary, a vocab-parallel shard (other shards' tokens get nothing), one token repeated
 * in every row, a width over one block of threads. The forward: nmse < 1e-4 (bf16 output, as
 * test/ops/cuda_parity_check.h). Built and run by test/cuda_emu/run.sh. */
#include "embed_host.cpp"
#define EMU_SEED 0x9E3779B97F4A7C15ull
#include "emu_main.h"
static void same(const char *w, const float *a, const float *b, size_t n) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += memcmp(&a[i], &b[i], 4) != 0;
    printf("    %-30s %zu of %zu elements differ %s\n", w, bad, n, bad ? "FAIL" : "ok (bit-identical)");
    if (bad) fails++;
}
static void embed(const char *name, int B, int T, int C, int V, int vs, int nv, int same_token) {
    printf("  %s: B=%d T=%d C=%d vocab %d, shard [%d, %d)\n", name, B, T, C, V, vs, vs + nv);
    const size_t rows = (size_t)B * T, P = (size_t)T + 3;
    std::vector<int32_t> tok(rows);
    for (auto &t : tok) t = same_token >= 0 ? same_token : (int32_t)(next() % (uint64_t)(next() % 4 ? V : 7)); /* many repeats of ids < 7 */
    std::vector<float> d(rows * C), w0((size_t)nv * C), p0(P * C), wte((size_t)nv * C), wpe(P * C);
    for (auto &x : d) x = rb(frand());
    for (auto &x : w0) x = frand();
    for (auto &x : p0) x = frand();
    for (auto &x : wte) x = rb(frand());
    for (auto &x : wpe) x = rb(frand());
    std::vector<__nv_bfloat16> gd(rows * C), gwte(wte.size()), gwpe(wpe.size()), gout(rows * C);
    for (size_t i = 0; i < d.size(); i++) gd[i] = __float2bfloat16_rn(d[i]);
    for (size_t i = 0; i < wte.size(); i++) gwte[i] = __float2bfloat16_rn(wte[i]);
    for (size_t i = 0; i < wpe.size(); i++) gwpe[i] = __float2bfloat16_rn(wpe[i]);
    std::vector<float> cw = w0, cp = p0, gw = w0, gp = p0;
    mt_embedding_bwd_args c = {cw.data(), cp.data(), d.data(), tok.data(), B, T, C, vs, nv, 2};
    mt_embedding_bwd_args g = {gw.data(), gp.data(), gd.data(), tok.data(), B, T, C, vs, nv, 2};
    if (MT_BE_CALL(&g_cpu, embedding_bwd, &c) != MT_OK || mt_cuda_embedding_bwd(&g_be, &g) != MT_OK) {
        printf("call failed: %s\n", mt_last_error()); fails++; return;
    }
    same("dwte (+=)", gw.data(), cw.data(), cw.size());
    same("dwpe (+=)", gp.data(), cp.data(), cp.size());
    std::vector<float> co(rows * C);
    mt_embedding_fwd_args fc = {co.data(), tok.data(), wte.data(), wpe.data(), B, T, C, vs, nv, 2};
    mt_embedding_fwd_args fg = {gout.data(), tok.data(), gwte.data(), gwpe.data(), B, T, C, vs, nv, 2};
    if (MT_BE_CALL(&g_cpu, embedding_fwd, &fc) != MT_OK || mt_cuda_embedding_fwd(&g_be, &fg) != MT_OK) {
        printf("call failed: %s\n", mt_last_error()); fails++; return;
    }
    double x = 0, y = 0;
    for (size_t i = 0; i < co.size(); i++) { double e = (double)__bfloat162float(gout[i]) - co[i]; x += e * e; y += (double)co[i] * co[i]; }
    const double nm = y > 0 ? x / y : x;
    printf("    %-30s nmse %.3e %s\n", "forward (act)", nm, nm < 1e-4 ? "ok" : "FAIL");
    if (!(nm < 1e-4)) fails++;
}
int main() {
    if (mt_backend_cpu_create(&g_cpu, 1) != MT_OK) return 1;
    memset(&g_be, 0, sizeof g_be); g_be.ctx = &g_ctx;
    embed("whole vocabulary", 2, 48, 40, 120, 0, 120, -1);
    embed("vocab-parallel shard", 3, 32, 24, 120, 40, 40, -1);
    embed("one token everywhere", 2, 40, 16, 50, 0, 50, 9);
    embed("C over one block", 1, 20, 300, 30, 0, 30, -1);
    mt_backend_destroy(&g_cpu);
    printf("%s\n", fails ? "FAILURES" : "all ok"); return fails != 0;
}
