/* backend_timed.c — the timed op table (see backend_timed.h): one wrapper per op, generated from
 * MT_BACKEND_OPS (core/backend.h), plus the four memory ops with their own signatures; the end-of-run table. */
#include "core/backend_timed.h"

#include <string.h>

#include "core/clock.h"

static const struct {
    const char *name;
    mt_timer_id cls;
} op_table[MT_OP_COUNT] = {
#define MT_OP_ROW_(op, argt, cls, use) [MT_OP_##op] = { #op, MT_TM_OPS_##cls },
    MT_BACKEND_OPS(MT_OP_ROW_)
#undef MT_OP_ROW_
    [MT_OP_sum_squares] = { "sum_squares", MT_TM_OPS_OPT },
    [MT_OP_memset_zero] = { "memset_zero", MT_TM_OPS_MEM },
    [MT_OP_copy_h2d] = { "copy_h2d", MT_TM_OPS_MEM },
    [MT_OP_copy_d2h] = { "copy_d2h", MT_TM_OPS_MEM },
    [MT_OP_copy_d2d] = { "copy_d2d", MT_TM_OPS_MEM },
};

const char *mt_op_name(mt_op_id id) { return (unsigned)id < MT_OP_COUNT ? op_table[id].name : "?"; }
mt_timer_id mt_op_class(mt_op_id id) { return (unsigned)id < MT_OP_COUNT ? op_table[id].cls : MT_TM_OPS_MEM; }

/* the op began at t0 and returned st: wait for the device (device backends), book the span */
static mt_status op_done(mt_backend *be, mt_op_timers *ot, mt_op_id id, double t0, mt_status st) {
    if (ot->sync && st == MT_OK) st = ot->inner->sync(be);
    const double t1 = mt_clock_ms();
    ot->ms[id] += t1 - t0;
    ot->calls[id]++;
    ot->probe->record(ot->probe, op_table[id].cls, t0, t1, -1, -1);
    return st;
}

/* the op's row for this call: a sum of squares (the gradient norm) is timed apart from sums */
static mt_op_id call_id(mt_op_id id, const void *a) {
    return id == MT_OP_sum && ((const mt_sum_args *)a)->squares ? MT_OP_sum_squares : id;
}

#define MT_OP_WRAP_(op, argt, klass, use)                                     \
    static mt_status timed_##op(mt_backend *be, const argt *a) {              \
        mt_op_timers *ot = be->op_timers;                                     \
        const mt_op_id id = call_id(MT_OP_##op, a);                           \
        if (!ot->probe->active[op_table[id].cls]) return ot->inner->op(be, a); \
        const double t0 = mt_clock_ms();                                      \
        return op_done(be, ot, id, t0, ot->inner->op(be, a));                 \
    }
MT_BACKEND_OPS(MT_OP_WRAP_)
#undef MT_OP_WRAP_

static mt_status timed_memset_zero(mt_backend *be, void *ptr, size_t n) {
    mt_op_timers *ot = be->op_timers;
    if (!ot->probe->active[MT_TM_OPS_MEM]) return ot->inner->memset_zero(be, ptr, n);
    const double t0 = mt_clock_ms();
    return op_done(be, ot, MT_OP_memset_zero, t0, ot->inner->memset_zero(be, ptr, n));
}

#define MT_OP_COPY_(op)                                                                    \
    static mt_status timed_##op(mt_backend *be, void *dst, const void *src, size_t n) {    \
        mt_op_timers *ot = be->op_timers;                                                  \
        if (!ot->probe->active[MT_TM_OPS_MEM]) return ot->inner->op(be, dst, src, n);      \
        const double t0 = mt_clock_ms();                                                   \
        return op_done(be, ot, MT_OP_##op, t0, ot->inner->op(be, dst, src, n));            \
    }
MT_OP_COPY_(copy_h2d)
MT_OP_COPY_(copy_d2h)
MT_OP_COPY_(copy_d2d)
#undef MT_OP_COPY_

mt_status mt_op_timers_attach(mt_backend *be, mt_op_timers *ot, mt_timing *probe) {
    if (be->op_timers) return mt_errorf(MT_ERR_UNSUPPORTED, "op timers: the backend's ops are already timed");
    memset(ot, 0, sizeof *ot);
    ot->inner = be->i;
    ot->probe = probe;
    ot->sync = !be->host_memory;
    ot->table = *be->i;
#define MT_OP_SET_(op, argt, cls, use) \
    if (ot->inner->op) ot->table.op = timed_##op;
    MT_BACKEND_OPS(MT_OP_SET_)
#undef MT_OP_SET_
    if (ot->inner->memset_zero) ot->table.memset_zero = timed_memset_zero;
    if (ot->inner->copy_h2d) ot->table.copy_h2d = timed_copy_h2d;
    if (ot->inner->copy_d2h) ot->table.copy_d2h = timed_copy_d2h;
    if (ot->inner->copy_d2d) ot->table.copy_d2d = timed_copy_d2d;
    be->op_timers = ot;
    be->i = &ot->table;
    return MT_OK;
}

void mt_op_timers_detach(mt_backend *be) {
    if (!be || !be->op_timers) return;
    be->i = be->op_timers->inner;
    be->op_timers = NULL;
}

void mt_op_timers_print(const mt_op_timers *ot, FILE *f, const char *prefix, const char *who, int64_t n_iters) {
    if (!f) return;
    const double n = n_iters > 0 ? (double)n_iters : 1.0;
    double total = 0;
    for (int i = 0; i < MT_OP_COUNT; i++) total += ot->ms[i];
    fprintf(f, "%sop timers (%s, per iteration over %lld iteration%s; %s):\n", prefix, who, (long long)n_iters,
            n_iters == 1 ? "" : "s", ot->sync ? "each op waited for the device" : "host ops");
    fprintf(f, "%s    %-22s %-16s %10s %12s %7s\n", prefix, "op", "class", "calls", "ms", "share");
    static const char *const cls_names[MT_TM_COUNT - MT_TM_OPS_FIRST] = { "gemm", "attention", "norm",
                                                                           "elementwise", "optimizer", "memory" };
    for (int c = MT_TM_OPS_FIRST; c < MT_TM_COUNT; c++)
        for (int i = 0; i < MT_OP_COUNT; i++) {
            if (op_table[i].cls != (mt_timer_id)c || ot->calls[i] == 0) continue;
            fprintf(f, "%s    %-22s %-16s %10.1f %12.3f %6.1f%%\n", prefix, op_table[i].name, cls_names[c - MT_TM_OPS_FIRST],
                    (double)ot->calls[i] / n, ot->ms[i] / n, total > 0 ? 100.0 * ot->ms[i] / total : 0.0);
        }
    fprintf(f, "%s    %-22s %-16s %10s %12.3f %6.1f%%\n", prefix, "all ops", "", "", total / n, 100.0);
}
