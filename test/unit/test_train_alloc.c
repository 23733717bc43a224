/* test_train_alloc.c — the training loop allocates nothing: malloc, calloc, realloc and the
 * aligned allocators of this process (the program's and every library's: OpenBLAS, libgomp,
 * libpmix, the C library's own) are counted while mt_train runs iterations 3 .. N, and the count
 * must be 0. The loop logs every iteration (iteration line + JSON metrics), runs validation every
 * 4 iterations and, in the multi-rank layouts, every collective of gradient sync, tensor
 * parallelism and the pipeline schedule, so all of them are inside the counted window.
 * Layouts: serial (in this process), dp=2 with the distributed optimizer, tp=2 with sequence
 * parallelism, pp=2 (forked ranks over the shared-memory communicator); then serial, dp=2 and pp=2
 * again with logging.timing_level 2 (the timers' probes and log block), dp=2 with overlapped
 * gradient reduction and parameter gather (a communication thread), serial and pp=2 also with
 * the profiler recording iterations 4..6 and writing its trace after 6. Iterations 1-2 are not
 * counted: first-use allocations (stdio buffers, time-zone data) happen there, once.
 * Counting is by symbol interposition: this executable defines malloc & co. and forwards to the C
 * library's __libc_* entry points. The dataset is written by the test (Megatron .bin/.idx).
 * One allocator is counted apart and reported, not failed: libgomp's. libgomp allocates (and
 * frees) a team descriptor for every parallel region that runs on ONE thread (team.c: teams of
 * more threads are cached in the pool, one-thread teams are freed at the region's end), and the
 * CPU backend's ops enter `omp parallel for ... if (work >= MT_CPU_PAR_MIN)` regions, which run
 * on one thread for small ops or a one-thread backend. Those are runtime bookkeeping of the
 * OpenMP implementation, not mtrain's; every other allocation, from any library, fails the test.
 * (Skipping OpenMP for one-thread work in core/cpu would remove them too.) */
#include <dlfcn.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/backend.h"
#include "core/data/indexed.h"
#include "core/recipe/recipe.h"
#include "parallel/comm_shm.h"
#include "parallel/parallel_state.h"
#include "test/test.h"
#include "train/train.h"

/* ---- counting allocator ---- */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static atomic_int g_counting;
static atomic_long g_allocs, g_gomp_allocs;
static _Thread_local int g_inside; /* dladdr may allocate on its first call */

/* ra: the allocator's caller */
static void count(void *ra) {
    if (!atomic_load_explicit(&g_counting, memory_order_relaxed) || g_inside) return;
    g_inside = 1;
    Dl_info di;
    if (dladdr(ra, &di) && di.dli_fname && strstr(di.dli_fname, "libgomp"))
        atomic_fetch_add(&g_gomp_allocs, 1);
    else
        atomic_fetch_add(&g_allocs, 1);
    g_inside = 0;
}
void *malloc(size_t n) {
    count(__builtin_return_address(0));
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b) {
    count(__builtin_return_address(0));
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n) {
    count(__builtin_return_address(0));
    return __libc_realloc(p, n);
}
void free(void *p) { __libc_free(p); }
int posix_memalign(void **out, size_t align, size_t n) {
    count(__builtin_return_address(0));
    void *p = __libc_memalign(align, n);
    if (!p) return 12; /* ENOMEM */
    *out = p;
    return 0;
}
void *aligned_alloc(size_t align, size_t n) {
    count(__builtin_return_address(0));
    return __libc_memalign(align, n);
}
void *memalign(size_t align, size_t n) {
    count(__builtin_return_address(0));
    return __libc_memalign(align, n);
}

/* ---- the run ---- */
enum { ITERS = 10, FIRST_COUNTED = 3 };
static char g_dir[] = "/tmp/mt_test_alloc_XXXXXX";

typedef struct {
    long allocs[4];   /* per rank: allocations in the counted window */
    long gomp[4];     /* per rank: libgomp's one-thread team descriptors in the window */
    int iters[4];     /* iterations the hook saw */
} shared_t;
static shared_t *g_sh;
static int g_rank;

static mt_status on_iteration(void *ctx, int64_t it) {
    (void)ctx;
    if (it == FIRST_COUNTED - 1) { /* the window starts after iteration 2 */
        atomic_store(&g_allocs, 0);
        atomic_store(&g_gomp_allocs, 0);
        atomic_store(&g_counting, 1);
    }
    if (it == ITERS) {
        atomic_store(&g_counting, 0);
        g_sh->allocs[g_rank] = atomic_load(&g_allocs);
        g_sh->gomp[g_rank] = atomic_load(&g_gomp_allocs);
    }
    g_sh->iters[g_rank] = (int)it;
    return MT_OK;
}

static int make_dataset(const char *prefix) {
    mt_indexed_writer w;
    if (mt_indexed_writer_open(&w, prefix, MT_INDEXED_DTYPE_U16) != MT_OK) return 0;
    int32_t doc[300];
    uint64_t x = 99;
    for (int d = 0; d < 400; d++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int n = 20 + (int)((x >> 33) % 280);
        for (int i = 0; i < n; i++) doc[i] = (int32_t)(((x >> 20) + (uint64_t)i * 7) % 256);
        if (mt_indexed_writer_add_document(&w, doc, n) != MT_OK) return 0;
    }
    return mt_indexed_writer_finish(&w) == MT_OK;
}

static int load_recipe(mt_recipe *r, int world, const char *const *sets) {
    char path[600], metrics[600], cache[600];
    snprintf(path, sizeof path, "%s/data", g_dir);
    snprintf(metrics, sizeof metrics, "%s/metrics-%d.jsonl", g_dir, g_rank);
    snprintf(cache, sizeof cache, "%s/cache", g_dir);
    mt_recipe_defaults(r);
    if (mt_recipe_load_file(r, "configs/gpt-tiny.yaml") != MT_OK) return 0;
    const char *base[][2] = {{"data.path", path},      {"data.cache_path", cache},   {"training.iters", "10"},
                             {"logging.interval", "1"}, {"logging.eval_interval", "4"}, {"logging.eval_iters", "1"},
                             {"logging.metrics", metrics}, {"model.seq_length", "32"}, {"training.micro_batch", "2"},
                             {"training.global_batch", "8"}, {"training.threads", "1"}};
    for (size_t i = 0; i < sizeof base / sizeof base[0]; i++)
        if (mt_recipe_set(r, base[i][0], base[i][1], "test") != MT_OK) return 0;
    for (int i = 0; sets && sets[i]; i += 2)
        if (mt_recipe_set(r, sets[i], sets[i + 1], "test") != MT_OK) return 0;
    return mt_recipe_validate(r, world) == MT_OK;
}

/* one rank: the state over `world` (NULL: serial), a CPU backend, mt_train with the hook */
static int run_rank(mt_comm *world, int world_size, const char *const *sets) {
    static mt_recipe r;
    static mt_parallel_state ps;
    mt_backend be;
    mt_train_report rep;
    if (!load_recipe(&r, world_size, sets)) {
        fprintf(stderr, "rank %d: recipe: %s\n", g_rank, mt_last_error());
        return 0;
    }
    mt_pstate_single(&ps);
    if (mt_pstate_setup_world(&ps, &r, world) != MT_OK || mt_backend_cpu_create(&be, 1) != MT_OK) {
        fprintf(stderr, "rank %d: setup: %s\n", g_rank, mt_last_error());
        return 0;
    }
    FILE *log = fopen("/dev/null", "w");
    mt_train_hooks hooks = {.on_iteration = on_iteration};
    mt_status st = mt_train(&r, &be, &ps, log, &hooks, &rep);
    if (st != MT_OK) fprintf(stderr, "rank %d: train: %s\n", g_rank, mt_last_error());
    if (log) fclose(log);
    mt_backend_destroy(&be);
    mt_pstate_free(&ps);
    return st == MT_OK && rep.iters_done == ITERS;
}

static void check_layout(const char *name, int n_ranks, const char *const *sets) {
    memset(g_sh, 0, sizeof *g_sh);
    if (n_ranks == 1) {
        g_rank = 0;
        CHECKF(run_rank(NULL, 1, sets), "%s: the run failed", name);
    } else {
        mt_comm_shm_local *local = NULL;
        pid_t pids[4];
        CHECK(mt_comm_shm_local_create(n_ranks, &local) == MT_OK);
        if (!local) return;
        for (int k = 0; k < n_ranks; k++) {
            fflush(stdout);
            pids[k] = fork();
            if (pids[k] == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                g_rank = k;
                mt_comm *w = NULL;
                if (mt_comm_shm_create_local(local, k, 60, &w) != MT_OK) _exit(2);
                _exit(run_rank(w, n_ranks, sets) ? 0 : 1);
            }
        }
        for (int k = 0; k < n_ranks; k++) {
            int status = 0;
            waitpid(pids[k], &status, 0);
            CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: rank %d failed (status 0x%x)", name, k, status);
        }
        mt_comm_shm_local_free(local);
    }
    for (int k = 0; k < n_ranks; k++) {
        printf("%-28s rank %d: %ld allocations in iterations %d..%d (%d iterations run); libgomp one-thread teams: "
               "%ld\n", name, k, g_sh->allocs[k], FIRST_COUNTED, ITERS, g_sh->iters[k], g_sh->gomp[k]);
        CHECKF(g_sh->iters[k] == ITERS, "%s rank %d: the hook saw %d iterations", name, k, g_sh->iters[k]);
        CHECKF(g_sh->allocs[k] == 0, "%s rank %d: %ld allocations inside the training loop", name, k, g_sh->allocs[k]);
    }
}

/* the counter itself works: an allocation in the window is seen */
static void check_counter(void) {
    atomic_store(&g_allocs, 0);
    atomic_store(&g_counting, 1);
    void *volatile p = malloc(100);
    atomic_store(&g_counting, 0);
    free(p);
    CHECKF(atomic_load(&g_allocs) == 1, "the counting allocator saw %ld calls for one malloc", atomic_load(&g_allocs));
}

int main(void) {
    g_sh = mmap(NULL, sizeof *g_sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g_sh == MAP_FAILED || !mkdtemp(g_dir)) return 1;
    char prefix[600];
    snprintf(prefix, sizeof prefix, "%s/data", g_dir);
    CHECK(make_dataset(prefix));
    check_counter();
    check_layout("serial", 1, NULL);
    static const char *const dp2[] = {"parallel.data", "2", "parallel.distributed_optimizer", "true", NULL};
    check_layout("dp=2 distributed optimizer", 2, dp2);
    static const char *const tp2[] = {"parallel.tensor", "2", "parallel.sequence_parallel", "true", NULL};
    check_layout("tp=2 sequence parallel", 2, tp2);
    static const char *const pp2[] = {"parallel.pipeline", "2", NULL};
    check_layout("pp=2", 2, pp2);
    /* full recompute: backward reruns each layer's forward in place, nothing allocated */
    static const char *const rc_full[] = {"training.recompute", "full", NULL};
    check_layout("serial recompute full", 1, rc_full);
    static const char *const rc_pp2[] = {"parallel.pipeline", "2", "training.recompute", "full",
                                         "training.recompute_method", "block", "training.recompute_num_layers", "1", NULL};
    check_layout("pp=2 recompute block 1", 2, rc_pp2);
    /* per-phase timers (logging.timing_level 2: every probe, the log block's allgather) and the
     * profiler (events into its buffer over iterations 4..6, the gather to rank 0 and the trace
     * written after iteration 6, all inside the counted window) */
    char trace[640];
    snprintf(trace, sizeof trace, "%s/trace.json", g_dir);
    const char *const timed1[] = {"logging.timing_level", "2", "logging.profile", "true", "logging.profile_start", "4",
                                  "logging.profile_end", "6", "logging.profile_path", trace, NULL};
    check_layout("serial timing 2 + profile", 1, timed1);
    const char *const timed_dp[] = {"parallel.data", "2", "parallel.distributed_optimizer", "true",
                                    "logging.timing_level", "2", "logging.timing_option", "all", NULL};
    check_layout("dp=2 dist-opt timing 2", 2, timed_dp);
    const char *const timed_pp[] = {"parallel.pipeline", "2", "logging.timing_level", "2", "logging.profile", "true",
                                    "logging.profile_start", "4", "logging.profile_end", "6", "logging.profile_path",
                                    trace, NULL};
    check_layout("pp=2 timing 2 + profile", 2, timed_pp);
    /* overlapped reduction: the buckets' tasks through the communication thread's preallocated queue,
     * the parameter gathers waited on in the next forward, with the timers' spans */
    const char *const ov_dp[] = {"parallel.data", "2", "parallel.distributed_optimizer", "true",
                                 "parallel.overlap_grad_reduce", "true", "parallel.overlap_param_gather", "true",
                                 "parallel.ddp_bucket_size", "5000", "logging.timing_level", "2", NULL};
    check_layout("dp=2 overlapped grads + params", 2, ov_dp);
    CHECKF(access(trace, R_OK) == 0, "the profiled runs wrote no trace at %s", trace);
    /* mixture of experts (gelu experts with biases, capacity 1.0): serial, and ep=2 x dp=2 with the
     * distributed optimizer (the all-to-alls and the expert gradient buffer) */
    static const char *const moe[] = {"model.moe.experts", "4", "model.moe.top_k", "2", "model.moe.z_loss_coeff", "0.001",
                                      NULL};
    check_layout("moe serial", 1, moe);
    static const char *const moe_ep2[] = {"model.moe.experts", "4", "model.moe.top_k", "2", "parallel.data", "2",
                                          "parallel.expert", "2", "parallel.distributed_optimizer", "true", NULL};
    check_layout("moe ep=2 distributed optimizer", 2, moe_ep2);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    TEST_MAIN_END();
}
