/* plan_probe.c — `mtrain plan --probe [FILE]`: measures this machine through the CPU backend and the
 * shared-memory communicator and writes a device profile (plan/plan_device_file.c) that
 * `mtrain plan --device FILE` uses instead of a table device. Each figure is the median of a few
 * repetitions (on a shared machine the runs it predicts see the same contention), at 1 thread and
 * at all cores, each repetition at least 30 ms: the backend's matmul_fwd over a few shapes (FLOP/s), its
 * add op on 32 MiB (bytes moved: read 2, write 1, per second), one add on 64 floats (the fixed cost of
 * an op call), attention fwd + bwd (Megatron's FLOPs per second), the GEMMs and the attention on
 * operands rotating through 96 MiB (out of cache, as a training step meets them); the same rates per
 * rank while 2 forked ranks measure at once, every repetition of every item started together (what
 * each rank of a multi-rank run gets); and an allreduce between the 2 ranks, each call after ~0.2 ms of
 * compute: 4 bytes (latency) and 8 MiB (bus bandwidth, nccl-tests' 2(n-1)/n), and 4 bytes after ~5 ms
 * of GEMMs on both ranks (a tensor-parallel collective's latency, the wait for the slower rank
 * included). About 5-7 s on an idle 2-core machine. */
#include "plan/plan_probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/backend.h"
#include "plan/plan.h"
#include "parallel/comm_shm.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const int k_shapes[][3] = { { 256, 128, 128 }, { 512, 384, 128 }, { 1024, 768, 768 }, { 256, 3072, 768 },
                                   { 2048, 2304, 768 } };
#define N_SHAPES ((int)(sizeof k_shapes / sizeof k_shapes[0]))

/* The 2-rank phase: both forked ranks run every measured item at the same time. Before each repetition
 * both pass a barrier, and both run rank 0's count of calls per repetition, so neither runs part of an
 * item alone while the other waits (comm_shm's waits sleep: a rank that ran ahead would otherwise leave
 * the other a core to itself, and the 2-rank figures would be those of one rank alone). NULL: 1 process. */
typedef struct {
    mt_comm *c;
    int *inner; /* shared: rank 0's calls per repetition of the current item */
    int rank;
} probe_sync;

/* Median seconds per call of `reps` runs of f(args), each run at least REP_S long (longer than a
 * scheduler time slice: on a shared machine a long run gets its fair share of a core, a burst of a
 * few ms may get a whole one), and the median, not the best, of them (the runs it will predict see
 * the same contention). */
#define REP_S 0.03
typedef mt_status (*op_fn)(mt_backend *be, void *args);
static double median_time(mt_backend *be, op_fn f, void *args, int reps, const probe_sync *sy) {
    double t[16];
    if (reps > 16) reps = 16;
    if (sy) sy->c->i->barrier(sy->c);
    f(be, args); /* warm-up: a first call of a small op ran 2-3x slower than the next, sizing repetitions short */
    be->i->sync(be);
    double t0 = now_s();
    f(be, args);
    be->i->sync(be);
    const double once = now_s() - t0;
    int inner = once > 0 && once < REP_S ? (int)(REP_S / once) + 1 : 1;
    if (sy) {
        if (sy->rank == 0) *sy->inner = inner;
        sy->c->i->barrier(sy->c);
        inner = *sy->inner; /* rank 0 writes the next item's count only after the barriers below */
    }
    for (int r = 0; r < reps; r++) {
        if (sy) sy->c->i->barrier(sy->c);
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

/* Operands that rotate through the probe's three 32 MiB buffers: call k of an op reads and writes
 * slot k mod (32 MiB / operand size) of each buffer, so every call finds its operands in memory,
 * not in the cache its previous call left them in. The trainer's GEMMs and attention meet their
 * operands that way: a layer's inputs were written by earlier ops and its saved activations are
 * read back in the backward after every other layer ran (the plan's activation figure, tens of MiB
 * per rank even for gpt-tiny, against the L2 of one core, ~1 MiB, and a shared L3 of tens of MiB).
 * Measured on the project's 2-core EPYC (OpenBLAS, 1 thread): 1024 x 128 x 128 ran at ~100 GFLOP/s
 * on the same buffers every call and ~78 on rotating ones, 1024 x 384 x 128 at ~100 and ~86,
 * 1024 x 768 x 768 (compute-bound) at 99 and 98; a gpt-tiny step's GEMMs, timed op by op in a
 * training run, added up to the rotating figure (59 ms predicted from it, 59.7 measured, 52 from
 * the fixed buffers). */
typedef struct {
    float *a, *b, *c;
    size_t cap; /* floats per buffer */
    size_t k;   /* calls so far */
} rot_bufs;
static float *rot_slot(float *base, size_t cap, size_t n, size_t k) {
    const size_t slots = n > 0 && n <= cap ? cap / n : 1;
    return base + (k % slots) * n;
}

typedef struct {
    rot_bufs *r;
    int M, N, K;
} mm_rot;
static mt_status call_mm(mt_backend *be, void *p) {
    mm_rot *m = p;
    rot_bufs *r = m->r;
    const size_t k = r->k++;
    mt_matmul_fwd_args a = { rot_slot(r->c, r->cap, (size_t)m->M * m->N, k),
                             rot_slot(r->a, r->cap, (size_t)m->M * m->K, k),
                             rot_slot(r->b, r->cap, (size_t)m->N * m->K, k), NULL, m->M, m->N, m->K };
    return be->i->matmul_fwd(be, &a);
}
static mt_status call_add(mt_backend *be, void *a) { return be->i->add(be, a); }
typedef struct {
    rot_bufs *r;
    float *lse, *delta;
    int B, T, H, D;
} attn_rot;
/* forward then backward of one (B, T, H, D) causal attention: q k v in buffer a, its gradient in b,
 * the output and its gradient in the two halves of c */
static mt_status call_attn(mt_backend *be, void *p) {
    attn_rot *at = p;
    rot_bufs *r = at->r;
    const size_t k = r->k++, n_qkv = (size_t)at->B * at->T * 3 * at->H * at->D, n_out = n_qkv / 3;
    float *qkv = rot_slot(r->a, r->cap, n_qkv, k), *dqkv = rot_slot(r->b, r->cap, n_qkv, k);
    float *out = rot_slot(r->c, r->cap / 2, n_out, k), *dout = rot_slot(r->c + r->cap / 2, r->cap / 2, n_out, k);
    mt_attention_fwd_args f = { out, at->lse, qkv, at->B, at->T, at->H, at->H, at->D, 0 };
    mt_attention_bwd_args b = { dqkv, at->delta, dout, qkv, out, at->lse, at->B, at->T, at->H, at->H, at->D, 0 };
    mt_status st = be->i->attention_fwd(be, &f);
    return st == MT_OK ? be->i->attention_bwd(be, &b) : st;
}

/* slot 0: 1 thread, 1: all cores, 2: one of 2 ranks running at once (threads = cores / 2, sy set). */
static mt_status probe_backend(int threads, int slot, mt_device_probe *pr, const probe_sync *sy) {
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
    for (size_t i = 0; i < big; i++) a[i] = b[i] = c[i] = 0.001f * (float)(i % 97); /* real pages, real numbers */
    rot_bufs rb = { a, b, c, big, 0 };
    for (int i = 0; i < N_SHAPES; i++) {
        mm_rot m = { &rb, k_shapes[i][0], k_shapes[i][1], k_shapes[i][2] };
        const double fl = 2.0 * m.M * m.N * m.K;
        const double t = median_time(&be, call_mm, &m, 5, sy);
        pr->gemm_mnk[i][0] = m.M, pr->gemm_mnk[i][1] = m.N, pr->gemm_mnk[i][2] = m.K;
        (slot == 2 ? pr->gemm_flops_2r : slot ? pr->gemm_flops_nt : pr->gemm_flops_1t)[i] = fl / t;
    }
    pr->n_gemm = N_SHAPES;
    mt_add_args ad = { c, a, b, big };
    const double ts = median_time(&be, call_add, &ad, 5, sy);
    *(slot == 2 ? &pr->stream_gbs_2r : slot ? &pr->stream_gbs_nt : &pr->stream_gbs_1t) = 3.0 * 4.0 * big / ts / 1e9;
    if (!slot) {
        mt_add_args small = { c, a, b, 64 };
        pr->op_overhead_s = median_time(&be, call_add, &small, 5, NULL);
    }
    /* attention: B 2, T 128, H 4, D 32 */
    attn_rot ar = { &rb, calloc((size_t)2 * 4 * 128, 4), calloc((size_t)2 * 4 * 128, 4), 2, 128, 4, 32 };
    const double ta = ar.lse && ar.delta ? median_time(&be, call_attn, &ar, 5, sy) : 0.0;
    double *attn = slot == 2 ? &pr->attn_flops_2r : slot ? &pr->attn_flops_nt : &pr->attn_flops_1t;
    *attn = ta > 0 ? 3.0 * 4.0 * ar.B * ar.T * ar.T * (double)ar.H * ar.D / ta : 0.0;
    free(ar.lse), free(ar.delta), free(a), free(b), free(c);
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
            const probe_sync sy = { c, (int *)(times + 9), r };
            if (probe_backend(threads_2r, 2, &mine, &sy) != MT_OK) _exit(1);
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
    mt_status st = probe_backend(1, 0, pr, NULL);
    if (st == MT_OK) st = probe_backend(pr->threads, 1, pr, NULL);
    if (st == MT_OK) st = probe_comm(pr);
    if (st != MT_OK) return st;
    out->probed = 1;
    return path ? mt_device_profile_save(path, out) : MT_OK;
}
