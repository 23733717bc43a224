/* test_comm_factory.c — the communicator factory picks by memory kind and refuses what it cannot
 * carry: host memory -> shared memory, device memory -> NCCL; NCCL (not built yet) with two or
 * more ranks is MT_ERR_UNSUPPORTED with a message naming the rank, the world size and both fixes
 * (one rank on the GPU, or --backend cpu); any kind with one rank needs no communicator (NULL).
 * The bootstrap is a stand-in struct: only rank and size are read before the refusal. */
#include "parallel/comm_factory.h"
#include "test/test.h"

int main(void) {
    CHECK(mt_comm_kind_for(1) == MT_COMM_SHM);
    CHECK(mt_comm_kind_for(0) == MT_COMM_NCCL);
    mt_bootstrap bs = {.rank = 1, .size = 4, .local_rank = 1, .local_size = 4, .kind = "test"};
    mt_comm *world = (mt_comm *)&bs; /* must be reset to NULL on every path */
    mt_status st = mt_comm_world_create(MT_COMM_NCCL, &bs, 5, &world);
    CHECK(st == MT_ERR_UNSUPPORTED);
    CHECK(world == NULL);
    CHECK_STR_CONTAINS(mt_last_error(), "rank 1 of 4");
    CHECK_STR_CONTAINS(mt_last_error(), "NCCL");
    CHECK_STR_CONTAINS(mt_last_error(), "--backend cpu");
    mt_bootstrap one = {.rank = 0, .size = 1, .local_rank = 0, .local_size = 1, .kind = "single"};
    world = (mt_comm *)&one;
    CHECK(mt_comm_world_create(MT_COMM_NCCL, &one, 5, &world) == MT_OK && world == NULL);
    world = (mt_comm *)&one;
    CHECK(mt_comm_world_create(MT_COMM_SHM, &one, 5, &world) == MT_OK && world == NULL);
    mt_comm *g = (mt_comm *)&one;
    CHECK(mt_comm_group_create(NULL, -1, 0, &g) == MT_OK && g == NULL);
    CHECK(mt_comm_group_create(NULL, 0, 0, &g) == MT_ERR_INTERNAL);
    TEST_MAIN_END();
}
