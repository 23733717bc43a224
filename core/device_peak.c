/* device_peak.c — the exact-name table of GPU peaks behind MFU, and the MFU formula.
 * Rule: one row per name cudaGetDeviceProperties reports, matched whole (never by substring:
 * "H100" is in the SXM, PCIe and NVL names, whose peaks differ by 30%). Peaks are dense bf16
 * tensor-core TFLOP/s, half the "with sparsity" figure of NVIDIA's datasheets:
 *  - H100 SXM5 989.4, H100 PCIe 756.5, H100 NVL 835 (per GPU; NVIDIA H100 Tensor Core GPU
 *    datasheet, 2023; H800 is the China-market H100 with the same compute);
 *  - H200 SXM 989, H200 NVL 835 (NVIDIA H200 datasheet, 2024); GH200 989 (its Hopper GPU);
 *  - A100 312 for every A100 / A800 form factor and memory size (A100 datasheet, 2021);
 *  - L40S 362.05, L40 181.05 (NVIDIA L40S / L40 datasheets), L4 121 (NVIDIA L4 datasheet).
 * A GPU not listed reports peak 0: the log then shows no MFU and the README tells the user to
 * set logging.peak_tflops. */
#include "core/device_peak.h"

#include <ctype.h>
#include <string.h>

static const struct {
    const char *name; /* cudaDeviceProp.name */
    double tflops;
} k_peaks[] = {
    {"NVIDIA H100 80GB HBM3", 989.0}, /* H100 SXM5 */
    {"NVIDIA H100 PCIe", 756.0},
    {"NVIDIA H100 NVL", 835.0},
    {"NVIDIA H800", 989.0},
    {"NVIDIA H800 PCIe", 756.0},
    {"NVIDIA H200", 989.0}, /* H200 SXM 141GB */
    {"NVIDIA H200 NVL", 835.0},
    {"NVIDIA GH200 480GB", 989.0},
    {"NVIDIA GH200 144G HBM3e", 989.0},
    {"NVIDIA A100-SXM4-40GB", 312.0},
    {"NVIDIA A100-SXM4-80GB", 312.0},
    {"NVIDIA A100-PCIE-40GB", 312.0},
    {"NVIDIA A100 80GB PCIe", 312.0},
    {"NVIDIA A800-SXM4-80GB", 312.0},
    {"NVIDIA A800 80GB PCIe", 312.0},
    {"NVIDIA L40S", 362.0},
    {"NVIDIA L40", 181.0},
    {"NVIDIA L4", 121.0},
};

double mt_device_peak_bf16_tflops(const char *name) {
    if (!name) return 0.0;
    while (isspace((unsigned char)*name)) name++;
    size_t n = strlen(name);
    while (n > 0 && isspace((unsigned char)name[n - 1])) n--;
    for (size_t i = 0; i < sizeof k_peaks / sizeof k_peaks[0]; i++)
        if (strlen(k_peaks[i].name) == n && memcmp(k_peaks[i].name, name, n) == 0) return k_peaks[i].tflops;
    return 0.0;
}

double mt_flops_utilisation(double flops_per_iter, double seconds_per_iter, int n_devices, double peak_tflops) {
    if (!(peak_tflops > 0) || !(seconds_per_iter > 0) || n_devices <= 0) return -1.0;
    return flops_per_iter / (seconds_per_iter * (double)n_devices * peak_tflops * 1e12);
}
