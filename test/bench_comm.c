/* bench_comm.c — allreduce bus bandwidth of the shared-memory communicator for 1 KiB..256 MiB
 * (nccl-tests' definition: algbw = bytes / time, busbw = algbw * 2 (n-1) / n) beside a plain
 * single-process memcpy bandwidth, for a given number of forked ranks; best of 5 timed loops.
 * Not built by `make` (no main in the library, not a test); build and run:
 *   make build/libmtrain.a && gcc -std=c11 -D_GNU_SOURCE -O2 -I. test/bench_comm.c build/libmtrain.a \
 *       -o build/bench_comm -fopenmp -lpthread -lm && build/bench_comm 2 && build/bench_comm 4
 * Usage: bench_comm [n_ranks=2] [max_bytes=256M] [op=allreduce|reduce_scatter|allgather|broadcast|sendrecv] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "parallel/comm_shm.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double memcpy_gbps(size_t n_bytes) {
    char *a = malloc(n_bytes), *b = malloc(n_bytes);
    memset(a, 1, n_bytes);
    memset(b, 2, n_bytes);
    int iters = (int)(1 + (1u << 30) / n_bytes);
    if (iters > 1000) iters = 1000;
    double t0 = now_s();
    for (int i = 0; i < iters; i++) memcpy(i % 2 ? a : b, i % 2 ? b : a, n_bytes);
    double t = (now_s() - t0) / iters;
    free(a);
    free(b);
    return (double)n_bytes / t / 1e9;
}

static mt_status run_op(mt_comm *c, const char *op, float *buf, float *out, size_t n) {
    if (!strcmp(op, "allreduce")) return c->i->allreduce(c, buf, out, n, MT_F32, MT_RED_SUM);
    if (!strcmp(op, "reduce_scatter")) return c->i->reduce_scatter(c, buf, out, n / (size_t)c->size, MT_F32, MT_RED_SUM);
    if (!strcmp(op, "allgather")) return c->i->allgather(c, buf, out, n / (size_t)c->size, MT_F32);
    if (!strcmp(op, "broadcast")) return c->i->broadcast(c, buf, n, MT_F32, 0);
    /* sendrecv: ring exchange with both neighbours, grouped */
    int next = (c->rank + 1) % c->size, prev = (c->rank + c->size - 1) % c->size;
    c->i->group_start(c);
    c->i->send(c, buf, n, MT_F32, next);
    c->i->recv(c, out, n, MT_F32, prev);
    return c->i->group_end(c);
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 2;
    size_t max_bytes = (size_t)256 << 20;
    if (argc > 2) {
        char *end;
        max_bytes = strtoull(argv[2], &end, 0);
        if (*end == 'K' || *end == 'k') max_bytes <<= 10;
        if (*end == 'M' || *end == 'm') max_bytes <<= 20;
    }
    const char *op = argc > 3 ? argv[3] : "allreduce";
    if (n < 1 || n > 64) return 2;
    double *times = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    mt_comm_shm_local *local;
    if (mt_comm_shm_local_create(n, &local) != MT_OK) return 2;
    printf("%s on %d ranks (%s); memcpy = one process copying the same bytes\n", op, n,
           getenv("MT_COMM_SHM_SPIN") ? getenv("MT_COMM_SHM_SPIN") : "spin auto");
    printf("%12s %12s %12s %12s %12s\n", "bytes", "time_us", "algbw_GB/s", "busbw_GB/s", "memcpy_GB/s");
    fflush(stdout);
    for (int r = 0; r < n; r++) {
        if (fork() == 0) {
            mt_comm *c;
            if (mt_comm_shm_create_local(local, r, 60, &c) != MT_OK) {
                fprintf(stderr, "rank %d: %s\n", r, mt_last_error());
                _exit(1);
            }
            float *buf = malloc(max_bytes), *out = malloc(max_bytes);
            memset(buf, 0, max_bytes);
            memset(out, 0, max_bytes);
            int k = 0;
            for (size_t b = 1024; b <= max_bytes; b *= 4, k++) {
                size_t cnt = b / 4;
                int iters = (int)(2 + ((size_t)16 << 20) / b);
                if (iters > 200) iters = 200;
                run_op(c, op, buf, out, cnt); /* warm-up */
                double best = 1e30;
                for (int rep = 0; rep < 5; rep++) { /* best of 5: the machine may be shared */
                    c->i->barrier(c);
                    double t0 = now_s();
                    for (int i = 0; i < iters; i++)
                        if (run_op(c, op, buf, out, cnt) != MT_OK) {
                            fprintf(stderr, "rank %d: %s\n", r, mt_last_error());
                            _exit(1);
                        }
                    double t = (now_s() - t0) / iters;
                    if (t < best) best = t;
                }
                if (r == 0) times[k] = best;
            }
            c->i->destroy(c);
            _exit(0);
        }
    }
    int ok = 1;
    for (int r = 0; r < n; r++) {
        int status;
        wait(&status);
        ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    int k = 0;
    for (size_t b = 1024; b <= max_bytes; b *= 4, k++) {
        double alg = (double)b / times[k] / 1e9, factor = 1;
        if (!strcmp(op, "allreduce")) factor = 2.0 * (n - 1) / n;
        if (!strcmp(op, "reduce_scatter") || !strcmp(op, "allgather")) factor = (double)(n - 1) / n;
        printf("%12zu %12.1f %12.2f %12.2f %12.2f\n", b, times[k] * 1e6, alg, alg * factor, memcpy_gbps(b));
    }
    mt_comm_shm_local_free(local);
    return ok ? 0 : 1;
}
