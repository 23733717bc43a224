/* bench_comm_net.c — allreduce bus bandwidth of whatever communicator the factory makes for the
 * ranks it is started with (shared memory when they share a node, Gloo across nodes), for
 * 1 KiB..max_bytes, best of 5 timed loops; nccl-tests' definition (algbw = bytes / time, busbw =
 * algbw * 2 (n-1) / n). One process per rank, bootstrapped like mtrain (PMIx or env://: RANK,
 * WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, MT_STORE_SECRET); rank 0
 * prints the table. test/bench_multinode.sh runs it on namespace nodes.
 * Usage: bench_comm_net [max_bytes=64M] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "parallel/comm_factory.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    size_t max_bytes = (size_t)64 << 20;
    if (argc > 1) {
        char *end;
        max_bytes = strtoull(argv[1], &end, 0);
        if (*end == 'K' || *end == 'k') max_bytes <<= 10;
        if (*end == 'M' || *end == 'm') max_bytes <<= 20;
    }
    mt_bootstrap bs;
    mt_comm *c = NULL;
    if (mt_bootstrap_init(&bs, 60) != MT_OK || mt_comm_world_create(MT_COMM_SHM, &bs, NULL, 60, &c) != MT_OK || !c) {
        fprintf(stderr, "bench_comm_net: %s\n", c ? "one rank: nothing to measure" : mt_last_error());
        return 1;
    }
    float *buf = calloc(max_bytes, 1);
    if (!buf) return 1;
    if (c->rank == 0) {
        printf("allreduce on %d ranks, communicator %s\n", c->size, c->i->name);
        printf("%12s %12s %12s %12s\n", "bytes", "time_us", "algbw_GB/s", "busbw_GB/s");
    }
    for (size_t b = 1024; b <= max_bytes; b *= 4) {
        size_t n = b / 4;
        int iters = (int)(2 + ((size_t)16 << 20) / b);
        if (iters > 100) iters = 100;
        double best = 1e30;
        if (c->i->allreduce(c, buf, buf, n, MT_F32, MT_RED_SUM) != MT_OK) goto failed; /* warm-up */
        for (int rep = 0; rep < 5; rep++) { /* best of 5: the machine may be shared */
            if (c->i->barrier(c) != MT_OK) goto failed;
            double t0 = now_s();
            for (int i = 0; i < iters; i++)
                if (c->i->allreduce(c, buf, buf, n, MT_F32, MT_RED_SUM) != MT_OK) goto failed;
            double t = (now_s() - t0) / iters;
            if (t < best) best = t;
        }
        double alg = (double)b / best / 1e9;
        if (c->rank == 0) printf("%12zu %12.1f %12.3f %12.3f\n", b, best * 1e6, alg, alg * 2.0 * (c->size - 1) / c->size);
        fflush(stdout);
    }
    c->i->destroy(c);
    bs.finalize(&bs);
    free(buf);
    return 0;
failed:
    fprintf(stderr, "bench_comm_net rank %d: %s\n", c->rank, mt_last_error());
    return 1;
}
