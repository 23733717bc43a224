/* plan_probe.c — `mtrain plan --probe [FILE]`: measures this machine through the CPU backend and the
 * shared-memory communicator and writes a device profile (core/plan/plan_device_file.c) that
 * `mtrain plan --device FILE` uses instead of a table device. Each figure is the median of a few
 * repetitions (on a shared machine the runs it predicts see the same contention), at 1 thread and
 * at all cores, each repetition at least 30 ms: the backend's matmul_fwd over a few shapes (FLOP/s), its add op on 32 MiB (bytes
 * moved: read 2, write 1, per second), one add on 64 floats (the fixed cost of an op call),
 * attention fwd + bwd (Megatron's FLOPs per second); the same rates per rank while 2 forked ranks
 * measure at once (what each rank of a multi-rank run gets); and an allreduce between the 2 ranks,
 * each call after ~0.2 ms of compute: 4 bytes (latency) and 8 MiB (bus bandwidth, nccl-tests'
 * 2(n-1)/n), and 4 bytes after ~5 ms of GEMMs on both ranks (a tensor-parallel collective's latency,
 * the wait for the slower rank included). About 6 s on an idle 2-core machine. */
#include "cmd/plan_probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/backend.h"
#include "core/plan/plan.h"
#include "parallel/comm_shm.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const int k_shapes[][3] = { { 256, 128, 128 }, { 512, 384, 128 }, { 1024, 768, 768 }, { 256, 3072, 768 },
                                   { 2048, 2304, 768 } };
#define N_SHAPES ((int)(sizeof k_shapes / sizeof k_shapes[0]))

/* Median seconds per call of `reps` runs of f(args), each run at least REP_S long (longer than a
 * scheduler time slice: on a shared machine a long run gets its fair share of a core, a burst of a
 * few ms may get a whole one), and the median, not the best, of them (the runs it will predict see
 * the same contention). */
#define REP_S 0.03
typedef mt_status (*op_fn)(mt_backend *be, void *args);
static double median_time(mt_backend *be, op_fn f, void *args, int reps) {
    double t[16];
    if (reps > 16) reps = 16;
    double t0 = now_s();
    f(be, args);
    be->i->sync(be);
    const double once = now_s() - t0;
    const int inner = once > 0 && once < REP_S ? (int)(REP_S / once) + 1 : 1;
    for (int r = 0; r < reps; r++) {
        t0 = now_s();
        for (int i = 0; i < inner; i++) f(be, args);
        be->i->sync(be);
        t[r] = (now_s() - t0) / inner;
    }
    for (int i = 1; i < reps; i++) /* insertion sort */
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1], t[j - 1] = x;
        }
    return t[reps / 2];
}
static mt_status call_mm(mt_backend *be, void *a) { return be->i->matmul_fwd(be, a); }
static mt_status call_add(mt_backend *be, void *a) { return be->i->add(be, a); }
typedef struct {
    mt_attention_fwd_args f;
    mt_attention_bwd_args b;
} attn_pair;
static mt_status call_attn(mt_backend *be, void *a) {
    attn_pair *p = a;
    mt_status st = be->i->attention_fwd(be, &p->f);
    return st == MT_OK ? be->i->attention_bwd(be, &p->b) : st;
}

/* slot 0: 1 thread, 1: all cores, 2: one of 2 ranks running at once (threads = cores / 2). */
static mt_status probe_backend(int threads, int slot, mt_device_probe *pr) {
    mt_backend be;
    mt_status st = mt_backend_cpu_create(&be, threads);
    if (st != MT_OK) return st;
    const size_t big = (size_t)8 << 20; /* floats per buffer: 32 MiB */
    float *a = calloc(big, 4), *b = calloc(big, 4), *c = calloc(big, 4);
    if (!a || !b || !c) {
        free(a), free(b), free(c);
        mt_backend_destroy(&be);
        return mt_errorf(MT_ERR_OOM, "plan --probe: out of memory for 96 MiB of buffers");
    }
    for (size_t i = 0; i < big; i++) a[i] = b[i] = 0.001f * (float)(i % 97); /* real pages, real numbers */
    for (int i = 0; i < N_SHAPES; i++) {
        const int M = k_shapes[i][0], N = k_shapes[i][1], K = k_shapes[i][2];
        mt_matmul_fwd_args m = { c, a, b, NULL, M, N, K };
        const double fl = 2.0 * M * N * K;
        const double t = median_time(&be, call_mm, &m, 5);
        pr->gemm_mnk[i][0] = M, pr->gemm_mnk[i][1] = N, pr->gemm_mnk[i][2] = K;
        (slot == 2 ? pr->gemm_flops_2r : slot ? pr->gemm_flops_nt : pr->gemm_flops_1t)[i] = fl / t;
    }
    pr->n_gemm = N_SHAPES;
    mt_add_args ad = { c, a, b, big };
    const double ts = median_time(&be, call_add, &ad, 5);
    *(slot == 2 ? &pr->stream_gbs_2r : slot ? &pr->stream_gbs_nt : &pr->stream_gbs_1t) = 3.0 * 4.0 * big / ts / 1e9;
    if (!slot) {
        mt_add_args small = { c, a, b, 64 };
        pr->op_overhead_s = median_time(&be, call_add, &small, 5);
    }
    /* attention: B 2, T 128, H 4, D 32 (qkv (B, T, 3 H D) fits the buffers) */
    const int B = 2, T = 128, H = 4, D = 32;
    float *lse = calloc((size_t)B * H * T, 4), *delta = calloc((size_t)B * H * T, 4);
    attn_pair ap = { { c, lse, a, B, T, H, H, D }, { b + big / 2, delta, a + big / 2, a, c, lse, B, T, H, H, D } };
    const double ta = lse && delta ? median_time(&be, call_attn, &ap, 5) : 0.0;
    double *attn = slot == 2 ? &pr->attn_flops_2r : slot ? &pr->attn_flops_nt : &pr->attn_flops_1t;
    *attn = ta > 0 ? 3.0 * 4.0 * B * T * T * (double)H * D / ta : 0.0;
    free(lse), free(delta), free(a), free(b), free(c);
    mt_backend_destroy(&be);
    return MT_OK;
}

/* 2 forked ranks: allreduce of 4 bytes and of 8 MiB; times[0], times[1] from rank 0. */
static mt_status probe_comm(mt_device_probe *pr) {
    double *times = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    mt_device_probe *shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (times == MAP_FAILED || shared == MAP_FAILED) return mt_errorf(MT_ERR_OOM, "plan --probe: mmap failed");
    *shared = *pr;
    const int threads_2r = pr->threads / 2 > 0 ? pr->threads / 2 : 1;
    mt_comm_shm_local *local;
    mt_status st = mt_comm_shm_local_create(2, &local);
    if (st != MT_OK) return st;
    const size_t n_big = (size_t)2 << 20;
    fflush(NULL);
    for (int r = 0; r < 2; r++) {
        if (fork() == 0) {
            mt_comm *c;
            if (mt_comm_shm_create_local(local, r, 30, &c) != MT_OK) _exit(1);
            /* both ranks measure the backend at once (rank 0's figures are kept) */
            mt_device_probe mine = *shared;
            c->i->barrier(c);
            if (probe_backend(threads_2r, 2, &mine) != MT_OK) _exit(1);
            if (r == 0) *shared = mine;
            float *buf = calloc(n_big, 4), *out = calloc(n_big, 4);
            if (!buf || !out) _exit(1);
            const size_t sizes[2] = { 1, n_big };
            const int iters[2] = { 50, 8 };
            for (int k = 0; k < 2; k++) {
                /* as in training, each collective follows some compute (~0.2 ms of arithmetic on the
                 * rank's own data): on a loaded machine a peer that computed may have lost its core,
                 * and that wait is part of what a collective costs */
                double t[64];
                c->i->allreduce(c, buf, out, sizes[k], MT_F32, MT_RED_SUM);
                c->i->barrier(c);
                for (int i = 0; i < iters[k]; i++) {
                    volatile float acc = 0;
                    for (int j = 0; j < 100000; j++) acc += buf[j % 1024] * 1.0001f;
                    double t0 = now_s();
                    if (c->i->allreduce(c, buf, out, sizes[k], MT_F32, MT_RED_SUM) != MT_OK) _exit(1);
                    t[i] = now_s() - t0;
                }
                for (int i = 1; i < iters[k]; i++) /* the median */
                    for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
                        double x = t[j];
                        t[j] = t[j - 1], t[j - 1] = x;
                    }
                if (r == 0) times[k] = t[iters[k] / 2];
            }
            /* a collective as a tensor-parallel layer meets it: both ranks first run ~5 ms of the backend's
             * GEMMs (longer than a scheduler time slice, as a layer's forward or backward is), then a 4-byte
             * allreduce; on a machine with more runnable threads than cores the ranks drift apart during the
             * phase and the allreduce waits for the slower one (on this project's loaded 2-core machine about
             * one scheduler time slice, ~3 ms). The median of 24, as the bench compares median steps. */
            {
                mt_backend be;
                if (mt_backend_cpu_create(&be, threads_2r) != MT_OK) _exit(1);
                enum { PM = 256, PN = 768, PK = 768, PHASES = 24 };
                float *pa = calloc((size_t)PM * PK, 4), *pw = calloc((size_t)PN * PK, 4), *po = calloc((size_t)PM * PN, 4);
                if (!pa || !pw || !po) _exit(1);
                mt_matmul_fwd_args mm = { po, pa, pw, NULL, PM, PN, PK };
                be.i->matmul_fwd(&be, &mm); /* warm-up: first touch of the buffers */
                be.i->sync(&be);
                double t0 = now_s();
                be.i->matmul_fwd(&be, &mm);
                be.i->sync(&be);
                const double once = now_s() - t0;
                /* both ranks run the same number of GEMMs (rank 0's count), as tp ranks run the same layer */
                int *n_calls = (int *)(times + 8);
                if (r == 0) *n_calls = once > 0 && once < 5e-3 ? (int)(5e-3 / once) + 1 : 1;
                c->i->barrier(c);
                const int calls = *n_calls;
                double tw[PHASES];
                for (int i = 0; i < PHASES; i++) {
                    for (int j = 0; j < calls; j++) be.i->matmul_fwd(&be, &mm);
                    be.i->sync(&be);
                    t0 = now_s();
                    if (c->i->allreduce(c, buf, out, 1, MT_F32, MT_RED_SUM) != MT_OK) _exit(1);
                    tw[i] = now_s() - t0;
                }
                for (int i = 1; i < PHASES; i++) /* the median */
                    for (int j = i; j > 0 && tw[j] < tw[j - 1]; j--) {
                        double x = tw[j];
                        tw[j] = tw[j - 1], tw[j - 1] = x;
                    }
                if (r == 0) times[2] = tw[PHASES / 2];
                free(pa), free(pw), free(po);
                mt_backend_destroy(&be);
            }
            c->i->destroy(c);
            _exit(0);
        }
    }
    int ok = 1;
    for (int r = 0; r < 2; r++) {
        int status;
        if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) ok = 0;
    }
    mt_comm_shm_local_free(local);
    if (ok) {
        memcpy(pr->gemm_flops_2r, shared->gemm_flops_2r, sizeof pr->gemm_flops_2r);
        pr->stream_gbs_2r = shared->stream_gbs_2r;
        pr->attn_flops_2r = shared->attn_flops_2r;
        pr->comm_alpha_s = times[0];
        pr->coll_alpha_s = times[2] > times[0] ? times[2] : times[0];
        /* bus bytes of a 2-rank allreduce: 2 (n-1)/n of the buffer = the buffer */
        pr->comm_gbs = (double)n_big * 4.0 / (times[1] > times[0] ? times[1] - times[0] : times[1]) / 1e9;
    }
    munmap(times, 4096);
    munmap(shared, sizeof *shared);
    return ok ? MT_OK : mt_errorf(MT_ERR_PEER, "plan --probe: the 2-rank shared-memory allreduce failed");
}

mt_status mt_plan_probe(const char *path, mt_gpu_spec *out) {
    mt_gpu_host(out, 0.0);
    mt_device_probe *pr = &out->probe;
    memset(pr, 0, sizeof *pr);
    pr->threads = out->gpus_per_node > 0 ? out->gpus_per_node : 1;
    mt_status st = probe_backend(1, 0, pr);
    if (st == MT_OK) st = probe_backend(pr->threads, 1, pr);
    if (st == MT_OK) st = probe_comm(pr);
    if (st != MT_OK) return st;
    out->probed = 1;
    return path ? mt_device_profile_save(path, out) : MT_OK;
}
