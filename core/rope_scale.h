/* rope_scale.h — the RoPE frequency transforms that are a function of one frequency alone, shared by
 * the CPU backend (mt_rope_inv_freq, core/op_check.c) and the CUDA kernel (cuda/cuda_rope.cu), so
 * that both rotate by the same angles:
 *   - Llama 3.x's frequency scaling (Megatron-Core's RotaryEmbedding._apply_scaling with
 *     --use-rope-scaling, transformers' rope_type "llama3"): with wavelength w = 2 pi / f and the
 *     original context L, a frequency whose w > L / low_freq_factor is divided by factor, one whose
 *     w < L / high_freq_factor is kept, and those between are blended,
 *     f' = (1 - s) f / factor + s f with s = (L / w - low) / (high - low);
 *   - position interpolation (Megatron's --rotary-seq-len-interpolation-factor, transformers'
 *     rope_type "linear"): positions divided by interp, i.e. every frequency divided by it.
 * factor <= 0 turns the first off, interp <= 0 or 1 the second. */
#ifndef MT_ROPE_SCALE_H
#define MT_ROPE_SCALE_H

#ifdef __CUDACC__
#define MT_ROPE_HOSTDEV __host__ __device__
#else
#define MT_ROPE_HOSTDEV
#endif

static inline MT_ROPE_HOSTDEV double mt_rope_scale_freq(double f, double factor, double low, double high,
                                                        double orig_max, double interp) {
    if (factor > 0.0 && orig_max > 0.0) {
        const double w = 2.0 * 3.14159265358979323846 / f;
        if (w > orig_max / low) {
            f = f / factor;
        } else if (!(w < orig_max / high)) {
            const double s = (orig_max / w - low) / (high - low);
            f = (1.0 - s) * f / factor + s * f;
        }
    }
    if (interp > 0.0 && interp != 1.0) f = f / interp;
    return f;
}

#endif
