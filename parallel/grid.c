/* grid.c — rank <-> coordinates and groups in Megatron's tp-cp-ep-dp-pp order (see grid.h).
 * Rule: pure functions of (grid, rank, mask); colors and keys are mixed-radix numbers, the same
 * as Megatron's group index and position in generate_masked_orthogonal_rank_groups. */
#include "parallel/grid.h"

#include <stdio.h>

static const char *const g_axis_names[MT_AXES] = {"tp", "cp", "ep", "dp", "pp"};

const char *mt_grid_axis_name(mt_axis axis) {
    return (axis >= 0 && axis < MT_AXES) ? g_axis_names[axis] : "?";
}

int mt_grid_axis_size(const mt_grid *g, mt_axis axis) {
    switch (axis) {
    case MT_AX_TP: return g->tp;
    case MT_AX_CP: return g->cp;
    case MT_AX_EP: return g->ep;
    case MT_AX_DP: return g->dp;
    case MT_AX_PP: return g->pp;
    default: return 0;
    }
}

mt_status mt_grid_init(mt_grid *g, int world, int tp, int cp, int ep, int dp, int pp) {
    if (world < 1 || tp < 1 || cp < 1 || ep < 1 || dp < 1 || pp < 1)
        return mt_errorf(MT_ERR_CONFIG,
                         "grid: every size must be >= 1 (world %d, tp %d, cp %d, ep %d, dp %d, pp %d)", world, tp,
                         cp, ep, dp, pp);
    long long product = (long long)tp * cp * ep * dp * pp;
    if (product != world)
        return mt_errorf(MT_ERR_CONFIG,
                         "grid: world size %d != tp %d x cp %d x ep %d x dp %d x pp %d = %lld; "
                         "change the parallel sizes or the number of ranks",
                         world, tp, cp, ep, dp, pp, product);
    g->tp = tp;
    g->cp = cp;
    g->ep = ep;
    g->dp = dp;
    g->pp = pp;
    g->world = world;
    return MT_OK;
}

/* The data-parallel size world / (a x b x pp) of a grid whose model axes are a and b, in *dp;
 * an error when a size is < 1 or the product does not divide world. The messages name the grid
 * (`grid`), the axes (a_short in the list of sizes, a_long in the product: "etp" / "expert tp")
 * and the data-parallel axis (`dp_name`). */
static mt_status data_parallel_size(const char *grid, const char *a_short, const char *a_long, const char *b_name,
                                    const char *dp_name, int world, int a, int b, int pp, int *dp) {
    if (world < 1 || a < 1 || b < 1 || pp < 1)
        return mt_errorf(MT_ERR_CONFIG, "%s: every size must be >= 1 (world %d, %s %d, %s %d, pp %d)", grid, world,
                         a_short, a, b_name, b, pp);
    long long model = (long long)a * b * pp;
    if (world % model != 0)
        return mt_errorf(MT_ERR_CONFIG,
                         "%s: world size %d is not divisible by %s %d x %s %d x pp %d = %lld; "
                         "%s size would not be an integer",
                         grid, world, a_long, a, b_name, b, pp, model, dp_name);
    *dp = (int)(world / model);
    return MT_OK;
}

mt_status mt_grid_dense(mt_grid *g, int world, int tp, int cp, int pp) {
    int dp = 0;
    mt_status st = data_parallel_size("grid", "tp", "tp", "cp", "data parallel", world, tp, cp, pp, &dp);
    if (st != MT_OK) return st;
    return mt_grid_init(g, world, tp, cp, 1, dp, pp);
}

mt_status mt_grid_expert(mt_grid *g, int world, int etp, int ep, int pp) {
    int dp = 0;
    mt_status st =
        data_parallel_size("expert grid", "etp", "expert tp", "ep", "expert data parallel", world, etp, ep, pp, &dp);
    if (st != MT_OK) return st;
    return mt_grid_init(g, world, etp, 1, ep, dp, pp);
}

static void sizes_of(const mt_grid *g, int size[MT_AXES]) {
    size[MT_AX_TP] = g->tp;
    size[MT_AX_CP] = g->cp;
    size[MT_AX_EP] = g->ep;
    size[MT_AX_DP] = g->dp;
    size[MT_AX_PP] = g->pp;
}

int mt_grid_group_size(const mt_grid *g, unsigned axis_mask) {
    int size[MT_AXES], n = 1;
    sizes_of(g, size);
    for (int a = 0; a < MT_AXES; a++)
        if (axis_mask & (1u << a)) n *= size[a];
    return n;
}

mt_status mt_grid_coords(const mt_grid *g, int rank, int coord[MT_AXES]) {
    if (rank < 0 || rank >= g->world)
        return mt_errorf(MT_ERR_CONFIG, "grid: rank %d is outside the world of %d ranks", rank, g->world);
    int size[MT_AXES];
    sizes_of(g, size);
    int r = rank;
    for (int a = 0; a < MT_AXES; a++) {
        coord[a] = r % size[a];
        r /= size[a];
    }
    return MT_OK;
}

int mt_grid_rank(const mt_grid *g, const int coord[MT_AXES]) {
    int size[MT_AXES];
    sizes_of(g, size);
    int rank = 0;
    for (int a = MT_AXES - 1; a >= 0; a--) {
        if (coord[a] < 0 || coord[a] >= size[a]) return -1;
        rank = rank * size[a] + coord[a];
    }
    return rank;
}

mt_status mt_grid_color_key(const mt_grid *g, unsigned axis_mask, int rank, int *color, int *key) {
    if (axis_mask & ~MT_GRID_ALL) return mt_errorf(MT_ERR_INTERNAL, "grid: axis mask 0x%x has unknown bits", axis_mask);
    int coord[MT_AXES], size[MT_AXES];
    mt_status st = mt_grid_coords(g, rank, coord);
    if (st != MT_OK) return st;
    sizes_of(g, size);
    int c = 0, k = 0;
    for (int a = MT_AXES - 1; a >= 0; a--) {
        if (axis_mask & (1u << a))
            k = k * size[a] + coord[a];
        else
            c = c * size[a] + coord[a];
    }
    *color = c;
    *key = k;
    return MT_OK;
}

mt_status mt_grid_group_ranks(const mt_grid *g, unsigned axis_mask, int rank, int *out_ranks, int *n_ranks) {
    int color, key, coord[MT_AXES], size[MT_AXES];
    mt_status st = mt_grid_color_key(g, axis_mask, rank, &color, &key);
    if (st != MT_OK) return st;
    mt_grid_coords(g, rank, coord);
    sizes_of(g, size);
    int n = mt_grid_group_size(g, axis_mask);
    for (int k = 0; k < n; k++) {
        int c[MT_AXES], rest = k;
        for (int a = 0; a < MT_AXES; a++) {
            if (axis_mask & (1u << a)) {
                c[a] = rest % size[a];
                rest /= size[a];
            } else {
                c[a] = coord[a];
            }
        }
        out_ranks[k] = mt_grid_rank(g, c);
    }
    *n_ranks = n;
    return MT_OK;
}

mt_status mt_grid_embedding_ranks(const mt_grid *g, int rank, int out_ranks[2], int *n_ranks) {
    int coord[MT_AXES];
    mt_status st = mt_grid_coords(g, rank, coord);
    if (st != MT_OK) return st;
    coord[MT_AX_PP] = 0;
    out_ranks[0] = mt_grid_rank(g, coord);
    *n_ranks = 1;
    if (g->pp > 1) {
        coord[MT_AX_PP] = g->pp - 1;
        out_ranks[1] = mt_grid_rank(g, coord);
        *n_ranks = 2;
    }
    return MT_OK;
}

mt_status mt_grid_embedding_color_key(const mt_grid *g, int rank, int *color, int *key) {
    int pp_color, pp_key;
    mt_status st = mt_grid_color_key(g, MT_GRID_PP, rank, &pp_color, &pp_key);
    if (st != MT_OK) return st;
    if (pp_key == 0) {
        *color = pp_color;
        *key = 0;
    } else if (pp_key == g->pp - 1) {
        *color = pp_color;
        *key = 1;
    } else {
        *color = -1;
        *key = 0;
    }
    return MT_OK;
}

char *mt_grid_prefix(const mt_grid *g, int rank, char *buf, size_t buf_bytes) {
    int coord[MT_AXES];
    if (buf_bytes == 0) return buf;
    if (mt_grid_coords(g, rank, coord) != MT_OK) {
        snprintf(buf, buf_bytes, "[r%d]", rank);
        return buf;
    }
    char cp[16] = "", ep[16] = "";
    if (g->cp > 1) snprintf(cp, sizeof cp, " cp%d", coord[MT_AX_CP]);
    if (g->ep > 1) snprintf(ep, sizeof ep, " ep%d", coord[MT_AX_EP]);
    snprintf(buf, buf_bytes, "[r%d tp%d%s%s pp%d dp%d]", rank, coord[MT_AX_TP], cp, ep, coord[MT_AX_PP],
             coord[MT_AX_DP]);
    return buf;
}
