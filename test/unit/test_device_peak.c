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

    /* recompute: model FLOPs stay the no-recompute count, hardware FLOPs gain one forward of
     * the recomputed layers (full, all layers: x 4/3; half the layers: x 7/6 on the layer part) */
    static mt_recipe r;
    mt_param_layout pl;
    config_layout(&r, "configs/gpt125m.yaml", &pl);
    const double f0 = mt_model_flops_per_seq(&pl, 0), f1 = mt_model_flops_per_seq(&pl, 1);
    double model = 0, hw = 0;
    pl.recompute = 0;
    mt_model_flops_per_iter(&pl, 16, &model, &hw);
    CHECK_NEAR(model, 16 * f0, 0, 1e-12);
    CHECK_NEAR(hw, 16 * f0, 0, 1e-12);
    pl.recompute = pl.Lc; /* training.recompute: full, uniform */
    mt_model_flops_per_iter(&pl, 16, &model, &hw);
    CHECK_NEAR(model, 16 * f0, 0, 1e-12);
    CHECK_NEAR(hw, 16 * f1, 0, 1e-12);
    CHECK_NEAR(hw / model, 4.0 / 3.0, 0, 1e-12);
    /* so with full recompute, at the same step time MFU is 3/4 of HFU */
    const double step_s = 0.25;
    const double mfu = mt_flops_utilisation(model, step_s, 1, 989.0), hfu = mt_flops_utilisation(hw, step_s, 1, 989.0);
    CHECK_NEAR(mfu / hfu, 0.75, 0, 1e-12);
    pl.recompute = pl.Lc / 2; /* block method, half the layers */
    mt_model_flops_per_iter(&pl, 1, &model, &hw);
    CHECK_NEAR(hw, f0 + 0.5 * (f1 - f0), 0, 1e-12);
    CHECK_NEAR(model, f0, 0, 1e-12);
    TEST_MAIN_END();
}
