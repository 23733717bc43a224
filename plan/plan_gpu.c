/* plan_gpu.c — the device table `mtrain plan` estimates against, and this machine as a
 * pseudo device for CPU recipes.
 * Rule: every number names its source; peaks are dense (no 2:4 sparsity), bandwidths one
 * direction per GPU.
 * Sources:
 *  - NVIDIA A100 Tensor Core GPU datasheet (2021): BF16 312 TFLOP/s dense, FP32 19.5 TFLOP/s,
 *    40GB HBM2 1,555 GB/s, 80GB HBM2e 2,039 GB/s (SXM), NVLink 600 GB/s (both directions).
 *  - NVIDIA H100 Tensor Core GPU datasheet (2023): SXM BF16 989 TFLOP/s dense (1,979 with
 *    sparsity), FP32 67, 80GB HBM3 3.35 TB/s, NVLink 900 GB/s; PCIe BF16 756 dense, FP32 51,
 *    80GB HBM2e 2 TB/s, PCIe Gen5 128 GB/s (both directions).
 *  - NVIDIA H200 Tensor Core GPU datasheet (2024): SXM BF16 989 dense, FP32 67, 141GB HBM3e
 *    4.8 TB/s, NVLink 900 GB/s.
 *  - FP8 (dense, half the datasheets' sparsity figures): H100 SXM and H200 1,979 TFLOP/s (3,958
 *    sparse), H100 PCIe 1,513 (3,026 sparse); A100 has no fp8 tensor cores.
 *  - DGX A100 user guide: 8 x ConnectX-6 HDR 200 Gb/s compute NICs (25 GB/s per GPU);
 *    DGX H100 / H200 user guide: 8 x ConnectX-7 NDR 400 Gb/s (50 GB/s per GPU).
 *  - Memory as nvidia-smi reports it (MiB): A100 40GB 40960, A100 80GB 81920, H100 80GB
 *    81559, H200 143771.
 *  - SM counts: NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): A100 108 SMs;
 *    NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022): H100 SXM5 132 SMs, H100 PCIe
 *    114 SMs; H200 is the GH100 die of H100 SXM5 with HBM3e (132 SMs).
 *  - Sustained rate (sustained_frac = a measured large GEMM / datasheet peak). A100: H. He,
 *    "Strangely, Matrix Multiplications on GPUs Run Faster When Given 'Predictable' Data"
 *    (thonking.ai, 2024): cuBLAS (PyTorch, 2022) runs 8192 x 8192 x 8192 at 258 TFLOP/s on
 *    random-normal operands (257-258 in the post; 295 on zeros: the clock falls under the 400 W
 *    limit with the switching of random data, as in training). H100 / H200, with no such figure
 *    found for H100: S. Bekman, "Machine Learning Engineering", Maximum Achievable Matmul FLOPS (MAMF)
 *    table (github.com/stas00/ml-engineering, compute/accelerator), the best shape of a sweep: H100
 *    SXM 794.5 of 989 (80.3%); the same table's A100 SXM figure is 271.2 (86.9%), 5% above He's
 *    random-data one. H100 PCIe is not in the table: the SXM ratio is assumed. H200: cuBLAS bf16
 *    8192 x 8192 x 8192 on random-normal operands measured on an H200 SXM at 769-798 TFLOP/s over
 *    repeated runs (the midpoint 783.5 used), through the shape model's 16 waves of 132 tiles for
 *    2048 tiles (97.0%) of 8192 + k0 K-steps each (97.0%, below), as for the A100. fp8 GEMMs sustain
 *    the same fraction of their peak: the tilelang sweeps below reach 1582 (fp8) and 781 (fp16)
 *    TFLOP/s as K grows, 79.9% and 79.0% of the peaks.
 *  - Fused attention on Hopper (attn_frac): FlashAttention-3's best bf16 rate, 740 TFLOP/s on an H100
 *    SXM5 (Shah et al. 2024, abstract), 75% of peak; the fused kernel's K loop runs over the whole key
 *    sequence, so its GEMMs pay no per-tile K cost.
 *  - Fixed cost per output tile on Hopper (tile_k0): tilelang's fp16 and fp8 K sweeps on an H800 SXM
 *    (below, HOPPER_K0). The A100's is not measured: 0 (its GEMMs keep the tile and wave terms).
 *  - Achievable memory bandwidth (hbm_frac): 1.80 TB/s read on an A100 80GB SXM, 88% of the
 *    datasheet's 2.039 TB/s, confirmed by Nsight Compute ("Trouble to reach peak bandwidth of
 *    A100", NVIDIA developer forums, which also cites a GTC talk whose best kernel reached
 *    about 90%). No such measurement was found for the other devices: the A100's ratio is assumed. */
#include "plan/plan.h"

#include <strings.h>
#include <unistd.h>

#define MIB (1024.0 * 1024.0)

/* A100: cuBLAS's 8192 x 8192 x 8192 on random-normal 16-bit operands, 258 TFLOP/s (H. He, above); the
 * shape model runs that GEMM in 19 waves of 108 tiles for 2048 tiles (99.8%), so the sustained rate is
 * 258 / 0.998. Memory: 1.80 of the datasheet's 2.039 TB/s (A100 80GB, above). */
#define A100_SUSTAINED (258.0 / (2048.0 / (19 * 108)) / 312.0)
#define A100_HBM_FRAC (1800.0 / 2039.0)
/* Hopper's fixed cost per output tile (prologue, epilogue), in K-steps: a GEMM of K runs at
 * R * K / (K + k0). Two points of one K sweep at M = N = 8192 on an H800 SXM (Hopper's SMs and tensor
 * cores; tilelang's benchmark/matmul and benchmark/matmul_fp8 READMEs, github.com/xwhzz/tilelang, a fork of
 * tile-ai/tilelang, at commit b2acfc3791d5):
 * fp16 628 TFLOP/s at K 1024 and 758 at K 8192, fp8 1129 and 1507. With r = rate(8192) / rate(1024),
 * r = 8 (1024 + k0) / (8192 + k0), so k0 = 8192 (r - 1) / (8 - r): 249.6 (fp16), 411.5 (fp8). The other
 * points of the sweeps (K 256 ... 16384) then fall within 2.5% (fp16) and 7% (fp8 at K 256; 2% from
 * K 512 up). */
#define HOPPER_K0(r8192, r1024) (8192.0 * ((r8192) / (r1024) - 1.0) / (8.0 - (r8192) / (r1024)))
#define HOPPER_K0_16 HOPPER_K0(758.0, 628.0)
#define HOPPER_K0_8 HOPPER_K0(1507.0, 1129.0)
/* Flash attention on Hopper: FlashAttention-3 (Shah et al. 2024, arXiv 2407.08608, abstract) reaches up
 * to 740 TFLOP/s in bf16/fp16 on an H100 SXM5, 75% of the 989 peak (FlashAttention-2: 35%) */
#define FA3_FRAC (740.0 / 989.0)
/* H200: 783.5 TFLOP/s measured (769-798) for 8192^3 on random data; 2048 tiles in 16 waves of 132,
 * each tile 8192 + k0 K-steps long */
#define H200_SUSTAINED (783.5 / (2048.0 / (16 * 132)) / (8192.0 / (8192.0 + HOPPER_K0_16)) / 989.0)

static const mt_gpu_spec k_gpus[] = {
    { "a100-40g", "NVIDIA A100 SXM4 40GB", 312.0, 19.5, 40960 * MIB, 1555.0, 300.0, 25.0, 8, 0, 108, A100_SUSTAINED, A100_HBM_FRAC, 0, { 0 }, "", "", 0.0, { 0.0, 0.0 }, 0.0 },
    { "a100-80g", "NVIDIA A100 SXM4 80GB", 312.0, 19.5, 81920 * MIB, 2039.0, 300.0, 25.0, 8, 0, 108, A100_SUSTAINED, A100_HBM_FRAC, 0, { 0 }, "", "", 0.0, { 0.0, 0.0 }, 0.0 },
    { "h100-80g", "NVIDIA H100 SXM5 80GB", 989.0, 67.0, 81559 * MIB, 3350.0, 450.0, 50.0, 8, 0, 132, 794.5 / 989.0, A100_HBM_FRAC, 0, { 0 }, "", "", .peak_fp8_tflops = 1979.0, .tile_k0 = { HOPPER_K0_16, HOPPER_K0_8 }, .attn_frac = FA3_FRAC },
    /* PCIe card: GPUs of a node talk over PCIe Gen5 (64 GB/s one way; NVLink bridges join
     * pairs only); one 400 Gb/s NIC per two GPUs assumed (25 GB/s per GPU). */
    { "h100-pcie", "NVIDIA H100 PCIe 80GB", 756.0, 51.0, 81559 * MIB, 2000.0, 64.0, 25.0, 8, 0, 114, 794.5 / 989.0, A100_HBM_FRAC, 0, { 0 }, "", "", .peak_fp8_tflops = 1513.0, .tile_k0 = { HOPPER_K0_16, HOPPER_K0_8 }, .attn_frac = FA3_FRAC },
    { "h200", "NVIDIA H200 SXM 141GB", 989.0, 67.0, 143771 * MIB, 4800.0, 450.0, 50.0, 8, 0, 132, H200_SUSTAINED, A100_HBM_FRAC, 0, { 0 }, "", "", .peak_fp8_tflops = 1979.0, .tile_k0 = { HOPPER_K0_16, HOPPER_K0_8 }, .attn_frac = FA3_FRAC },
};

static const struct {
    const char *alias, *name;
} k_aliases[] = {
    { "a100", "a100-80g" },     { "a100-80", "a100-80g" },  { "a100-40", "a100-40g" },
    { "h100", "h100-80g" },     { "h100-sxm", "h100-80g" }, { "h100-80", "h100-80g" },
    { "h200-141g", "h200" },    { "h200-sxm", "h200" },
};

double mt_gpu_hbm_bw(const mt_gpu_spec *g) {
    return g->hbm_gbs > 0 ? g->hbm_gbs * 1e9 * (g->hbm_frac > 0 ? g->hbm_frac : 1.0) : 0.0;
}

double mt_gpu_sustained_frac(const mt_gpu_spec *g) { return g->sustained_frac > 0 ? g->sustained_frac : 1.0; }

int mt_gpu_n_specs(void) { return (int)(sizeof k_gpus / sizeof k_gpus[0]); }

const mt_gpu_spec *mt_gpu_spec_at(int i) { return i >= 0 && i < mt_gpu_n_specs() ? &k_gpus[i] : NULL; }

const mt_gpu_spec *mt_gpu_find(const char *name) {
    if (!name) return NULL;
    for (int i = 0; i < mt_gpu_n_specs(); i++)
        if (!strcasecmp(name, k_gpus[i].name)) return &k_gpus[i];
    for (size_t i = 0; i < sizeof k_aliases / sizeof k_aliases[0]; i++)
        if (!strcasecmp(name, k_aliases[i].alias)) return mt_gpu_find(k_aliases[i].name);
    return NULL;
}

const char *mt_gpu_names(void) { return "a100-40g, a100-80g, h100-80g, h100-pcie, h200"; }

void mt_gpu_host(mt_gpu_spec *out, double peak_tflops) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    *out = (mt_gpu_spec){ "cpu", "this machine's CPU (host memory)", peak_tflops, peak_tflops,
                          pages > 0 && page > 0 ? (double)pages * (double)page : 0.0, 0.0, 0.0, 0.0,
                          cores > 0 ? (int)cores : 1, 1, 0, 0.0, 0.0, 0, { 0 }, "", "", 0.0, { 0.0, 0.0 }, 0.0 };
}
