/* timing.h — the per-phase timer probe that the training loop, the pipeline executor and
 * gradient sync call around each phase (Megatron's timers('forward-compute', log_level=2).start()
 * / .stop()): the timer ids with Megatron's names and log levels (timing.c), and three inline
 * calls, so parallel/ can time its collectives without depending on train/ (train/timers.c owns
 * the probe: what it accumulates, the log block, and the profiler trace events it feeds).
 * Cost: when a timer is inactive (logging.timing_level below its level and no profiled iteration)
 * mt_timing_begin is one load and a branch, no clock read; mt_timing_end then does nothing.
 * Usage:  double t0 = mt_timing_begin(tm, MT_TM_OPT); ...; mt_timing_end(tm, MT_TM_OPT, t0, -1, -1);
 * tm may be NULL (untimed callers: tests, tools). */
#ifndef MT_TIMING_H
#define MT_TIMING_H

#define MT_TM_OPS_FIRST MT_TM_OPS_GEMM /* the first op-class timer: they feed no trace events */

#include "core/clock.h"

/* In print order (Megatron's timers_to_log order); names and levels: timing.c. */
typedef enum {
    MT_TM_FWD_BWD = 0,   /* forward-backward: all micro-batches of an iteration (1) */
    MT_TM_FWD,           /* forward-compute (2) */
    MT_TM_BWD,           /* backward-compute (2) */
    MT_TM_BATCH,         /* batch-generator: reading a micro-batch's samples (1) */
    MT_TM_FWD_RECV,      /* pipeline transfers, one per comm group, named by what the group holds (2) */
    MT_TM_FWD_SEND,
    MT_TM_BWD_RECV,
    MT_TM_BWD_SEND,
    MT_TM_FS_FR,         /* forward-send-forward-recv */
    MT_TM_FS_BR,         /* forward-send-backward-recv */
    MT_TM_BS_FR,         /* backward-send-forward-recv */
    MT_TM_BS_BR,         /* backward-send-backward-recv */
    MT_TM_FB_SR,         /* forward-backward-send-forward-backward-recv */
    MT_TM_TP,            /* tp-collectives: the iteration's tensor-parallel collectives (2; no trace events) */
    MT_TM_LN_GRADS,      /* layernorm-grads-all-reduce: tp-partial norm weights under SP (1) */
    MT_TM_EMB_GRADS,     /* embedding-grads-all-reduce: the tied embedding over first + last stage (1) */
    MT_TM_GRADS_SYNC,    /* all-grads-sync: dp x cp gradient allreduce, per bucket (1) */
    MT_TM_GRADS_RS,      /* grads-reduce-scatter: the distributed optimizer's gradient reduce-scatter (1) */
    MT_TM_NORM_LOSS,     /* grad-norm-loss-all-reduce: the world sum of [loss, grad sq] (2) */
    MT_TM_PARAMS_AG,     /* params-all-gather: the distributed optimizer's parameter allgather (1) */
    MT_TM_GRADS_EXPOSED, /* grads-reduce-exposed: overlapped reduction, the main thread's wait after backward (1) */
    MT_TM_PARAMS_EXPOSED,/* params-all-gather-exposed: overlapped gather, the forward's waits for parameters (1) */
    MT_TM_OPT,           /* optimizer: clip + AdamW on this rank's shards (1) */
    /* op timers (3, mtrain's own level): every backend op timed, by class (core/backend_timed.h) */
    MT_TM_OPS_GEMM,      /* gemm-ops: matmul forward / backward, the fused GeLU GEMMs */
    MT_TM_OPS_ATTN,      /* attention-ops: attention forward / backward (and cp's block ops) */
    MT_TM_OPS_NORM,      /* norm-ops: layer / RMS norm forward / backward, the fused add + norm */
    MT_TM_OPS_ELEM,      /* elementwise-ops: activations, rope, embedding, cross-entropy, add, sum, MoE routing */
    MT_TM_OPS_OPT,       /* optimizer-ops: AdamW, the cast of master weights to the compute dtype */
    MT_TM_OPS_MEM,       /* memory-ops: memset, copies between host and device or within it, copy_rows */
    MT_TM_COUNT
} mt_timer_id;

/* Megatron's name of the timer ("forward-backward"; "?" for no timer) and its log level (the
 * lowest logging.timing_level that shows it; 99 for no timer). */
const char *mt_timer_name(mt_timer_id id);
int mt_timer_level(mt_timer_id id);

typedef struct mt_timing mt_timing;
struct mt_timing {
    unsigned char active[MT_TM_COUNT]; /* this iteration: the timer accumulates or the profiler records */
    void (*record)(mt_timing *tm, mt_timer_id id, double t0_ms, double t1_ms, int mb, int chunk);
    void (*sync)(mt_timing *tm);       /* waits for the device before a phase's end is read */
};

/* The start of a phase: the monotonic clock in ms, or -1 when id is inactive. */
static inline double mt_timing_begin(const mt_timing *tm, mt_timer_id id) {
    return tm && tm->active[id] ? mt_clock_ms() : -1.0;
}

/* The end of a phase begun at t0 (mb, chunk: the micro-batch and model chunk, -1 if none). */
static inline void mt_timing_end(mt_timing *tm, mt_timer_id id, double t0, int mb, int chunk) {
    if (t0 < 0) return;
    if (tm->sync) tm->sync(tm);
    tm->record(tm, id, t0, mt_clock_ms(), mb, chunk);
}

/* A phase whose ends the caller already read (no clock read, no sync here). */
static inline void mt_timing_span(mt_timing *tm, mt_timer_id id, double t0, double t1, int mb, int chunk) {
    if (tm && tm->active[id]) tm->record(tm, id, t0, t1, mb, chunk);
}

#endif
