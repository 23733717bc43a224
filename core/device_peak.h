/* device_peak.h — dense bf16 tensor-core peaks of GPUs by their exact CUDA device name, and the
 * MFU formula. Pure functions (no CUDA needed), so both are unit-tested on any machine. */
#ifndef MT_DEVICE_PEAK_H
#define MT_DEVICE_PEAK_H

/* Dense (no 2:4 sparsity) bf16 TFLOP/s of the GPU whose cudaDeviceProp.name is exactly `name`
 * (leading / trailing blanks ignored, case sensitive as the driver spells it), 0 when the name
 * is not in the table: then MFU needs logging.peak_tflops. No substring matching: "NVIDIA H100
 * PCIe" must not get the SXM part's 989. */
double mt_device_peak_bf16_tflops(const char *name);

/* Model FLOPs utilisation: flops_per_iter / (seconds per iteration * n_devices * peak), with
 * flops_per_iter the model's FLOPs WITHOUT recomputation (PaLM's MFU, Chowdhery et al. 2022,
 * appendix B); pass the FLOPs with recomputation instead to get the hardware FLOPs utilisation
 * (HFU). -1 when the peak is unknown (<= 0) or the time is not positive. */
double mt_flops_utilisation(double flops_per_iter, double seconds_per_iter, int n_devices, double peak_tflops);

#endif
