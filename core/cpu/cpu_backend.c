/* cpu_backend.c — the CPU backend's table and its memory functions: fp32 activations, host
 * memory as "device" memory, OpenBLAS for GEMMs and OpenMP for loops. The ops themselves
 * live in cpu_ops_*.c. Rules: every allocation is >= 256-byte aligned and zeroed (the DESIGN
 * memory rule), each page of a large one touched once; failures return MT_ERR_OOM naming the
 * byte count; nothing here exits. */
#include "core/cpu/cpu_backend.h"

#include <cblas.h>
#include <omp.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MT_CPU_ALIGN 256

static void cpu_destroy(mt_backend *be) {
    free(be->ctx);
    be->ctx = NULL;
}

/* Every block starts with a header (MT_CPU_ALIGN bytes before the pointer handed out) saying
 * how it was obtained. Large blocks come straight from mmap: the kernel hands out zeroed pages
 * (zeroed by the kernel, prefaulted writable in parallel by MADV_POPULATE_WRITE), so the block
 * is zero without being written here: each page is cleared once, by the kernel, not once by a
 * memset on one thread and again by its real writer. (No MADV_HUGEPAGE: on the
 * 2-core VM it made the kernel's first-touch zeroing of gpt125m's 2.1 GB about 10x slower than
 * 4 KiB pages, 5.6 s against 0.6 s of CPU: fresh 2 MiB blocks come from memory the hypervisor
 * has not backed yet.) Small blocks: aligned_alloc + memset. */
#define MT_CPU_MMAP_MIN ((size_t)1 << 20)
#define MT_CPU_PAGE ((size_t)4096)
#define MT_CPU_MAGIC 0x6d7463707561ULL /* "mtcpua" */
typedef struct {
    uint64_t magic;
    void *base;       /* what mmap / aligned_alloc returned */
    size_t map_bytes; /* mmap'd length; 0 = aligned_alloc */
} cpu_block;

static mt_status cpu_alloc(mt_backend *be, size_t n_bytes, void **out) {
    (void)be;
    if (!out) return mt_errorf(MT_ERR_INTERNAL, "cpu alloc: NULL output pointer");
    *out = NULL;
    /* aligned_alloc wants a multiple of the alignment; 0 bytes still gets a valid block */
    size_t rounded = n_bytes == 0 ? MT_CPU_ALIGN : (n_bytes + MT_CPU_ALIGN - 1) / MT_CPU_ALIGN * MT_CPU_ALIGN;
    if (rounded < n_bytes || rounded > SIZE_MAX - 2 * MT_CPU_PAGE)
        return mt_errorf(MT_ERR_OOM, "cpu alloc: %zu bytes is too large to align", n_bytes);
    char *p = NULL;
    cpu_block hdr = {.magic = MT_CPU_MAGIC};
    if (rounded >= MT_CPU_MMAP_MIN) {
        /* one page for the header in front keeps the data page-aligned */
        const size_t map_bytes = (rounded + MT_CPU_PAGE + MT_CPU_PAGE - 1) / MT_CPU_PAGE * MT_CPU_PAGE;
        void *base = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base != MAP_FAILED) {
            hdr.base = base;
            hdr.map_bytes = map_bytes;
            p = (char *)base + MT_CPU_PAGE;
#ifdef MADV_POPULATE_WRITE
            /* prefault the block writable, 4 MiB pieces over the backend's threads: the kernel
             * still zeroes each page once, but without a trap per page on first touch (on the
             * 2-core VM gpt125m's first iteration ends ~0.2 s sooner: 1.75 s against 1.84-1.98 s
             * median). A kernel without it (< 5.14) answers EINVAL: pages then fault on first touch, as
             * they do with MT_CPU_PREFAULT=0 (what test_act_memory uses to see the pages touched). */
            const size_t piece = (size_t)4 << 20;
            const long n_pieces = (long)((map_bytes + piece - 1) / piece);
            const char *pf = getenv("MT_CPU_PREFAULT"); /* "0": pages fault on first touch instead */
            const long n_do = pf && !strcmp(pf, "0") ? 0 : n_pieces;
#pragma omp parallel for schedule(static) num_threads(mt_cpu_nt(be)) if (n_do > 1)
            for (long c = 0; c < n_do; c++) {
                const size_t lo = (size_t)c * piece, len = map_bytes - lo < piece ? map_bytes - lo : piece;
                (void)madvise((char *)base + lo, len, MADV_POPULATE_WRITE);
            }
#endif
        }
    } else {
        void *base = aligned_alloc(MT_CPU_ALIGN, rounded + MT_CPU_ALIGN);
        if (base) {
            memset(base, 0, rounded + MT_CPU_ALIGN);
            hdr.base = base;
            p = (char *)base + MT_CPU_ALIGN;
        }
    }
    if (!p)
        return mt_errorf(MT_ERR_OOM,
                         "cpu alloc: cannot allocate %zu bytes (%.2f GiB) of host memory; "
                         "reduce the micro batch, sequence length or model size, or add memory",
                         n_bytes, (double)n_bytes / (1024.0 * 1024.0 * 1024.0));
    memcpy(p - MT_CPU_ALIGN, &hdr, sizeof hdr);
    *out = p;
    return MT_OK;
}

static void cpu_free(mt_backend *be, void *ptr) {
    (void)be;
    if (!ptr) return;
    cpu_block hdr;
    memcpy(&hdr, (char *)ptr - MT_CPU_ALIGN, sizeof hdr);
    if (hdr.magic != MT_CPU_MAGIC) return; /* not a block of cpu_alloc (a caller's bug): leave it alone */
    if (hdr.map_bytes)
        munmap(hdr.base, hdr.map_bytes);
    else
        free(hdr.base);
}

static mt_status cpu_memset_zero(mt_backend *be, void *ptr, size_t n_bytes) {
    (void)be;
    if (n_bytes == 0) return MT_OK;
    if (!ptr) return mt_errorf(MT_ERR_INTERNAL, "cpu memset_zero: NULL pointer for %zu bytes", n_bytes);
    /* big buffers (the gradient buffer, every step) are cleared by all threads: one core's
     * memset bandwidth is about half of what the machine has */
    const size_t chunk = (size_t)1 << 20;
    if (n_bytes >= 8 * chunk && mt_cpu_nt(be) > 1) {
        const long n_chunks = (long)((n_bytes + chunk - 1) / chunk);
#pragma omp parallel for schedule(static) num_threads(mt_cpu_nt(be))
        for (long c = 0; c < n_chunks; c++) {
            size_t off = (size_t)c * chunk;
            memset((char *)ptr + off, 0, n_bytes - off < chunk ? n_bytes - off : chunk);
        }
    } else {
        memset(ptr, 0, n_bytes);
    }
    return MT_OK;
}

static mt_status cpu_copy(mt_backend *be, void *dst, const void *src, size_t n_bytes) {
    (void)be;
    if (n_bytes == 0 || dst == src) return MT_OK;
    if (!dst || !src) return mt_errorf(MT_ERR_INTERNAL, "cpu copy: NULL pointer for %zu bytes", n_bytes);
    memcpy(dst, src, n_bytes);
    return MT_OK;
}

static mt_status cpu_sync(mt_backend *be) {
    (void)be;
    return MT_OK;
}

static const struct mt_backend_i cpu_table = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memset_zero = cpu_memset_zero,
    .copy_h2d = cpu_copy,
    .copy_d2h = cpu_copy,
    .copy_d2d = cpu_copy,
    .sync = cpu_sync,
    .matmul_fwd = mt_cpu_matmul_fwd,
    .matmul_bwd = mt_cpu_matmul_bwd,
    .layernorm_fwd = mt_cpu_layernorm_fwd,
    .layernorm_bwd = mt_cpu_layernorm_bwd,
    .rmsnorm_fwd = mt_cpu_rmsnorm_fwd,
    .rmsnorm_bwd = mt_cpu_rmsnorm_bwd,
    .gelu_fwd = mt_cpu_gelu_fwd,
    .gelu_bwd = mt_cpu_gelu_bwd,
    .swiglu_fwd = mt_cpu_swiglu_fwd,
    .swiglu_bwd = mt_cpu_swiglu_bwd,
    .squared_relu_fwd = mt_cpu_squared_relu_fwd,
    .squared_relu_bwd = mt_cpu_squared_relu_bwd,
    .rope = mt_cpu_rope,
    .attention_fwd = mt_cpu_attention_fwd,
    .attention_bwd = mt_cpu_attention_bwd,
    .attention_block_fwd = mt_cpu_attention_block_fwd,
    .attention_block_bwd = mt_cpu_attention_block_bwd,
    .copy_rows = mt_cpu_copy_rows,
    .embedding_fwd = mt_cpu_embedding_fwd,
    .embedding_bwd = mt_cpu_embedding_bwd,
    .xent_fwd_bwd = mt_cpu_xent_fwd_bwd,
    .add = mt_cpu_add,
    .scale = mt_cpu_scale,
    .sum = mt_cpu_sum,
    .adamw = mt_cpu_adamw,
    .cast_f32_to_act = mt_cpu_cast_f32_to_act,
    .xent_vp_max = mt_cpu_xent_vp_max,
    .xent_vp_sumexp = mt_cpu_xent_vp_sumexp,
    .xent_vp_finish = mt_cpu_xent_vp_finish,
    .moe_route = mt_cpu_moe_route,
    .moe_route_bwd = mt_cpu_moe_route_bwd,
    .moe_permute = mt_cpu_moe_permute,
    .moe_unpermute = mt_cpu_moe_unpermute,
    .moe_unpermute_bwd = mt_cpu_moe_unpermute_bwd,
    .moe_gate_fwd = mt_cpu_moe_gate_fwd,
    .moe_gate_bwd = mt_cpu_moe_gate_bwd,
    .moe_gate_logit_bwd = mt_cpu_moe_gate_logit_bwd,
    .add_layernorm_fwd = mt_cpu_add_layernorm_fwd,
    .add_rmsnorm_fwd = mt_cpu_add_rmsnorm_fwd,
    .matmul_gelu_fwd = mt_cpu_matmul_gelu_fwd,
    .matmul_dgelu_bwd = mt_cpu_matmul_dgelu_bwd,
    .init_normal = mt_cpu_init_normal,
};

mt_status mt_backend_cpu_create(mt_backend *be, int n_threads) {
    if (!be) return mt_errorf(MT_ERR_INTERNAL, "mt_backend_cpu_create: NULL backend");
    memset(be, 0, sizeof *be);
    if (n_threads < 0)
        return mt_errorf(MT_ERR_CONFIG, "cpu backend: n_threads = %d; use 0 (all cores) or a positive count",
                         n_threads);
    /* the cores this process may run on (taskset / cgroup pinning), else all */
    cpu_set_t set;
    long n_cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    if (n_cpus <= 0) n_cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (n_cpus <= 0) n_cpus = 1;
    if (n_threads == 0) n_threads = (int)n_cpus;
    mt_status st = mt_cpu_threads_probe(n_threads, (int)n_cpus);
    if (st != MT_OK) return st;
    mt_cpu_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return mt_errorf(MT_ERR_OOM, "cpu backend: cannot allocate its %zu-byte context", sizeof *ctx);
    ctx->n_threads = n_threads;
    snprintf(ctx->device_name, sizeof ctx->device_name, "cpu (%d thread%s)", n_threads, n_threads == 1 ? "" : "s");
    /* one thread pool: OpenMP. OpenBLAS runs single-threaded inside each OpenMP thread (its
     * own pool would spin against OpenMP's on the same cores); GEMMs are sliced in
     * mt_cpu_sgemm. */
    openblas_set_num_threads(1);
    omp_set_num_threads(n_threads);
    be->i = &cpu_table;
    be->ctx = ctx;
    be->act = MT_F32;
    be->device_name = ctx->device_name;
    be->peak_tflops = 0.0;
    be->host_memory = 1;
    be->device = -1;
    be->op_timers = NULL;
    return MT_OK;
}
