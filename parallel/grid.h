/* grid.h — rank <-> (tp, cp, ep, dp, pp) coordinates and process groups, as pure functions.
 * Megatron-Core's order "tp-cp-ep-dp-pp", tp fastest:
 *     rank = tp_i + tp*(cp_i + cp*(ep_i + ep*(dp_i + dp*pp_i)))
 * Two grids exist, as in Megatron-Core (parallel_state.initialize_model_parallel):
 *   dense  {tp, cp, dp, pp}     (ep = 1)   mt_grid_dense()
 *   expert {etp, ep, edp, pp}   (cp = 1)   mt_grid_expert(); here the tp field holds the expert
 *                                          tensor-parallel size and dp the expert data-parallel size
 * pp is the slowest axis in both, so both give the same pipeline groups.
 * A group is named by an axis mask: the ranks that share every coordinate NOT in the mask.
 * Its color = mixed-radix index of the coordinates outside the mask, its key = mixed-radix
 * index of the coordinates inside (both in axis order, first axis fastest) — exactly the group
 * index and the position in Megatron's generate_masked_orthogonal_rank_groups, so
 * split(color, key) yields Megatron's groups with Megatron's rank order.
 * Rule: no state, no allocation, no I/O; errors name the sizes. */
#ifndef MT_GRID_H
#define MT_GRID_H

#include <stddef.h>

#include "core/status.h"

typedef enum { MT_AX_TP = 0, MT_AX_CP, MT_AX_EP, MT_AX_DP, MT_AX_PP, MT_AXES } mt_axis;

/* axis masks for the group functions */
#define MT_GRID_TP (1u << MT_AX_TP)
#define MT_GRID_CP (1u << MT_AX_CP)
#define MT_GRID_EP (1u << MT_AX_EP)
#define MT_GRID_DP (1u << MT_AX_DP)
#define MT_GRID_PP (1u << MT_AX_PP)
#define MT_GRID_ALL ((1u << MT_AXES) - 1u)

typedef struct {
    int tp, cp, ep, dp, pp; /* axis sizes, each >= 1 */
    int world;              /* = tp * cp * ep * dp * pp */
} mt_grid;

/* Validates world == tp*cp*ep*dp*pp and every size >= 1; the error names all the sizes. */
mt_status mt_grid_init(mt_grid *g, int world, int tp, int cp, int ep, int dp, int pp);
/* Dense grid: dp = world / (tp*cp*pp), ep = 1. */
mt_status mt_grid_dense(mt_grid *g, int world, int tp, int cp, int pp);
/* Expert grid: edp = world / (etp*ep*pp), cp = 1 (etp defaults to the dense tp in Megatron). */
mt_status mt_grid_expert(mt_grid *g, int world, int etp, int ep, int pp);

int mt_grid_axis_size(const mt_grid *g, mt_axis axis);
const char *mt_grid_axis_name(mt_axis axis); /* "tp", "cp", "ep", "dp", "pp" */
/* Number of ranks in a group of the given axis mask (product of the masked sizes). */
int mt_grid_group_size(const mt_grid *g, unsigned axis_mask);

/* coord[MT_AX_TP..MT_AX_PP] of rank; MT_ERR_CONFIG if rank is outside [0, world). */
mt_status mt_grid_coords(const mt_grid *g, int rank, int coord[MT_AXES]);
/* The rank at coord, or -1 when a coordinate is out of range. */
int mt_grid_rank(const mt_grid *g, const int coord[MT_AXES]);

/* The group of `rank` for axis_mask: color identifies the group (0 .. world/group_size - 1),
 * key is the rank's index within it (0 .. group_size - 1), in Megatron's order. */
mt_status mt_grid_color_key(const mt_grid *g, unsigned axis_mask, int rank, int *color, int *key);
/* The group's ranks in key order; out_ranks must hold mt_grid_group_size(g, axis_mask). */
mt_status mt_grid_group_ranks(const mt_grid *g, unsigned axis_mask, int rank, int *out_ranks, int *n_ranks);

/* Embedding group (Megatron's default_embedding_ranks): the first and last pipeline stage of
 * rank's pipeline group ([first] alone when pp == 1). out_ranks holds at most 2. */
mt_status mt_grid_embedding_ranks(const mt_grid *g, int rank, int out_ranks[2], int *n_ranks);
/* Split arguments for the embedding groups: color = the pipeline group's color for a member,
 * -1 for a rank on a middle stage (no communicator); key = 0 first stage, 1 last stage. */
mt_status mt_grid_embedding_color_key(const mt_grid *g, int rank, int *color, int *key);

/* Writes "[r3 tp1 pp0 dp0]" (cp / ep only when > 1) for log lines; returns buf. */
char *mt_grid_prefix(const mt_grid *g, int rank, char *buf, size_t buf_bytes);

#endif
