/* axis_layers.h — the communicating layer of every parallel axis that a model holds, and one
 * clock per process group for their collectives: what train/model.h keeps instead of a field per
 * axis. Each layer lives in its own file of parallel/ and takes backend, group, shapes and buffers
 * as arguments; with its axis of size 1 it is the plain backend op.
 *   tp  tensor (+ sequence) parallel linears, vocab-parallel embedding and cross-entropy: tp.h
 *   cp  context-parallel ring attention and RoPE at global positions: cp_attention.h
 *   ep  expert-parallel token dispatch and combine: ep_dispatch.h
 * The pipeline axis has no layer inside a model: its executor (train/pipeline.c) runs parts of the
 * model between p2p exchanges; data parallelism is the gradient synchronisation (grad_sync.h).
 * Adding an axis with a layer: its group id in parallel_state.h, its layer file here, a field
 * below, and its init in train/model.c from mt_pstate_group (docs/architecture.md walks through it). */
#ifndef MT_AXIS_LAYERS_H
#define MT_AXIS_LAYERS_H

#include "parallel/comm_clock.h"
#include "parallel/cp_attention.h"
#include "parallel/ep_dispatch.h"
#include "parallel/tp.h"

typedef struct {
    mt_tp tp;
    mt_cp cp;
    mt_ep ep;
    mt_comm_clocks clocks; /* per group; each layer's clock points at its group's entry */
} mt_axis_layers;

#endif
