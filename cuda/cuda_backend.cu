/* cuda_backend.cu — the CUDA backend's life cycle and memory, and what the CUDA module's entry
 * point (parallel/cuda_module.c) takes from it: create, the device count, the stream. The create selects
 * the device it is given (cudaSetDevice; the trainer passes the rank's local rank), makes one
 * stream, a cuBLASLt handle, a 32 MiB cuBLASLt workspace and a reduction scratch buffer, and
 * fills the function table; destroy frees all of it.
 * Rules kept: no GPU (or no driver) is an MT_ERR_CUDA with a message that says to use
 * --backend cpu, never a crash; every op and copy runs in order on the backend's one
 * stream; only copy_d2h and sync wait for the device (copy_h2d also waits when its source
 * is pinned host memory, so the caller may always reuse the source on return).
 * Every op of backend.h is in the table (one op family per .cu file); an op added to backend.h
 * later stays NULL until written: MT_BE_CALL then reports "backend 'cuda' has no op X yet". */
#include "cuda/cuda_common.cuh"

extern "C" {
#include "core/backend_cuda_module.h"
#include "core/device_peak.h"
}

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MT_CUDA_WORKSPACE_BYTES ((size_t)32 << 20)
#define MT_CUDA_SCRATCH_BYTES ((size_t)16 << 20)

/* ---- memory ---- */

static mt_status cuda_alloc(mt_backend *be, size_t n_bytes, void **out) {
    mt_cuda_ctx *ctx = mt_cuda_ctx_of(be);
    *out = NULL;
    if (n_bytes == 0) n_bytes = 256; /* a valid, freeable pointer for empty tensors */
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, n_bytes);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        (void)cudaMemGetInfo(&free_b, &total_b);
        return mt_errorf(e == cudaErrorMemoryAllocation ? MT_ERR_OOM : MT_ERR_CUDA,
                         "cudaMalloc(%zu bytes = %.2f GiB) on GPU %d (%s): %s; %.2f of %.2f GiB "
                         "free: lower training.micro_batch_size, raise tensor/pipeline "
                         "parallelism, or turn on activation recompute",
                         n_bytes, n_bytes / 1073741824.0, ctx->device, ctx->device_name,
                         cudaGetErrorString(e), free_b / 1073741824.0, total_b / 1073741824.0);
    }
    /* cudaMalloc memory is >= 256-byte aligned; zero it in stream order */
    e = cudaMemsetAsync(p, 0, n_bytes, ctx->stream);
    if (e != cudaSuccess) {
        (void)cudaFree(p);
        (void)cudaGetLastError();
        return mt_errorf(MT_ERR_CUDA, "%s:%d: cudaMemsetAsync after alloc: %s", __FILE__, __LINE__,
                         cudaGetErrorString(e));
    }
    *out = p;
    return MT_OK;
}

static void cuda_free(mt_backend *be, void *ptr) {
    (void)be;
    if (ptr) (void)cudaFree(ptr); /* cudaFree synchronises the device: not for the training loop */
}

static mt_status cuda_memset_zero(mt_backend *be, void *ptr, size_t n_bytes) {
    if (n_bytes == 0) return MT_OK;
    CUDA_CHECK(cudaMemsetAsync(ptr, 0, n_bytes, mt_cuda_ctx_of(be)->stream));
    return MT_OK;
}

static mt_status cuda_copy_h2d(mt_backend *be, void *dst, const void *src, size_t n_bytes) {
    mt_cuda_ctx *ctx = mt_cuda_ctx_of(be);
    if (n_bytes == 0) return MT_OK;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, n_bytes, cudaMemcpyHostToDevice, ctx->stream));
    /* From pageable memory the runtime has staged the source before returning; from pinned
     * memory the DMA may still be reading it, so wait: callers may reuse src at once. */
    cudaPointerAttributes attr;
    if (cudaPointerGetAttributes(&attr, src) == cudaSuccess && attr.type == cudaMemoryTypeHost)
        CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    (void)cudaGetLastError();
    return MT_OK;
}

static mt_status cuda_copy_d2h(mt_backend *be, void *dst, const void *src, size_t n_bytes) {
    mt_cuda_ctx *ctx = mt_cuda_ctx_of(be);
    if (n_bytes == 0) return MT_OK;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, n_bytes, cudaMemcpyDeviceToHost, ctx->stream));
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    return MT_OK;
}

static mt_status cuda_copy_d2d(mt_backend *be, void *dst, const void *src, size_t n_bytes) {
    if (n_bytes == 0) return MT_OK;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, n_bytes, cudaMemcpyDeviceToDevice,
                               mt_cuda_ctx_of(be)->stream));
    return MT_OK;
}

static mt_status cuda_sync(mt_backend *be) {
    CUDA_CHECK(cudaStreamSynchronize(mt_cuda_ctx_of(be)->stream));
    CUDA_CHECK(cudaGetLastError());
    return MT_OK;
}

/* ---- life cycle ---- */

static void cuda_ctx_free(mt_cuda_ctx *ctx) {
    if (!ctx) return;
    if (ctx->stream) (void)cudaStreamSynchronize(ctx->stream);
    mt_cuda_matmul_cache_free(ctx);
    if (ctx->workspace) (void)cudaFree(ctx->workspace);
    if (ctx->scratch) (void)cudaFree(ctx->scratch);
    if (ctx->lt) (void)cublasLtDestroy(ctx->lt);
    if (ctx->stream) (void)cudaStreamDestroy(ctx->stream);
    (void)cudaGetLastError();
    free(ctx);
}

static void cuda_destroy(mt_backend *be) {
    if (!be) return;
    cuda_ctx_free(mt_cuda_ctx_of(be));
    be->ctx = NULL;
    be->device_name = NULL;
}

/* Dense bf16 tensor-core peak (TFLOP/s, no sparsity) by the exact device name
 * (core/device_peak.c: H100 SXM 989, PCIe 756, NVL 835, H200 989, A100 312, L40S 362, ...);
 * 0 = unknown, then MFU needs logging.peak_tflops. */
static double cuda_peak_tflops(const char *name) { return mt_device_peak_bf16_tflops(name); }

static struct mt_backend_i g_cuda_iface;

static void cuda_fill_iface(struct mt_backend_i *t) {
    memset(t, 0, sizeof *t); /* every op not listed here stays NULL: MT_BE_CALL names it */
    t->name = "cuda";
    t->destroy = cuda_destroy;
    t->alloc = cuda_alloc;
    t->free = cuda_free;
    t->memset_zero = cuda_memset_zero;
    t->copy_h2d = cuda_copy_h2d;
    t->copy_d2h = cuda_copy_d2h;
    t->copy_d2d = cuda_copy_d2d;
    t->sync = cuda_sync;
    t->matmul_fwd = mt_cuda_matmul_fwd;
    t->matmul_bwd = mt_cuda_matmul_bwd;
    t->layernorm_fwd = mt_cuda_layernorm_fwd;
    t->layernorm_bwd = mt_cuda_layernorm_bwd;
    t->rmsnorm_fwd = mt_cuda_rmsnorm_fwd;
    t->rmsnorm_bwd = mt_cuda_rmsnorm_bwd;
    t->add_layernorm_fwd = mt_cuda_add_layernorm_fwd; /* fused ops */
    t->add_rmsnorm_fwd = mt_cuda_add_rmsnorm_fwd;
    t->matmul_gelu_fwd = mt_cuda_matmul_gelu_fwd;
    t->matmul_dgelu_bwd = mt_cuda_matmul_dgelu_bwd;
    t->init_normal = mt_cuda_init_normal;       /* cuda_init.cu */
    t->gelu_fwd = mt_cuda_gelu_fwd;             /* cuda_act.cu */
    t->gelu_bwd = mt_cuda_gelu_bwd;
    t->swiglu_fwd = mt_cuda_swiglu_fwd;
    t->swiglu_bwd = mt_cuda_swiglu_bwd;
    t->squared_relu_fwd = mt_cuda_squared_relu_fwd;
    t->squared_relu_bwd = mt_cuda_squared_relu_bwd;
    t->add = mt_cuda_add;
    t->scale = mt_cuda_scale;
    t->cast_f32_to_act = mt_cuda_cast_f32_to_act;
    t->sum = mt_cuda_sum;                       /* cuda_sum.cu */
    t->rope = mt_cuda_rope;                     /* cuda_rope.cu */
    t->embedding_fwd = mt_cuda_embedding_fwd;   /* cuda_embed.cu */
    t->embedding_bwd = mt_cuda_embedding_bwd;
    t->adamw = mt_cuda_adamw;                   /* cuda_optim.cu */
    t->attention_fwd = mt_cuda_attention_fwd;   /* cuda_attention.cu */
    t->attention_bwd = mt_cuda_attention_bwd;
    t->attention_block_fwd = mt_cuda_attention_block_fwd; /* cuda_attention_block.cu */
    t->attention_block_bwd = mt_cuda_attention_block_bwd;
    t->copy_rows = mt_cuda_copy_rows;
    t->xent_fwd_bwd = mt_cuda_xent_fwd_bwd;     /* cuda_xent.cu */
    t->xent_vp_max = mt_cuda_xent_vp_max;
    t->xent_vp_sumexp = mt_cuda_xent_vp_sumexp;
    t->xent_vp_finish = mt_cuda_xent_vp_finish;
    t->moe_route = mt_cuda_moe_route;           /* cuda_moe.cu */
    t->moe_route_bwd = mt_cuda_moe_route_bwd;
    t->moe_permute = mt_cuda_moe_permute;
    t->moe_unpermute = mt_cuda_moe_unpermute;
    t->moe_unpermute_bwd = mt_cuda_moe_unpermute_bwd;
    t->moe_gate_fwd = mt_cuda_moe_gate_fwd;     /* cuda_gate.cu */
    t->moe_gate_bwd = mt_cuda_moe_gate_bwd;
    t->moe_gate_logit_bwd = mt_cuda_moe_gate_logit_bwd;
}

/* The visible device count (0 = none); `why` says why there is none, or what there is. */
static int cuda_device_count(char *why, size_t why_bytes) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if (why && why_bytes)
            snprintf(why, why_bytes, "no CUDA GPU found (cudaGetDeviceCount: %s)",
                     cudaGetErrorString(e));
        return 0;
    }
    if (n <= 0) {
        if (why && why_bytes)
            snprintf(why, why_bytes, "no CUDA GPU found (cudaGetDeviceCount: 0 devices)");
        return 0;
    }
    if (why && why_bytes) {
        cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
            snprintf(why, why_bytes, "%d CUDA device(s); device 0: %s (sm_%d%d)", n, prop.name,
                     prop.major, prop.minor);
        else
            snprintf(why, why_bytes, "%d CUDA device(s)", n);
        (void)cudaGetLastError();
    }
    return n;
}

/* Like CUDA_CHECK but for create's cleanup path: needs `st` and an `out:` label. */
#define CREATE_CUDA(call)                                                                    \
    do {                                                                                     \
        cudaError_t e_ = (call);                                                             \
        if (e_ != cudaSuccess) {                                                             \
            (void)cudaGetLastError();                                                        \
            st = mt_errorf(MT_ERR_CUDA, "%s:%d: creating the CUDA backend on GPU %d: %s: %s", \
                           __FILE__, __LINE__, device, #call, cudaGetErrorString(e_));       \
            goto out;                                                                        \
        }                                                                                    \
    } while (0)

static mt_status cuda_backend_create(mt_backend *be, int device) {
    mt_status st = MT_OK;
    mt_cuda_ctx *ctx = NULL;
    char why[512];
    cudaDeviceProp prop;
    cublasStatus_t cs;
    memset(be, 0, sizeof *be);

    int n = cuda_device_count(why, sizeof why);
    if (n == 0)
        return mt_errorf(MT_ERR_CUDA, "%s; run with --backend cpu (or training.backend: cpu)", why);
    if (device < 0 || device >= n)
        return mt_errorf(MT_ERR_CUDA,
                         "CUDA device %d requested but only %d GPU(s) visible (0..%d); check "
                         "CUDA_VISIBLE_DEVICES / LOCAL_RANK, or run with --backend cpu",
                         device, n, n - 1);

    ctx = (mt_cuda_ctx *)calloc(1, sizeof *ctx);
    if (!ctx) return mt_errorf(MT_ERR_OOM, "CUDA backend: out of host memory for its context");
    ctx->device = device;
    CREATE_CUDA(cudaSetDevice(device));
    CREATE_CUDA(cudaGetDeviceProperties(&prop, device));
    snprintf(ctx->device_name, sizeof ctx->device_name, "%s", prop.name);
    snprintf(ctx->display_name, sizeof ctx->display_name, "%s (cuda:%d)", prop.name, device);
    ctx->n_sm = prop.multiProcessorCount;
    ctx->cc_major = prop.major;
    ctx->cc_minor = prop.minor;
    if (prop.major < 8) {
        st = mt_errorf(MT_ERR_CUDA,
                       "GPU %d (%s) has compute capability %d.%d; the CUDA backend needs bf16 "
                       "tensor cores (sm_80 or newer); run with --backend cpu",
                       device, prop.name, prop.major, prop.minor);
        goto out;
    }
    CREATE_CUDA(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
    cs = cublasLtCreate(&ctx->lt);
    if (cs != CUBLAS_STATUS_SUCCESS) {
        ctx->lt = NULL;
        st = mt_errorf(MT_ERR_CUDA, "cublasLtCreate on GPU %d: %s", device,
                       cublasLtGetStatusString(cs));
        goto out;
    }
    ctx->workspace_bytes = MT_CUDA_WORKSPACE_BYTES;
    CREATE_CUDA(cudaMalloc(&ctx->workspace, ctx->workspace_bytes));
    ctx->scratch_bytes = MT_CUDA_SCRATCH_BYTES;
    CREATE_CUDA(cudaMalloc((void **)&ctx->scratch, ctx->scratch_bytes));
    CREATE_CUDA(cudaStreamSynchronize(ctx->stream));

    cuda_fill_iface(&g_cuda_iface);
    be->i = &g_cuda_iface;
    be->ctx = ctx;
    be->act = MT_BF16;
    be->device_name = ctx->display_name;
    be->peak_tflops = cuda_peak_tflops(ctx->device_name);
    be->host_memory = 0;
    be->device = device;
    return MT_OK;
out:
    cuda_ctx_free(ctx);
    memset(be, 0, sizeof *be);
    return st;
}

/* ---- what the CUDA module's entry point (parallel/cuda_module.c) takes from the backend;
 * hidden inside the module like everything here (-fvisibility=hidden) ---- */

extern "C" int mt_cuda_module_device_count(char *why, size_t why_bytes) { return cuda_device_count(why, why_bytes); }

extern "C" mt_status mt_cuda_module_backend_create(mt_backend *be, int device) {
    return cuda_backend_create(be, device);
}

extern "C" void *mt_cuda_backend_stream(mt_backend *be) {
    return be && be->ctx ? (void *)mt_cuda_ctx_of(be)->stream : NULL;
}
