/* rope_emu.cpp — runs cuda/cuda_rope.cu (one block per row: the row's cos / sin table in shared
 * memory, computed in double from core/rope_scale.h's frequencies, then every pair rotated) on the
 * CPU under test/cuda_emu/inc, against the CPU backend: plain RoPE, partial and interleaved, and
 * Llama 3.1's frequency scaling with position interpolation at a long-context position, forward
 * and inverse. Outputs by normalised MSE, 1e-4 as test/ops/cuda_parity_check.h for bf16 outputs
 * (one bf16 rounding of each output; the angles agree to double precision). Built and run by
 * test/cuda_emu/run.sh. */
#include "rope_host.cpp"
#define EMU_SEED 0x9E3779B97F4A7C15ull
#include "emu_main.h"
static void rope(const char *name, int B, int T, int H, int D, int stride, int pos, int rot, int inter, int scaled) {
    printf("  %s: B=%d T=%d heads=%d D=%d stride=%d pos %d rot %d interleaved %d\n", name, B, T, H, D, stride, pos, rot,
           inter);
    const size_t n = (size_t)B * T * stride;
    for (int inverse = 0; inverse <= 1; inverse++) {
        std::vector<float> x(n);
        for (auto &v : x) v = rb(frand());
        std::vector<float> c = x;
        bf16 *g = to_bf16(x);
        mt_rope_args ac = {};
        ac.x = c.data(), ac.B = B, ac.T = T, ac.n_heads = H, ac.D = D, ac.row_stride = stride, ac.pos_offset = pos;
        ac.theta = scaled ? 500000.0f : 10000.0f, ac.inverse = inverse, ac.rot_dim = rot, ac.interleaved = inter;
        if (scaled) {
            ac.llama3_factor = 8.0f, ac.llama3_low = 1.0f, ac.llama3_high = 4.0f, ac.llama3_orig_max = 8192;
            ac.pos_interp = 2.0f;
        }
        mt_rope_args ag = ac;
        ag.x = g;
        if (MT_BE_CALL(&g_cpu, rope, &ac) != MT_OK || mt_cuda_rope(&g_be, &ag) != MT_OK) {
            printf("call failed: %s\n", mt_last_error()); fails++; free(g); return;
        }
        std::vector<float> out = from_bf16(g, n);
        cmp(inverse ? "inverse (act)" : "forward (act)", out.data(), c.data(), n, 1e-4);
        free(g);
    }
}
int main() {
    if (mt_backend_cpu_create(&g_cpu, 1) != MT_OK) return 1;
    memset(&g_be, 0, sizeof g_be); g_be.ctx = &g_ctx;
    rope("plain", 2, 9, 4, 64, 4 * 64 + 2 * 2 * 64, 5, 0, 0, 0);
    rope("partial rotary", 1, 7, 3, 64, 3 * 64, 0, 32, 0, 0);
    rope("interleaved", 1, 7, 3, 64, 3 * 64, 3, 0, 1, 0);
    rope("llama3 scaled, interpolation 2", 2, 9, 4, 128, 4 * 128 + 2 * 2 * 128, 100000, 0, 0, 1);
    mt_backend_destroy(&g_cpu);
    printf("%s\n", fails ? "FAILURES" : "all ok"); return fails != 0;
}
