/* test_device_peak.c — the exact-name GPU peak table (core/device_peak.c) and honest MFU:
 * model FLOPs without recomputation over the peak (core/model/model_flops.c), hardware FLOPs
 * (HFU, Megatron's TFLOP/s) with it. */
#include <math.h>

#include "core/device_peak.h"
#include "core/model/model_layout.h"
#include "core/recipe/recipe.h"
#include "test/test.h"
#include "test/unit/tiny_model.h"

int main(void) {
    /* exact names as cudaGetDeviceProperties spells them */
    CHECK_NEAR(mt_device_peak_bf16_tflops("NVIDIA H100 80GB HBM3"), 989.0, 0, 0);
    CHECK_NEAR(mt_device_peak_bf16_tflops("NVIDIA H100 PCIe"), 756.0, 0, 0);
    CHECK_NEAR(mt_device_peak_bf16_tflops("NVIDIA H100 NVL"), 835.0, 0, 0);
    CHECK_NEAR(mt_device_peak_bf16_tflops("NVIDIA H200"), 989.0, 0, 0);
    CHECK_NEAR(mt_device_peak_bf16_tflops("NVIDIA H200 NVL"), 835.0, 0, 0);
    CHECK_NEAR(mt_device_peak_bf16_tflops("NVIDIA A100-SXM4-80GB"), 312.0, 0, 0);
    CHECK_NEAR(mt_device_peak_bf16_tflops("NVIDIA A100-PCIE-40GB"), 312.0, 0, 0);
    CHECK_NEAR(mt_device_peak_bf16_tflops("NVIDIA L40S"), 362.0, 0, 0);
    CHECK_NEAR(mt_device_peak_bf16_tflops("NVIDIA L40"), 181.0, 0, 0);
    CHECK_NEAR(mt_device_peak_bf16_tflops("  NVIDIA H200 \n"), 989.0, 0, 0); /* blanks around */
    /* no substring matching: a longer or shorter name is unknown, not its family's peak */
    CHECK(mt_device_peak_bf16_tflops("NVIDIA H100") == 0.0);
    CHECK(mt_device_peak_bf16_tflops("H100 PCIe") == 0.0);
    CHECK(mt_device_peak_bf16_tflops("NVIDIA H100 PCIe 2") == 0.0);
    CHECK(mt_device_peak_bf16_tflops("NVIDIA L40S ") == 362.0);
    CHECK(mt_device_peak_bf16_tflops("nvidia h200") == 0.0);
    CHECK(mt_device_peak_bf16_tflops("") == 0.0);
    CHECK(mt_device_peak_bf16_tflops(NULL) == 0.0);

    /* the formula: 989e12 * 0.5 FLOPs in one second on one H200 is 50% */
    CHECK_NEAR(mt_flops_utilisation(0.5 * 989e12, 1.0, 1, 989.0), 0.5, 0, 1e-12);
    CHECK_NEAR(mt_flops_utilisation(8 * 0.25 * 312e12, 2.0, 8, 312.0), 0.125, 0, 1e-12);
    CHECK(mt_flops_utilisation(1e12, 1.0, 1, 0.0) < 0);  /* peak unknown */
    CHECK(mt_flops_utilisation(1e12, 0.0, 1, 989.0) < 0); /* no time */

    /* recompute: model FLOPs stay the no-recompute count, hardware FLOPs gain the rerun forward
     * work: full, all layers, one forward of every layer but not of the output layer (Narayanan
     * et al. 2021: 96 B s l h^2 (1 + s/6h + V/16lh) against 72 B s l h^2 (1 + s/6h + V/12lh));
     * half the layers, half of that; selective, the attention core's 4 B s^2 h per layer */
    static mt_recipe r;
    mt_param_layout pl;
    config_layout(&r, "configs/gpt125m.yaml", &pl);
    const double f0 = mt_model_flops_per_seq(&pl, MT_RECOMPUTE_NONE), f1 = mt_model_flops_per_seq(&pl, MT_RECOMPUTE_FULL);
    const double s = pl.T, l = pl.L_global, h = pl.C, V = pl.Vp;
    double model = 0, hw = 0;
    pl.recompute = 0;
    pl.recompute_attn = 0;
    mt_model_flops_per_iter(&pl, 16, &model, &hw);
    CHECK_NEAR(model, 16 * f0, 0, 1e-12);
    CHECK_NEAR(hw, 16 * f0, 0, 1e-12);
    pl.recompute = pl.Lc; /* training.recompute: full, uniform */
    mt_model_flops_per_iter(&pl, 16, &model, &hw);
    CHECK_NEAR(model, 16 * f0, 0, 1e-12);
    CHECK_NEAR(hw, 16 * f1, 0, 1e-12);
    const double full_ratio = 96.0 * (1 + s / (6 * h) + V / (16 * l * h)) / (72.0 * (1 + s / (6 * h) + V / (12 * l * h)));
    CHECK_NEAR(hw / model, full_ratio, 0, 1e-12);
    CHECK(hw / model < 4.0 / 3.0); /* the output layer is not recomputed */
    /* so with full recompute, at the same step time MFU / HFU = model / hardware FLOPs */
    const double step_s = 0.25;
    const double mfu = mt_flops_utilisation(model, step_s, 1, 989.0), hfu = mt_flops_utilisation(hw, step_s, 1, 989.0);
    CHECK_NEAR(mfu / hfu, 1.0 / full_ratio, 0, 1e-12);
    pl.recompute = pl.Lc / 2; /* block method, half the layers */
    mt_model_flops_per_iter(&pl, 1, &model, &hw);
    CHECK_NEAR(hw, f0 + 0.5 * (f1 - f0), 0, 1e-12);
    CHECK_NEAR(model, f0, 0, 1e-12);
    pl.recompute = 0; /* training.recompute: selective */
    pl.recompute_attn = 1;
    mt_model_flops_per_iter(&pl, 2, &model, &hw);
    CHECK_NEAR(model, 2 * f0, 0, 1e-12);
    CHECK_NEAR(hw - model, 2 * 4.0 * s * s * h * l, 0, 1e-9);
    TEST_MAIN_END();
}
