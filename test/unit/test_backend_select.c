/* test_backend_select.c — mt_backend_select's placement rules: CPU backend with host memory
 * and cores / local_size threads; an invalid local rank is an error; cuda without a GPU (or
 * without CUDA in this build) fails naming the local rank; auto without a GPU is the CPU with
 * no note. With GPUs (CUDA build on a GPU machine): local rank k gets device k ("(cuda:k)" in
 * the name, host_memory 0), and more local ranks than GPUs is an error naming the counts. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/recipe/recipe.h"
#include "test/test.h"
#include "train/backend_select.h"

static mt_recipe g_r;

static void test_cpu(void) {
    mt_recipe_defaults(&g_r);
    g_r.training.backend = MT_BACKEND_CPU;
    g_r.training.threads = 0;
    mt_backend be;
    char note[1024];
    mt_status st = mt_backend_select(&g_r, 0, 1, &be, note, sizeof note);
    CHECKF(st == MT_OK, "%s", mt_last_error());
    if (st != MT_OK) return;
    CHECK(be.host_memory == 1);
    CHECK(be.device == -1);
    CHECK(note[0] == 0);
    mt_backend_destroy(&be);

    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores >= 2) {
        st = mt_backend_select(&g_r, 1, 2, &be, note, sizeof note);
        CHECKF(st == MT_OK, "%s", mt_last_error());
        if (st == MT_OK) {
            char want[64];
            snprintf(want, sizeof want, "cpu (%ld thread", cores / 2);
            CHECK_STR_CONTAINS(be.device_name, want);
            mt_backend_destroy(&be);
        }
    }
}

static void test_bad_placement(void) {
    mt_recipe_defaults(&g_r);
    g_r.training.backend = MT_BACKEND_CPU;
    mt_backend be;
    char note[256];
    CHECK(mt_backend_select(&g_r, 2, 2, &be, note, sizeof note) == MT_ERR_INTERNAL);
    CHECK(mt_backend_select(&g_r, -1, 2, &be, note, sizeof note) == MT_ERR_INTERNAL);
    CHECK(mt_backend_select(&g_r, 0, 0, &be, note, sizeof note) == MT_ERR_INTERNAL);
}

static void test_cuda(void) {
    mt_recipe_defaults(&g_r);
    g_r.training.backend = MT_BACKEND_CUDA;
    mt_backend be;
    char note[1024];
    const int n = mt_cuda_device_count();
    if (n == 0) {
        mt_status st = mt_backend_select(&g_r, 1, 2, &be, note, sizeof note);
        CHECKF(st == MT_ERR_UNSUPPORTED || st == MT_ERR_CUDA, "%s", mt_status_name(st));
        CHECK_STR_CONTAINS(mt_last_error(), "training.backend=cuda (local rank 1)");
        CHECK_STR_CONTAINS(mt_last_error(), "--backend cpu");

        g_r.training.backend = MT_BACKEND_AUTO;
        st = mt_backend_select(&g_r, 1, 2, &be, note, sizeof note);
        CHECKF(st == MT_OK, "%s", mt_last_error());
        if (st == MT_OK) {
            CHECK(be.host_memory == 1);
            CHECK(note[0] == 0);
            mt_backend_destroy(&be);
        }
        return;
    }
    /* a GPU machine: the last visible GPU for the last local rank */
    mt_status st = mt_backend_select(&g_r, n - 1, n, &be, note, sizeof note);
    CHECKF(st == MT_OK, "%s", mt_last_error());
    if (st == MT_OK) {
        char want[32];
        snprintf(want, sizeof want, "(cuda:%d)", n - 1);
        CHECK_STR_CONTAINS(be.device_name, want);
        CHECK(be.device == n - 1);
        CHECK(be.host_memory == 0);
        mt_backend_destroy(&be);
    }
    st = mt_backend_select(&g_r, 0, n + 1, &be, note, sizeof note);
    CHECKF(st == MT_ERR_CUDA, "%s", mt_status_name(st));
    if (st == MT_ERR_CUDA) {
        char want[96];
        snprintf(want, sizeof want, "%d ranks on this node but only %d CUDA device(s) visible", n + 1, n);
        CHECK_STR_CONTAINS(mt_last_error(), want);
        CHECK_STR_CONTAINS(mt_last_error(), "local rank 0");
    }
    g_r.training.backend = MT_BACKEND_AUTO; /* too few GPUs: every rank on the CPU, with a note */
    st = mt_backend_select(&g_r, n, n + 1, &be, note, sizeof note);
    CHECKF(st == MT_OK, "%s", mt_last_error());
    if (st == MT_OK) {
        CHECK(be.host_memory == 1);
        CHECK_STR_CONTAINS(note, "training on the CPU backend");
        mt_backend_destroy(&be);
    }
}

int main(void) {
    test_cpu();
    test_bad_placement();
    test_cuda();
    TEST_MAIN_END();
}
