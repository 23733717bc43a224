/* test_grid.c — the rank grid against golden tables (Megatron-Core's documented examples) and
 * every factorisation tp*cp*ep*dp*pp of every world size 1..1024 (258,449 grids): coords <-> rank
 * is a bijection, every axis mask partitions the world into groups of the product of the masked
 * sizes, color/key agree with group_ranks and with a port of Megatron's
 * generate_masked_orthogonal_rank_groups. Worlds <= 128: every grid, all 32 masks, in full.
 * Larger worlds: ~6 grids per world in full (single axes + rotating composite masks), the others
 * by probing a few ranks. Dense and expert grids give the same pp groups. ~2.5 s. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "parallel/grid.h"
#include "test/test.h"

/* groups[g * group_size + i], written the way Megatron's Python does it */
static void megatron_groups(int world, const int size[MT_AXES], unsigned mask, int *groups) {
    int masked[MT_AXES], unmasked[MT_AXES], mstride[MT_AXES], ustride[MT_AXES];
    int n_m = 0, n_u = 0, stride = 1;
    for (int a = 0; a < MT_AXES; a++) {
        if (mask & (1u << a)) {
            masked[n_m] = size[a];
            mstride[n_m++] = stride;
        } else {
            unmasked[n_u] = size[a];
            ustride[n_u++] = stride;
        }
        stride *= size[a];
    }
    int group_size = 1;
    for (int i = 0; i < n_m; i++) group_size *= masked[i];
    int n_groups = world / group_size;
    for (int gi = 0; gi < n_groups; gi++) {
        int base = 0, rest = gi;
        for (int i = 0; i < n_u; i++) {
            base += (rest % unmasked[i]) * ustride[i];
            rest /= unmasked[i];
        }
        for (int k = 0; k < group_size; k++) {
            int r = base, rk = k;
            for (int i = 0; i < n_m; i++) {
                r += (rk % masked[i]) * mstride[i];
                rk /= masked[i];
            }
            groups[gi * group_size + k] = r;
        }
    }
}

static int g_bad_combos = 0;

/* One mask on one grid: partition, sizes, color/key vs group_ranks, optionally vs Megatron. */
static void check_mask(const mt_grid *g, unsigned mask, int against_megatron, int *seen, int *members, int *mg) {
    int world = g->world, gs = mt_grid_group_size(g, mask), ok = 1;
    int size[MT_AXES] = {g->tp, g->cp, g->ep, g->dp, g->pp};
    if (world % gs != 0) ok = 0;
    memset(seen, 0, sizeof(int) * (size_t)world);
    for (int r = 0; r < world && ok; r++) {
        int color, key;
        if (mt_grid_color_key(g, mask, r, &color, &key) != MT_OK) { ok = 0; break; }
        if (color < 0 || color >= world / gs || key < 0 || key >= gs) { ok = 0; break; }
        if (seen[color * gs + key]++) { ok = 0; break; } /* (color, key) <-> rank is a bijection */
        if (against_megatron && r == 0) megatron_groups(world, size, mask, mg);
        if (against_megatron && mg[color * gs + key] != r) { ok = 0; break; }
    }
    /* group_ranks of a few ranks: every member has the group's color and its key = index */
    int probes[3] = {0, world / 2, world - 1};
    for (int p = 0; p < 3 && ok; p++) {
        int n, color0, key0;
        mt_grid_color_key(g, mask, probes[p], &color0, &key0);
        if (mt_grid_group_ranks(g, mask, probes[p], members, &n) != MT_OK || n != gs) { ok = 0; break; }
        if (members[key0] != probes[p]) ok = 0;
        for (int k = 0; k < n && ok; k++) {
            int c, kk;
            mt_grid_color_key(g, mask, members[k], &c, &kk);
            if (c != color0 || kk != k) ok = 0;
        }
    }
    if (!ok && g_bad_combos++ < 10)
        fprintf(stderr, "grid world %d tp %d cp %d ep %d dp %d pp %d mask 0x%x: groups wrong\n", world, g->tp, g->cp,
                g->ep, g->dp, g->pp, mask);
    CHECK(ok);
}

static void check_grid(const mt_grid *g, unsigned rotation, int *seen, int *members, int *mg) {
    int ok = 1;
    for (int r = 0; r < g->world && ok; r++) { /* coords <-> rank bijection */
        int c[MT_AXES];
        if (mt_grid_coords(g, r, c) != MT_OK || mt_grid_rank(g, c) != r) ok = 0;
        for (int a = 0; a < MT_AXES && ok; a++)
            if (c[a] < 0 || c[a] >= mt_grid_axis_size(g, (mt_axis)a)) ok = 0;
    }
    CHECKF(ok, "coords bijection world %d tp %d cp %d ep %d dp %d pp %d", g->world, g->tp, g->cp, g->ep, g->dp, g->pp);
    if (g->world <= 128) {
        for (unsigned mask = 0; mask <= MT_GRID_ALL; mask++) check_mask(g, mask, 1, seen, members, mg);
    } else {
        /* the five single axes always, plus two rotating composite masks */
        for (int a = 0; a < MT_AXES; a++) check_mask(g, 1u << a, 0, seen, members, mg);
        check_mask(g, rotation % (MT_GRID_ALL + 1), 0, seen, members, mg);
        check_mask(g, (rotation * 7 + 3) % (MT_GRID_ALL + 1), 1, seen, members, mg);
    }
}

/* A light check for the factorisations of large worlds not checked in full: a few ranks'
 * coordinates round-trip and their groups (one rotating mask) contain them at their key. */
static void check_grid_light(const mt_grid *g, unsigned rotation, int *members) {
    int probes[4] = {0, 1 % g->world, g->world / 3, g->world - 1}, ok = 1;
    unsigned mask = rotation % (MT_GRID_ALL + 1);
    for (int p = 0; p < 4 && ok; p++) {
        int c[MT_AXES], color, key, n;
        if (mt_grid_coords(g, probes[p], c) != MT_OK || mt_grid_rank(g, c) != probes[p]) ok = 0;
        if (ok && mt_grid_color_key(g, mask, probes[p], &color, &key) != MT_OK) ok = 0;
        if (ok && (mt_grid_group_ranks(g, mask, probes[p], members, &n) != MT_OK ||
                   n != mt_grid_group_size(g, mask) || members[key] != probes[p]))
            ok = 0;
    }
    CHECKF(ok, "light check world %d tp %d cp %d ep %d dp %d pp %d", g->world, g->tp, g->cp, g->ep, g->dp, g->pp);
}

typedef struct { int tp, cp, ep, dp, pp; } factors;

static void test_exhaustive(void) {
    int *seen = malloc(sizeof(int) * 1024), *members = malloc(sizeof(int) * 1024), *mg = malloc(sizeof(int) * 1024);
    factors *fs = malloc(sizeof(factors) * 16384) /* max over worlds <= 1024 is 5250 (720) */;
    long n_grids = 0, n_full = 0, n_pp_pairs = 0;
    unsigned rotation = 0;
    clock_t t0 = clock();
    for (int world = 1; world <= 1024; world++) {
        int n_f = 0;
        for (int tp = 1; tp <= world; tp++) {
            if (world % tp) continue;
            for (int cp = 1; cp <= world / tp; cp++) {
                if ((world / tp) % cp) continue;
                for (int ep = 1; ep <= world / (tp * cp); ep++) {
                    if ((world / (tp * cp)) % ep) continue;
                    for (int dp = 1; dp <= world / (tp * cp * ep); dp++) {
                        if ((world / (tp * cp * ep)) % dp) continue;
                        fs[n_f++] = (factors){tp, cp, ep, dp, world / (tp * cp * ep * dp)};
                    }
                }
            }
        }
        /* worlds <= 128: every factorisation in full; larger: ~6 in full (always including
         * the first and last), the rest lightly */
        int stride = world <= 128 ? 1 : (n_f + 5) / 6;
        for (int i = 0; i < n_f; i++) {
            factors f = fs[i];
            mt_grid g;
            CHECK(mt_grid_init(&g, world, f.tp, f.cp, f.ep, f.dp, f.pp) == MT_OK);
            n_grids++;
            int full = (i % stride == 0) || i == n_f - 1;
            if (full) {
                check_grid(&g, rotation, seen, members, mg);
                n_full++;
            } else {
                check_grid_light(&g, rotation, members);
            }
            rotation++;
            /* dense {tp, cp, dp', pp} vs expert {etp = tp, ep, edp, pp}: same pp groups */
            if ((f.cp == 1 || f.ep == 1) && (full || world <= 256)) {
                mt_grid d, e;
                if (mt_grid_dense(&d, world, f.tp, f.cp, f.pp) != MT_OK ||
                    mt_grid_expert(&e, world, f.tp, f.ep, f.pp) != MT_OK) {
                    CHECK(0);
                    continue;
                }
                int same = 1;
                for (int r = 0; r < world; r++) {
                    int c1, k1, c2, k2;
                    mt_grid_color_key(&d, MT_GRID_PP, r, &c1, &k1);
                    mt_grid_color_key(&e, MT_GRID_PP, r, &c2, &k2);
                    if (c1 != c2 || k1 != k2) same = 0;
                }
                CHECKF(same, "pp groups differ: world %d tp %d cp %d ep %d pp %d", world, f.tp, f.cp, f.ep, f.pp);
                n_pp_pairs++;
            }
        }
    }
    printf("exhaustive: %ld grids (every factorisation of 1..1024), %ld checked in full, "
           "%ld dense/expert pp comparisons, %.2f s\n",
           n_grids, n_full, n_pp_pairs, (double)(clock() - t0) / CLOCKS_PER_SEC);
    free(fs);
    free(seen);
    free(members);
    free(mg);
}

/* every group of `mask` listed in color order must equal want[color][key] */
static void check_table(const mt_grid *g, unsigned mask, int n_groups, int group_size, const int *want,
                        const char *what) {
    int ok = mt_grid_group_size(g, mask) == group_size && g->world / group_size == n_groups;
    for (int r = 0; r < g->world && ok; r++) {
        int color, key;
        if (mt_grid_color_key(g, mask, r, &color, &key) != MT_OK || want[color * group_size + key] != r) ok = 0;
    }
    for (int c = 0; c < n_groups && ok; c++) {
        int out[64], n;
        mt_grid_group_ranks(g, mask, want[c * group_size], out, &n);
        if (n != group_size || memcmp(out, want + c * group_size, sizeof(int) * (size_t)n)) ok = 0;
    }
    CHECKF(ok, "golden table %s", what);
}

static void test_golden(void) {
    mt_grid g;
    /* Megatron-Core initialize_model_parallel docstring: 16 GPUs, tp 2, pp 4 */
    CHECK(mt_grid_dense(&g, 16, 2, 1, 4) == MT_OK && g.dp == 2);
    int dp16[] = {0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15};
    int tp16[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    int pp16[] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};
    int mp16[] = {0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15}; /* tp-pp (model parallel) */
    check_table(&g, MT_GRID_DP, 8, 2, dp16, "16 tp2 pp4 dp");
    check_table(&g, MT_GRID_TP, 8, 2, tp16, "16 tp2 pp4 tp");
    check_table(&g, MT_GRID_PP, 4, 4, pp16, "16 tp2 pp4 pp");
    check_table(&g, MT_GRID_TP | MT_GRID_PP, 2, 8, mp16, "16 tp2 pp4 tp-pp");
    /* embedding groups: first and last stage of each pipeline group */
    int emb[2], n_emb, color, key;
    CHECK(mt_grid_embedding_ranks(&g, 5, emb, &n_emb) == MT_OK && n_emb == 2 && emb[0] == 1 && emb[1] == 13);
    CHECK(mt_grid_embedding_color_key(&g, 0, &color, &key) == MT_OK && color == 0 && key == 0);
    CHECK(mt_grid_embedding_color_key(&g, 12, &color, &key) == MT_OK && color == 0 && key == 1);
    CHECK(mt_grid_embedding_color_key(&g, 15, &color, &key) == MT_OK && color == 3 && key == 1);
    CHECK(mt_grid_embedding_color_key(&g, 4, &color, &key) == MT_OK && color == -1);
    CHECK(mt_grid_embedding_color_key(&g, 9, &color, &key) == MT_OK && color == -1);
    mt_grid one;
    CHECK(mt_grid_dense(&one, 4, 2, 1, 1) == MT_OK);
    CHECK(mt_grid_embedding_ranks(&one, 3, emb, &n_emb) == MT_OK && n_emb == 1 && emb[0] == 3);
    CHECK(mt_grid_embedding_color_key(&one, 3, &color, &key) == MT_OK && color == 3 && key == 0);

    /* context_parallel_size docstring: 8 GPUs, tp 4, cp 2 => cp groups [0,4] [1,5] [2,6] [3,7] */
    CHECK(mt_grid_dense(&g, 8, 4, 2, 1) == MT_OK);
    int cp8[] = {0, 4, 1, 5, 2, 6, 3, 7};
    check_table(&g, MT_GRID_CP, 4, 2, cp8, "8 tp4 cp2 cp");

    /* generate_masked_orthogonal_rank_groups docstring: [tp, dp, pp] = [2, 3, 4], dp groups
     * dp_group[0] = [0,2,4], dp_group[1] = [1,3,5], dp_group[7] = [19,21,23] */
    CHECK(mt_grid_init(&g, 24, 2, 1, 1, 3, 4) == MT_OK);
    int out[8], n;
    CHECK(mt_grid_group_ranks(&g, MT_GRID_DP, 0, out, &n) == MT_OK && n == 3 && out[0] == 0 && out[1] == 2 &&
          out[2] == 4);
    CHECK(mt_grid_group_ranks(&g, MT_GRID_DP, 3, out, &n) == MT_OK && n == 3 && out[0] == 1 && out[1] == 3 &&
          out[2] == 5);
    CHECK(mt_grid_color_key(&g, MT_GRID_DP, 21, &color, &key) == MT_OK && color == 7 && key == 1);
    CHECK(mt_grid_group_ranks(&g, MT_GRID_DP, 21, out, &n) == MT_OK && out[0] == 19 && out[1] == 21 && out[2] == 23);

    /* dp-cp group: 16 ranks tp 2 cp 2 dp 2 pp 2; cp is faster than dp inside the group */
    CHECK(mt_grid_init(&g, 16, 2, 2, 1, 2, 2) == MT_OK);
    int dpcp[] = {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15};
    check_table(&g, MT_GRID_DP | MT_GRID_CP, 4, 4, dpcp, "16 tp2 cp2 dp2 pp2 dp-cp");

    /* expert grid: 8 ranks, etp 1, ep 2, pp 2 => edp 2; dense tp 1 pp 2 => dp 4 */
    mt_grid d, e;
    CHECK(mt_grid_expert(&e, 8, 1, 2, 2) == MT_OK && e.dp == 2 && e.ep == 2 && e.cp == 1);
    CHECK(mt_grid_dense(&d, 8, 1, 1, 2) == MT_OK && d.dp == 4 && d.ep == 1);
    int ep8[] = {0, 1, 2, 3, 4, 5, 6, 7};
    int edp8[] = {0, 2, 1, 3, 4, 6, 5, 7};
    int dp8[] = {0, 1, 2, 3, 4, 5, 6, 7};
    int pp8[] = {0, 4, 1, 5, 2, 6, 3, 7};
    check_table(&e, MT_GRID_EP, 4, 2, ep8, "expert 8 ep2 pp2 ep");
    check_table(&e, MT_GRID_DP, 4, 2, edp8, "expert 8 ep2 pp2 edp");
    check_table(&d, MT_GRID_DP, 2, 4, dp8, "dense 8 pp2 dp");
    check_table(&d, MT_GRID_PP, 4, 2, pp8, "dense 8 pp2 pp");
    check_table(&e, MT_GRID_PP, 4, 2, pp8, "expert 8 ep2 pp2 pp");
    /* expert grid with etp 2, ep 2 on 16 ranks, pp 2: edp 2; expert tp-ep group = 4 consecutive */
    CHECK(mt_grid_expert(&e, 16, 2, 2, 2) == MT_OK && e.dp == 2);
    CHECK(mt_grid_group_ranks(&e, MT_GRID_TP | MT_GRID_EP, 5, out, &n) == MT_OK && n == 4 && out[0] == 4 &&
          out[3] == 7);
    CHECK(mt_grid_group_ranks(&e, MT_GRID_DP, 5, out, &n) == MT_OK && n == 2 && out[0] == 1 && out[1] == 5);

    /* prefix for log lines */
    char buf[64];
    CHECK(mt_grid_dense(&g, 16, 2, 1, 4) == MT_OK);
    CHECK(strcmp(mt_grid_prefix(&g, 7, buf, sizeof buf), "[r7 tp1 pp1 dp1]") == 0);
}

static void test_errors(void) {
    mt_grid g;
    CHECK(mt_grid_init(&g, 16, 3, 1, 1, 2, 4) == MT_ERR_CONFIG);
    CHECK_STR_CONTAINS(mt_last_error(), "world size 16");
    CHECK_STR_CONTAINS(mt_last_error(), "tp 3");
    CHECK_STR_CONTAINS(mt_last_error(), "= 24");
    CHECK(mt_grid_init(&g, 4, 0, 1, 1, 4, 1) == MT_ERR_CONFIG);
    CHECK(mt_grid_dense(&g, 12, 5, 1, 1) == MT_ERR_CONFIG);
    CHECK_STR_CONTAINS(mt_last_error(), "not divisible");
    CHECK(mt_grid_expert(&g, 12, 2, 4, 1) == MT_ERR_CONFIG);
    CHECK_STR_CONTAINS(mt_last_error(), "expert tp 2 x ep 4");
    CHECK(mt_grid_dense(&g, 8, 2, 1, 2) == MT_OK);
    int c[MT_AXES];
    CHECK(mt_grid_coords(&g, 8, c) == MT_ERR_CONFIG);
    CHECK(mt_grid_coords(&g, -1, c) == MT_ERR_CONFIG);
    int bad[MT_AXES] = {2, 0, 0, 0, 0};
    CHECK(mt_grid_rank(&g, bad) == -1);
    int color, key;
    CHECK(mt_grid_color_key(&g, 1u << 7, 0, &color, &key) != MT_OK);
}

int main(void) {
    test_golden();
    test_errors();
    test_exhaustive();
    TEST_MAIN_END();
}
