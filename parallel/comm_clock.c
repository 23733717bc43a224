/* comm_clock.c — per-group collective clocks: reset, sums and the end-of-run lines (comm_clock.h). */
#include "parallel/comm_clock.h"

#include <string.h>

void mt_comm_clocks_reset(mt_comm_clocks *c) { memset(c, 0, sizeof *c); }

void mt_comm_clocks_add(mt_comm_clocks *sum, const mt_comm_clocks *c) {
    for (int g = 0; g < MT_PG_COUNT; g++) {
        sum->g[g].ms += c->g[g].ms;
        sum->g[g].n_calls += c->g[g].n_calls;
    }
}

double mt_comm_clocks_total_ms(const mt_comm_clocks *c) {
    double ms = 0;
    for (int g = 0; g < MT_PG_COUNT; g++) ms += c->g[g].ms;
    return ms;
}

/* groups whose layer reports on a line of its own, and what the line calls the time */
static const struct {
    mt_pgroup id;
    const char *what;
} own_lines[] = {
    {MT_PG_EP, "expert all-to-all"},
    {MT_PG_CP, "cp ring exchange"},
};

void mt_comm_clocks_print(FILE *log, const char *prefix, const mt_parallel_state *ps, const mt_comm_clocks *sum,
                          double grad_ms, double n_iters, double mean_ms) {
    if (!log || n_iters <= 0) return;
    for (size_t i = 0; i < sizeof own_lines / sizeof own_lines[0]; i++) {
        if (mt_pstate_group(ps, own_lines[i].id)->size <= 1) continue;
        const double ms = sum->g[own_lines[i].id].ms / n_iters;
        fprintf(log, "%smtrain: %s %.2f ms/iteration = %.1f%% of %.2f ms, this rank, iterations after the first\n",
                prefix, own_lines[i].what, ms, 100.0 * ms / mean_ms, mean_ms);
    }
    if (ps->size <= 1) return;
    const double tp_ms = sum->g[MT_PG_TP].ms / n_iters, dp_ms = grad_ms / n_iters;
    fprintf(log,
            "%smtrain: communication %.2f ms/iteration = %.1f%% of %.2f ms (tp %.2f ms in %.0f collectives, dp %.2f "
            "ms), this rank, iterations after the first\n",
            prefix, tp_ms + dp_ms, 100.0 * (tp_ms + dp_ms) / mean_ms, mean_ms, tp_ms,
            (double)sum->g[MT_PG_TP].n_calls / n_iters, dp_ms);
}
