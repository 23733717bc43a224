/* timers.c — the probe's callbacks (accumulate,
 * feed the profiler) and the '(min, max) time across ranks (ms):' block (see timers.h). */
#include "train/timers.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static void on_record(mt_timing *probe, mt_timer_id id, double t0, double t1, int mb, int chunk) {
    mt_timers *tm = (mt_timers *)probe;
    if (tm->timed[id]) tm->acc[id] += t1 - t0;
    if (tm->prof && tm->prof->recording && id < MT_TM_OPS_FIRST) mt_profile_add(tm->prof, id, t0, t1, mb, chunk, tm->iteration);
}

static void on_sync(mt_timing *probe) {
    mt_timers *tm = (mt_timers *)probe;
    (void)tm->be->i->sync(tm->be); /* a failure shows again at the next device call */
}

mt_status mt_timers_init(mt_timers *tm, const mt_recipe *r, const mt_parallel_state *ps, mt_backend *be,
                         mt_profiler *prof) {
    mt_status st = MT_OK;
    memset(tm, 0, sizeof *tm);
    tm->probe.record = on_record;
    tm->probe.sync = on_sync;
    tm->level = r->logging.timing_level;
    tm->option = r->logging.timing_option;
    tm->prof = prof && prof->on ? prof : NULL;
    tm->be = be;
    tm->ps = ps;
    for (int i = 0; i < MT_TM_COUNT; i++) {
        tm->timed[i] = mt_timer_level((mt_timer_id)i) <= tm->level;
        tm->names[i] = mt_timer_name((mt_timer_id)i);
    }
    if (tm->level == 0) return MT_OK;
    const size_t n = (size_t)(1 + ps->size) * MT_TM_COUNT;
    tm->host = calloc(n, sizeof *tm->host);
    tm->text_bytes = (size_t)(MT_TM_COUNT + 4) * (128 + (tm->option == MT_TIMING_ALL ? (size_t)ps->size * 32 : 0));
    tm->text = malloc(tm->text_bytes);
    if (!tm->host || !tm->text) {
        st = mt_errorf(MT_ERR_OOM, "timers: %zu floats", n);
        goto out;
    }
    if (ps->size > 1) MT_CHECK(be->i->alloc(be, n * sizeof(float), &tm->dev));
out:
    if (st != MT_OK) mt_timers_free(tm);
    return st;
}

void mt_timers_free(mt_timers *tm) {
    if (tm->dev) tm->be->i->free(tm->be, tm->dev);
    free(tm->host);
    free(tm->text);
    memset(tm, 0, sizeof *tm);
}

static void set_active(mt_timers *tm) {
    const int all = tm->prof && tm->prof->recording;
    for (int i = 0; i < MT_TM_COUNT; i++) /* the op timers only at level 3: a trace holds phases, not ops */
        tm->probe.active[i] = !tm->paused && !tm->between && (tm->timed[i] || (all && i < MT_TM_OPS_FIRST));
}

void mt_timers_iteration(mt_timers *tm, int64_t it) {
    tm->iteration = it;
    tm->between = 0;
    if (tm->prof) mt_profile_iteration(tm->prof, it);
    set_active(tm);
}

void mt_timers_step_done(mt_timers *tm) {
    tm->between = 1;
    set_active(tm);
}

void mt_timers_pause(mt_timers *tm) {
    tm->paused = 1;
    set_active(tm);
}

void mt_timers_resume(mt_timers *tm) {
    tm->paused = 0;
    set_active(tm);
}

/* appends to the block (truncates silently at the buffer's end) */
__attribute__((format(printf, 3, 4))) static void text_add(mt_timers *tm, size_t *len, const char *fmt, ...) {
    if (*len + 1 >= tm->text_bytes) return;
    va_list ap;
    va_start(ap, fmt);
    const int k = vsnprintf(tm->text + *len, tm->text_bytes - *len, fmt, ap);
    va_end(ap);
    if (k > 0) *len = *len + (size_t)k < tm->text_bytes ? *len + (size_t)k : tm->text_bytes - 1;
}

/* "name " padded with dots to 48 characters, as Megatron's (name + ' ').ljust(48, '.') */
static void text_name(mt_timers *tm, size_t *len, const char *name) {
    char pad[49];
    size_t k = strlen(name);
    if (k > 47) k = 47;
    memcpy(pad, name, k);
    pad[k++] = ' ';
    while (k < 48) pad[k++] = '.';
    pad[k] = 0;
    text_add(tm, len, "%s", pad);
}

mt_status mt_timers_log(mt_timers *tm, FILE *log, const char *prefix, int64_t n_iters) {
    mt_status st = MT_OK;
    MT_CHECK(mt_timers_gather(tm, n_iters));
    mt_timers_print(tm, log, prefix);
out:
    return st;
}

mt_status mt_timers_gather(mt_timers *tm, int64_t n_iters) {
    mt_status st = MT_OK;
    memset(tm->ran, 0, sizeof tm->ran);
    if (tm->level == 0) return MT_OK;
    const int size = tm->ps->size, K = MT_TM_COUNT;
    float *mine = tm->host, *all = tm->host + K; /* all[r * K + i] */
    for (int i = 0; i < K; i++) mine[i] = (float)tm->acc[i];
    memset(tm->acc, 0, sizeof tm->acc);
    const mt_group *w = mt_pstate_group(tm->ps, MT_PG_WORLD);
    if (w->size > 1) {
        float *dev = tm->dev;
        MT_CHECK(tm->be->i->copy_h2d(tm->be, dev, mine, (size_t)K * sizeof(float)));
        MT_CHECK(w->comm->i->allgather(w->comm, dev, dev + K, (size_t)K, MT_F32));
        MT_CHECK(tm->be->i->copy_d2h(tm->be, all, dev + K, (size_t)size * K * sizeof(float)));
    } else {
        memcpy(all, mine, (size_t)K * sizeof(float));
    }
    tm->norm = n_iters > 0 ? (double)n_iters : 1.0;
    for (int i = 0; i < K; i++) { /* Megatron's rule: a timer counts on the ranks that ran it (time > 0) */
        tm->lo_ms[i] = tm->hi_ms[i] = 0;
        if (!tm->timed[i]) continue;
        for (int r = 0; r < size; r++) {
            const double v = all[(size_t)r * K + i] / tm->norm;
            if (v <= 0) continue;
            if (tm->ran[i] == 0 || v < tm->lo_ms[i]) tm->lo_ms[i] = v;
            if (tm->ran[i] == 0 || v > tm->hi_ms[i]) tm->hi_ms[i] = v;
            tm->ran[i]++;
        }
    }
out:
    return st;
}

void mt_timers_print(mt_timers *tm, FILE *log, const char *prefix) {
    if (tm->level == 0 || !log) return;
    const int size = tm->ps->size, K = MT_TM_COUNT;
    const float *all = tm->host + K;
    const double norm = tm->norm > 0 ? tm->norm : 1.0;
    size_t len = 0;
    text_add(tm, &len, "%s%s", prefix,
             tm->option == MT_TIMING_ALL   ? "times across ranks (ms):"
             : tm->option == MT_TIMING_MAX ? "max time across ranks (ms):"
                                           : "(min, max) time across ranks (ms):");
    int any = 0;
    for (int i = 0; i < K; i++) {
        if (!tm->timed[i] || tm->ran[i] == 0) continue;
        const double lo = tm->lo_ms[i], hi = tm->hi_ms[i];
        any = 1;
        if (tm->option == MT_TIMING_ALL) {
            text_add(tm, &len, "\n  %s:", mt_timer_name((mt_timer_id)i));
            for (int r = 0; r < size; r++) {
                const double v = all[(size_t)r * K + i];
                if (v > 0) text_add(tm, &len, "\n     rank %2d: %.2f", r, v / norm);
            }
            continue;
        }
        text_add(tm, &len, "\n    ");
        text_name(tm, &len, mt_timer_name((mt_timer_id)i));
        if (tm->option == MT_TIMING_MAX) text_add(tm, &len, ": %.2f", hi);
        else text_add(tm, &len, ": (%.2f, %.2f)", lo, hi);
    }
    if (!any) return; /* Megatron prints nothing when no timer ran */
    if (size > 1) { /* the slowest rank in forward-backward against the fastest */
        int slow = -1, fast = -1;
        for (int r = 0; r < size; r++) {
            const double v = all[(size_t)r * K + MT_TM_FWD_BWD];
            if (v <= 0) continue;
            if (slow < 0 || v > all[(size_t)slow * K + MT_TM_FWD_BWD]) slow = r;
            if (fast < 0 || v < all[(size_t)fast * K + MT_TM_FWD_BWD]) fast = r;
        }
        if (slow >= 0) {
            const double vs = all[(size_t)slow * K + MT_TM_FWD_BWD] / norm, vf = all[(size_t)fast * K + MT_TM_FWD_BWD] / norm;
            text_add(tm, &len, "\n%sstraggler: rank %d forward-backward %.2f ms vs fastest %.2f ms (rank %d, %+.0f%%)",
                     prefix, slow, vs, vf, fast, vf > 0 ? 100.0 * (vs - vf) / vf : 0.0);
        }
    }
    text_add(tm, &len, "\n");
    fputs(tm->text, log);
}
