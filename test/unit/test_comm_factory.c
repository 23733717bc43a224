/* test_comm_factory.c — the communicator factory picks by memory kind and refuses what it cannot
 * carry: host memory -> shared memory, device memory -> NCCL; any kind with one rank needs no
 * communicator (NULL). NCCL for two or more ranks:
 *   - without a CUDA backend to run on (be NULL or host memory) it is a caller bug (MT_ERR_INTERNAL);
 *   - in a build without CUDA it is MT_ERR_UNSUPPORTED naming the rank, the world size and both fixes;
 *   - in a CUDA build the module's NCCL communicator really runs up to its readiness exchange: a
 *     device-memory backend with no stream (this stand-in) cannot join, so every rank is told which
 *     rank cannot and why, before NCCL starts (no hang, no crash; libnccl is loaded from the
 *     module, never from mtrain).
 * The bootstrap is a stand-in: its allgather hands every rank this rank's blob (rank 1, then 0, of 2). */
#include <string.h>

#include "core/backend_cuda_module.h"
#include "parallel/comm_factory.h"
#include "test/test.h"

static int g_allgathers;

static mt_status fake_allgather(mt_bootstrap *bs, const void *mine, size_t n_bytes, void *all) {
    g_allgathers++;
    for (int r = 0; r < bs->size; r++) memcpy((char *)all + (size_t)r * n_bytes, mine, n_bytes);
    return MT_OK;
}

int main(void) {
    CHECK(mt_comm_kind_for(1) == MT_COMM_SHM);
    CHECK(mt_comm_kind_for(0) == MT_COMM_NCCL);
    CHECK(!strcmp(mt_comm_kind_name(MT_COMM_NCCL), "nccl") && !strcmp(mt_comm_kind_name(MT_COMM_SHM), "shm"));
    mt_bootstrap bs = {.rank = 1, .size = 2, .local_rank = 1, .local_size = 2, .kind = "test",
                       .allgather = fake_allgather};
    mt_comm *world = (mt_comm *)&bs; /* must be reset to NULL on every path */
    CHECK(mt_comm_world_create(MT_COMM_NCCL, &bs, NULL, 5, &world) == MT_ERR_INTERNAL && world == NULL);
    mt_backend cpu_like = {.host_memory = 1, .device = -1};
    world = (mt_comm *)&bs;
    CHECK(mt_comm_world_create(MT_COMM_NCCL, &bs, &cpu_like, 5, &world) == MT_ERR_INTERNAL && world == NULL);

    mt_backend gpu_like = {.host_memory = 0, .device = 0}; /* no context: no stream */
    world = (mt_comm *)&bs;
    mt_status st = mt_comm_world_create(MT_COMM_NCCL, &bs, &gpu_like, 5, &world);
    CHECK(world == NULL);
#ifdef MT_HAVE_CUDA
    if (mt_cuda_module_get(NULL, 0)) {
        /* rank 1 learns that its peer rank 0 cannot join: a peer failure naming rank 0 */
        CHECKF(st == MT_ERR_PEER, "%s: %s", mt_status_name(st), mt_last_error());
        CHECK(g_allgathers == 1); /* every rank took part in the readiness exchange */
        CHECK_STR_CONTAINS(mt_last_error(), "rank 0 of 2 cannot join");
        CHECK_STR_CONTAINS(mt_last_error(), "not the CUDA backend");
        CHECK_STR_CONTAINS(mt_last_error(), "reported to every rank");
        CHECK(mt_cuda_module_loaded());
        /* rank 0 names itself */
        bs.rank = 0;
        bs.local_rank = 0;
        world = (mt_comm *)&bs;
        st = mt_comm_world_create(MT_COMM_NCCL, &bs, &gpu_like, 5, &world);
        CHECKF(st == MT_ERR_NCCL && world == NULL, "%s: %s", mt_status_name(st), mt_last_error());
        CHECK_STR_CONTAINS(mt_last_error(), "rank 0 of 2 cannot join: its backend is not the CUDA backend");
    } else {
        CHECK(st == MT_ERR_UNSUPPORTED);
        CHECK_STR_CONTAINS(mt_last_error(), "rank 1 of 2");
        CHECK_STR_CONTAINS(mt_last_error(), "did not load");
    }
#else
    CHECK(st == MT_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(mt_last_error(), "rank 1 of 2");
    CHECK_STR_CONTAINS(mt_last_error(), "NCCL");
    CHECK_STR_CONTAINS(mt_last_error(), "--backend cpu");
    CHECK(!mt_cuda_module_loaded());
#endif
    mt_bootstrap one = {.rank = 0, .size = 1, .local_rank = 0, .local_size = 1, .kind = "single"};
    world = (mt_comm *)&one;
    CHECK(mt_comm_world_create(MT_COMM_NCCL, &one, &gpu_like, 5, &world) == MT_OK && world == NULL);
    world = (mt_comm *)&one;
    CHECK(mt_comm_world_create(MT_COMM_SHM, &one, NULL, 5, &world) == MT_OK && world == NULL);
    mt_comm *g = (mt_comm *)&one;
    CHECK(mt_comm_group_create(NULL, -1, 0, &g) == MT_OK && g == NULL);
    CHECK(mt_comm_group_create(NULL, 0, 0, &g) == MT_ERR_INTERNAL);
    TEST_MAIN_END();
}
