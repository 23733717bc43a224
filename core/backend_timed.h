/* backend_timed.h — op timers (logging.timing_level 3, mtrain's own level above Megatron's 0-2):
 * every op of a backend timed, without changing the backend. mt_op_timers_attach points be->i at a
 * copy of the backend's table whose entries time the call (the monotonic clock around it; on a
 * device backend the op is asynchronous, so each timed op then waits for the device: slower, but
 * each op's own time) and add it to two places: the op's own total and call count here (the
 * end-of-run table, mt_op_timers_print) and its class's timer of the probe (core/timing.h,
 * MT_TM_OPS_*: gemm, attention, norm, elementwise, optimizer, memory), which train/timers.c logs,
 * gathers over the ranks and writes to the metrics file like every other timer (mtrain plan
 * --compare sets them beside the plan's GEMM, attention, elementwise and optimizer terms).
 * An op is timed only while its class timer is active (not during evaluation); otherwise the entry
 * is one load and a branch around the backend's own call. Ops the backend does not offer stay NULL,
 * alloc / free / sync / destroy are the backend's own. Numerics never change (the same calls in
 * the same order). One attach per backend; detach before the mt_op_timers goes away. */
#ifndef MT_BACKEND_TIMED_H
#define MT_BACKEND_TIMED_H

#include <stdint.h>
#include <stdio.h>

#include "core/backend.h"
#include "core/timing.h"

/* the ops of MT_BACKEND_OPS (core/backend.h), the sums of squares apart, then the memory ops */
#define MT_OP_ENUM_(op, argt, cls, use) MT_OP_##op,
typedef enum {
    MT_BACKEND_OPS(MT_OP_ENUM_)
    MT_OP_sum_squares,
    MT_OP_memset_zero,
    MT_OP_copy_h2d,
    MT_OP_copy_d2h,
    MT_OP_copy_d2d,
    MT_OP_COUNT
} mt_op_id;
#undef MT_OP_ENUM_

typedef struct mt_op_timers {
    const struct mt_backend_i *inner; /* the backend's own table */
    struct mt_backend_i table;        /* the timed one be->i points to while attached */
    mt_timing *probe;                 /* the class timers: active[] says whether to time, record() adds */
    int sync;                         /* wait for the device after each timed op (not host memory) */
    double ms[MT_OP_COUNT];           /* since attach: each op's total time and calls */
    int64_t calls[MT_OP_COUNT];
} mt_op_timers;

const char *mt_op_name(mt_op_id id);
mt_timer_id mt_op_class(mt_op_id id);
/* Times be's ops from now on into ot and probe (probe's record receives each op's span under its
 * class timer id, when that id is active). MT_ERR_UNSUPPORTED when be is already timed. */
mt_status mt_op_timers_attach(mt_backend *be, mt_op_timers *ot, mt_timing *probe);
/* Gives be its own table back (no-op when be is not timed). */
void mt_op_timers_detach(mt_backend *be);
/* The per-op table on f: calls and ms per iteration over n_iters iterations, each op's share of the
 * ops' total, by class; `who` names the rank ("rank 0"). Ops never called are left out. */
void mt_op_timers_print(const mt_op_timers *ot, FILE *f, const char *prefix, const char *who, int64_t n_iters);

#endif
