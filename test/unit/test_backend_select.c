/* test_backend_select.c — the backend / device / communicator choice.
 * 1. mt_cuda_visible_count parses CUDA_VISIBLE_DEVICES as the CUDA runtime does (unset = no limit,
 *    entries up to the first invalid or repeated one, UUIDs count, "" and "-1" hide everything).
 * 2. mt_placement_decide, the pure function, over a table: world 1 / 8, local ranks, 0 / 1 / 8
 *    GPUs, CUDA_VISIBLE_DEVICES, cpu / cuda / auto, no CUDA build, no driver, no NCCL (refused for
 *    world > 1): backend, device, communicator kind, ok, and words of the reason.
 * 3. mt_backend_select itself: the CPU backend with host memory and cores / local_size threads; an
 *    invalid placement is MT_ERR_INTERNAL; cpu never opens the CUDA module; cuda without a GPU
 *    fails naming the local rank and the reason; auto without a GPU is the CPU (with a note saying
 *    why in a CUDA build). With GPUs (CUDA build on a GPU machine): local rank k gets device k. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/backend_cuda_module.h"
#include "core/recipe/recipe.h"
#include "test/test.h"
#include "train/backend_select.h"

static mt_recipe g_r;

static void test_visible_count(void) {
    CHECK(mt_cuda_visible_count(NULL) == -1);
    CHECK(mt_cuda_visible_count("") == 0);
    CHECK(mt_cuda_visible_count("-1") == 0);
    CHECK(mt_cuda_visible_count("0") == 1);
    CHECK(mt_cuda_visible_count("0,1,2,3") == 4);
    CHECK(mt_cuda_visible_count(" 3, 1 ") == 2);
    CHECK(mt_cuda_visible_count("0,2,-1,1") == 2);  /* stops at the first invalid entry */
    CHECK(mt_cuda_visible_count("1,1") == 1);       /* a repeated index ends the list */
    CHECK(mt_cuda_visible_count("0,,1") == 1);
    CHECK(mt_cuda_visible_count("GPU-8932f937-d72c-4106-c12f-20bd9faed9f6") == 1);
    CHECK(mt_cuda_visible_count("MIG-GPU-1/0/0,MIG-GPU-1/1/0") == 2);
    CHECK(mt_cuda_visible_count("abc") == 0);
}

typedef struct {
    const char *what;
    mt_backend_kind req;
    int world, local_rank, local_size;
    const char *cvd;
    int built, loaded, n_gpus, nccl;
    int want_ok;
    mt_backend_kind want_backend;
    int want_device;
    mt_comm_kind want_comm;
    int want_fell_back;
    const char *want_reason;
} placement_case;

#define CPU MT_BACKEND_CPU
#define CUDA MT_BACKEND_CUDA
#define AUTO MT_BACKEND_AUTO
#define SHM MT_COMM_SHM
#define NCCL MT_COMM_NCCL

static const placement_case k_cases[] = {
    {"cpu, one rank", CPU, 1, 0, 1, NULL, 1, 1, 8, 1, 1, CPU, -1, SHM, 0, "backend cpu"},
    {"cpu ignores GPUs", CPU, 8, 3, 8, NULL, 1, 1, 8, 1, 1, CPU, -1, SHM, 0, "backend cpu"},
    {"cuda, 1 rank, 1 GPU", CUDA, 1, 0, 1, NULL, 1, 1, 1, 1, 1, CUDA, 0, NCCL, 0, "CUDA device 0 of 1"},
    {"cuda, 8 ranks, 8 GPUs", CUDA, 8, 5, 8, NULL, 1, 1, 8, 1, 1, CUDA, 5, NCCL, 0, "CUDA device 5 of 8"},
    {"cuda, 16 ranks on 2 nodes", CUDA, 16, 7, 8, NULL, 1, 1, 8, 1, 1, CUDA, 7, NCCL, 0, "NCCL"},
    {"cuda, 2 ranks, 8 GPUs", CUDA, 2, 1, 2, NULL, 1, 1, 8, 1, 1, CUDA, 1, NCCL, 0, "local rank 1 of 2"},
    {"cuda, 8 ranks, 1 GPU", CUDA, 8, 3, 8, NULL, 1, 1, 1, 1, 0, CPU, -1, SHM, 0,
     "8 ranks on this node but only 1 CUDA device(s) visible"},
    {"auto, 8 ranks, 1 GPU", AUTO, 8, 3, 8, NULL, 1, 1, 1, 1, 1, CPU, -1, SHM, 1, "using the CPU backend"},
    {"cuda, 8 ranks bound 1 GPU each", CUDA, 8, 3, 8, "3", 1, 1, 1, 1, 1, CUDA, 0, NCCL, 0, "CUDA device 0 of 1"},
    {"cuda, 8 ranks bound 2 GPUs each", CUDA, 8, 3, 8, "6,7", 1, 1, 2, 1, 1, CUDA, 1, NCCL, 0, "device 1 of 2"},
    {"cuda, 0 GPUs", CUDA, 1, 0, 1, NULL, 1, 1, 0, 1, 0, CPU, -1, SHM, 0, "no CUDA GPU visible"},
    {"auto, 0 GPUs", AUTO, 1, 0, 1, NULL, 1, 1, 0, 1, 1, CPU, -1, SHM, 1, "backend auto: no CUDA GPU visible"},
    {"cuda, no driver", CUDA, 1, 0, 1, NULL, 1, 0, 0, 0, 0, CPU, -1, SHM, 0, "no CUDA driver"},
    {"auto, no driver", AUTO, 8, 2, 8, NULL, 1, 0, 0, 0, 1, CPU, -1, SHM, 1,
     "backend auto: no CUDA driver (libcuda.so.1 not found): using the CPU backend"},
    {"cuda, no CUDA build", CUDA, 1, 0, 1, NULL, 0, 0, 0, 0, 0, CPU, -1, SHM, 0, "built without the CUDA backend"},
    {"auto, no CUDA build: quiet", AUTO, 1, 0, 1, NULL, 0, 0, 0, 0, 1, CPU, -1, SHM, 0, "built without"},
    {"cuda, CUDA_VISIBLE_DEVICES empty", CUDA, 1, 0, 1, "", 1, 1, 0, 1, 0, CPU, -1, SHM, 0, "hides every GPU"},
    {"auto, CUDA_VISIBLE_DEVICES=-1", AUTO, 1, 0, 1, "-1", 1, 0, 0, 0, 1, CPU, -1, SHM, 1, "hides every GPU"},
    {"cuda, 8 ranks, no NCCL: refused", CUDA, 8, 0, 8, NULL, 1, 1, 8, 0, 0, CPU, -1, SHM, 0,
     "need the NCCL communicator"},
    {"auto, 8 ranks, no NCCL: CPU", AUTO, 8, 0, 8, NULL, 1, 1, 8, 0, 1, CPU, -1, SHM, 1, "NCCL"},
    {"cuda, 1 rank, no NCCL: fine", CUDA, 1, 0, 1, NULL, 1, 1, 8, 0, 1, CUDA, 0, NCCL, 0, "device 0 of 8"},
    {"bad local rank", CUDA, 8, 8, 8, NULL, 1, 1, 8, 1, 0, CPU, -1, SHM, 0, "not a valid placement"},
    {"local size above world", CPU, 2, 0, 4, NULL, 1, 1, 8, 1, 0, CPU, -1, SHM, 0, "not a valid placement"},
};

static void test_decide_table(void) {
    for (size_t k = 0; k < sizeof k_cases / sizeof k_cases[0]; k++) {
        const placement_case *c = &k_cases[k];
        mt_placement_facts f = {
            .requested = c->req,
            .world_size = c->world,
            .local_rank = c->local_rank,
            .local_size = c->local_size,
            .cuda_visible_devices = c->cvd,
            .cuda_built = c->built,
            .cuda_loaded = c->loaded,
            .cuda_why = "no CUDA driver (libcuda.so.1 not found)",
            .n_gpus = c->n_gpus,
            .gpus_why = "no CUDA GPU visible",
            .nccl_available = c->nccl,
        };
        mt_placement p;
        mt_placement_decide(&f, &p);
        CHECKF(p.ok == c->want_ok, "%s: ok %d: %s", c->what, p.ok, p.reason);
        CHECKF(strstr(p.reason, c->want_reason) != NULL, "%s: reason '%s' lacks '%s'", c->what, p.reason,
               c->want_reason);
        if (!p.ok) {
            if (c->req == CUDA && c->local_rank < c->local_size && c->world >= c->local_size) {
                CHECKF(strstr(p.reason, "--backend cpu") != NULL, "%s: %s", c->what, p.reason);
                char want[64];
                snprintf(want, sizeof want, "training.backend=cuda (local rank %d)", c->local_rank);
                CHECKF(strstr(p.reason, want) != NULL, "%s: %s", c->what, p.reason);
            }
            continue;
        }
        CHECKF(p.backend == c->want_backend, "%s: backend %d", c->what, (int)p.backend);
        CHECKF(p.device == c->want_device, "%s: device %d, want %d", c->what, p.device, c->want_device);
        CHECKF(p.comm == c->want_comm, "%s: comm %d", c->what, (int)p.comm);
        CHECKF(p.fell_back == c->want_fell_back, "%s: fell_back %d", c->what, p.fell_back);
    }
    /* every rank of a node decides the same backend (no mix of GPU and CPU ranks) */
    for (int gpus = 0; gpus <= 8; gpus++)
        for (int req = 0; req < 3; req++) {
            int cuda_ranks = 0;
            for (int lr = 0; lr < 4; lr++) {
                mt_placement_facts f = {.requested = (mt_backend_kind)req, .world_size = 4, .local_rank = lr,
                                        .local_size = 4, .cuda_built = 1, .cuda_loaded = 1, .n_gpus = gpus,
                                        .nccl_available = 1};
                mt_placement p;
                mt_placement_decide(&f, &p);
                cuda_ranks += p.ok && p.backend == MT_BACKEND_CUDA;
                if (p.ok && p.backend == MT_BACKEND_CUDA) CHECK(p.device == lr);
            }
            CHECKF(cuda_ranks == 0 || cuda_ranks == 4, "gpus %d req %d: %d of 4 ranks on CUDA", gpus, req, cuda_ranks);
        }
}

static void test_cpu(void) {
    mt_recipe_defaults(&g_r);
    g_r.training.backend = MT_BACKEND_CPU;
    g_r.training.threads = 0;
    mt_backend be;
    char note[1024];
    mt_status st = mt_backend_select(&g_r, 1, 0, 1, &be, note, sizeof note);
    CHECKF(st == MT_OK, "%s", mt_last_error());
    if (st != MT_OK) return;
    CHECK(be.host_memory == 1);
    CHECK(be.device == -1);
    CHECK(note[0] == 0);
    mt_backend_destroy(&be);

    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores >= 2) {
        st = mt_backend_select(&g_r, 2, 1, 2, &be, note, sizeof note);
        CHECKF(st == MT_OK, "%s", mt_last_error());
        if (st == MT_OK) {
            char want[64];
            snprintf(want, sizeof want, "cpu (%ld thread", cores / 2);
            CHECK_STR_CONTAINS(be.device_name, want);
            mt_backend_destroy(&be);
        }
    }
    CHECK(!mt_cuda_module_loaded()); /* the CPU path opened no CUDA library */
}

static void test_bad_placement(void) {
    mt_recipe_defaults(&g_r);
    g_r.training.backend = MT_BACKEND_CPU;
    mt_backend be;
    char note[256];
    CHECK(mt_backend_select(&g_r, 2, 2, 2, &be, note, sizeof note) == MT_ERR_INTERNAL);
    CHECK(mt_backend_select(&g_r, 2, -1, 2, &be, note, sizeof note) == MT_ERR_INTERNAL);
    CHECK(mt_backend_select(&g_r, 2, 0, 0, &be, note, sizeof note) == MT_ERR_INTERNAL);
}

static void test_cuda(void) {
    mt_recipe_defaults(&g_r);
    g_r.training.backend = MT_BACKEND_CUDA;
    mt_backend be;
    char note[1024];
    const int n = mt_cuda_device_count();
    if (n == 0) {
        mt_status st = mt_backend_select(&g_r, 2, 1, 2, &be, note, sizeof note);
        CHECKF(st == MT_ERR_UNSUPPORTED || st == MT_ERR_CUDA, "%s", mt_status_name(st));
        CHECK_STR_CONTAINS(mt_last_error(), "training.backend=cuda (local rank 1)");
        CHECK_STR_CONTAINS(mt_last_error(), "--backend cpu");
#ifdef MT_HAVE_CUDA
        if (!mt_cuda_driver_present(NULL, 0)) CHECK_STR_CONTAINS(mt_last_error(), "no CUDA driver");
#endif
        g_r.training.backend = MT_BACKEND_AUTO;
        st = mt_backend_select(&g_r, 2, 1, 2, &be, note, sizeof note);
        CHECKF(st == MT_OK, "%s", mt_last_error());
        if (st == MT_OK) {
            CHECK(be.host_memory == 1);
#ifdef MT_HAVE_CUDA
            CHECK_STR_CONTAINS(note, "backend auto: ");
            CHECK_STR_CONTAINS(note, "using the CPU backend");
#else
            CHECK(note[0] == 0);
#endif
            mt_backend_destroy(&be);
        }
        return;
    }
    /* a GPU machine: the last visible GPU for the last local rank */
    mt_status st = mt_backend_select(&g_r, n, n - 1, n, &be, note, sizeof note);
    CHECKF(st == MT_OK, "%s", mt_last_error());
    if (st == MT_OK) {
        char want[32];
        snprintf(want, sizeof want, "(cuda:%d)", n - 1);
        CHECK_STR_CONTAINS(be.device_name, want);
        CHECK(be.device == n - 1);
        CHECK(be.host_memory == 0);
        mt_backend_destroy(&be);
    }
    if (getenv("CUDA_VISIBLE_DEVICES")) return; /* a bound rank may share its GPUs' index: no error */
    st = mt_backend_select(&g_r, n + 1, 0, n + 1, &be, note, sizeof note);
    CHECKF(st == MT_ERR_CUDA, "%s", mt_status_name(st));
    if (st == MT_ERR_CUDA) {
        char want[96];
        snprintf(want, sizeof want, "%d ranks on this node but only %d CUDA device(s) visible", n + 1, n);
        CHECK_STR_CONTAINS(mt_last_error(), want);
        CHECK_STR_CONTAINS(mt_last_error(), "local rank 0");
    }
    g_r.training.backend = MT_BACKEND_AUTO; /* too few GPUs: every rank on the CPU, with a note */
    st = mt_backend_select(&g_r, n + 1, n, n + 1, &be, note, sizeof note);
    CHECKF(st == MT_OK, "%s", mt_last_error());
    if (st == MT_OK) {
        CHECK(be.host_memory == 1);
        CHECK_STR_CONTAINS(note, "using the CPU backend");
        mt_backend_destroy(&be);
    }
}

int main(void) {
    test_visible_count();
    test_decide_table();
    test_cpu();
    test_bad_placement();
    test_cuda();
    TEST_MAIN_END();
}
