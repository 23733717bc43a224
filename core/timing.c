/* timing.c — the timers' names (Megatron's) and log levels (core/timing.h). */
#include "core/timing.h"

static const struct {
    const char *name;
    int level;
} timer_table[MT_TM_COUNT] = {
    [MT_TM_FWD_BWD] = {"forward-backward", 1},
    [MT_TM_FWD] = {"forward-compute", 2},
    [MT_TM_BWD] = {"backward-compute", 2},
    [MT_TM_BATCH] = {"batch-generator", 1},
    [MT_TM_FWD_RECV] = {"forward-recv", 2},
    [MT_TM_FWD_SEND] = {"forward-send", 2},
    [MT_TM_BWD_RECV] = {"backward-recv", 2},
    [MT_TM_BWD_SEND] = {"backward-send", 2},
    [MT_TM_FS_FR] = {"forward-send-forward-recv", 2},
    [MT_TM_FS_BR] = {"forward-send-backward-recv", 2},
    [MT_TM_BS_FR] = {"backward-send-forward-recv", 2},
    [MT_TM_BS_BR] = {"backward-send-backward-recv", 2},
    [MT_TM_FB_SR] = {"forward-backward-send-forward-backward-recv", 2},
    [MT_TM_TP] = {"tp-collectives", 2},
    [MT_TM_LN_GRADS] = {"layernorm-grads-all-reduce", 1},
    [MT_TM_EMB_GRADS] = {"embedding-grads-all-reduce", 1},
    [MT_TM_GRADS_SYNC] = {"all-grads-sync", 1},
    [MT_TM_GRADS_RS] = {"grads-reduce-scatter", 1},
    [MT_TM_NORM_LOSS] = {"grad-norm-loss-all-reduce", 2},
    [MT_TM_PARAMS_AG] = {"params-all-gather", 1},
    [MT_TM_GRADS_EXPOSED] = {"grads-reduce-exposed", 1},
    [MT_TM_PARAMS_EXPOSED] = {"params-all-gather-exposed", 1},
    [MT_TM_OPT] = {"optimizer", 1},
    [MT_TM_OPS_GEMM] = {"gemm-ops", 3},
    [MT_TM_OPS_ATTN] = {"attention-ops", 3},
    [MT_TM_OPS_NORM] = {"norm-ops", 3},
    [MT_TM_OPS_ELEM] = {"elementwise-ops", 3},
    [MT_TM_OPS_OPT] = {"optimizer-ops", 3},
    [MT_TM_OPS_MEM] = {"memory-ops", 3},
};

const char *mt_timer_name(mt_timer_id id) { return (unsigned)id < MT_TM_COUNT ? timer_table[id].name : "?"; }
int mt_timer_level(mt_timer_id id) { return (unsigned)id < MT_TM_COUNT ? timer_table[id].level : 99; }
