/* schedule_timeline.c — `mtrain plan --timeline` and `--timeline-svg FILE`: the p schedule tables of
 * parallel/schedule.c (the ones train/pipeline.c executes), timed by its simulator, drawn as one
 * row per stage over time in the terminal or as an SVG (see schedule_timeline.h). */
#include "plan/schedule_timeline.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/data/tmpfiles.h"
#include "core/model/model_layout.h"

void mt_pp_timeline_free(mt_pp_timeline *tl) {
    free(tl->off);
    free(tl->steps);
    free(tl->start);
    free(tl->end);
    free(tl->f_vs);
    free(tl->b_vs);
    free(tl->busy);
    memset(tl, 0, sizeof *tl);
}

mt_status mt_pp_timeline_build(mt_sched kind, int p, int m, int v, const double *f_vs, const double *b_vs,
                                 mt_pp_timeline *tl) {
    mt_status st = MT_OK;
    const mt_pp_step **tables = NULL;
    double **starts = NULL;
    int *n_steps = NULL;
    mt_pp_stage_stats *stats = NULL;
    memset(tl, 0, sizeof *tl);
    MT_CHECK(mt_schedule_check(kind, p, m, v));
    if ((long long)p * m * v > 1000000) {
        st = mt_errorf(MT_ERR_CONFIG, "timeline: %d stages x %d micro-batches x %d chunks is too many steps to draw; "
                       "lower training.global_batch for the picture", p, m, v);
        goto out;
    }
    tl->kind = kind;
    tl->p = p;
    tl->m = m;
    tl->v = v;
    tl->unit = !f_vs || !b_vs;
    const int cap = mt_schedule_max_steps(kind, p, m, v), pv = p * v;
    tl->off = calloc((size_t)p + 1, sizeof *tl->off);
    tl->steps = malloc((size_t)cap * p * sizeof *tl->steps);
    tl->start = calloc((size_t)cap * p, sizeof *tl->start);
    tl->end = calloc((size_t)cap * p, sizeof *tl->end);
    tl->f_vs = malloc((size_t)pv * sizeof *tl->f_vs);
    tl->b_vs = malloc((size_t)pv * sizeof *tl->b_vs);
    tl->busy = calloc((size_t)p, sizeof *tl->busy);
    tables = malloc((size_t)p * sizeof *tables);
    starts = malloc((size_t)p * sizeof *starts);
    n_steps = calloc((size_t)p, sizeof *n_steps);
    stats = calloc((size_t)p, sizeof *stats);
    if (!tl->off || !tl->steps || !tl->start || !tl->end || !tl->f_vs || !tl->b_vs || !tl->busy || !tables || !starts ||
        !n_steps || !stats) {
        st = mt_errorf(MT_ERR_OOM, "timeline: %d stages of %d steps", p, cap);
        goto out;
    }
    for (int i = 0; i < pv; i++) {
        tl->f_vs[i] = tl->unit ? 1.0 : f_vs[i];
        tl->b_vs[i] = tl->unit ? 2.0 : b_vs[i];
    }
    for (int s = 0; s < p; s++) { /* stage tables packed one after another */
        MT_CHECK(mt_schedule_build(kind, p, m, v, s, tl->steps + tl->off[s], cap, &n_steps[s]));
        tl->off[s + 1] = tl->off[s] + n_steps[s];
        tables[s] = tl->steps + tl->off[s];
        starts[s] = tl->start + tl->off[s];
    }
    tl->n_total = tl->off[p];
    mt_pp_sim_opts o = MT_PP_SIM_UNIT;
    o.f_vstage = tl->f_vs;
    o.b_vstage = tl->b_vs;
    mt_pp_sim_result res;
    MT_CHECK(mt_schedule_simulate(p, m, v, tables, n_steps, &o, &res, stats, starts));
    tl->makespan = res.makespan;
    tl->bubble = res.bubble;
    tl->formula = mt_schedule_bubble_formula(kind, p, m, v);
    for (int s = 0; s < p; s++) {
        tl->busy[s] = stats[s].busy;
        for (int i = tl->off[s]; i < tl->off[s + 1]; i++) { /* F / B: start + cost; a transfer: until the stage moves on */
            const mt_pp_step *x = &tl->steps[i];
            const int vs = x->chunk * p + s;
            if (x->op == MT_PP_FWD) tl->end[i] = tl->start[i] + tl->f_vs[vs];
            else if (x->op == MT_PP_BWD) tl->end[i] = tl->start[i] + tl->b_vs[vs];
            else {
                int j = i + 1;
                while (j < tl->off[s + 1] && mt_pp_op_is_comm(tl->steps[j].op) && tl->steps[j].group == x->group) j++;
                tl->end[i] = j < tl->off[s + 1] ? tl->start[j] : stats[s].finish;
            }
        }
    }
out:
    free(tables);
    free(starts);
    free(n_steps);
    free(stats);
    if (st != MT_OK) mt_pp_timeline_free(tl);
    return st;
}

/* Forward FLOPs of each virtual stage from the layout pl (see mt_pp_vstage_flops). */
static mt_status vstage_flops(const mt_recipe *r, const mt_param_layout *pl, double *f_vs, int n_vs) {
    const int moe = r->model.moe.experts > 0;
    mt_model_fwd_flops fl;
    mt_model_fwd_flops_per_token(pl, moe ? r->model.moe.experts : 0, moe ? r->model.moe.top_k : 1, &fl);
    const int p = r->parallel.pipeline, v = p > 1 ? r->parallel.virtual_pipeline : 1;
    const int uneven = p > 1 && mt_recipe_uneven_stages(r); /* each chunk its own layers (recipe_stages.c) */
    if (p < 1 || v < 1 || n_vs != p * v || (!uneven && pl->L_global % (p * v) != 0))
        return mt_errorf(MT_ERR_CONFIG, "timeline: model.layers = %d do not split into parallel.pipeline x "
                         "parallel.virtual_pipeline = %d x %d equal chunks; choose layers divisible by their product",
                         pl->L_global, p, v);
    for (int s = 0; s < p; s++)
        for (int k = 0; k < v; k++) { /* a chunk's MoE layers and its dense ones (mixed: mt_recipe_moe_layer) */
            const int n = mt_recipe_chunk_layers(r, s, k), l0 = mt_recipe_chunk_first_layer(r, s, k);
            const int n_moe = moe ? mt_recipe_moe_layers(r, l0, n) : n;
            f_vs[k * p + s] = fl.layer * n_moe + fl.dense_layer * (n - n_moe);
        }
    f_vs[n_vs - 1] += fl.head; /* virtual stage p v - 1 = chunk v - 1 of stage p - 1: the output layer */
    return MT_OK;
}

mt_status mt_pp_vstage_flops(const mt_recipe *r, double *f_vs, int n_vs) {
    mt_param_layout *pl = malloc(sizeof *pl); /* large: on the heap, and each call its own (reentrant) */
    if (!pl) return mt_errorf(MT_ERR_OOM, "timeline: %zu bytes for the model layout", sizeof *pl);
    mt_status st = mt_param_layout_build(r, pl);
    if (st == MT_OK) st = vstage_flops(r, pl, f_vs, n_vs);
    free(pl);
    return st;
}

/* ---------- terminal ---------- */

/* "F3", "f3" (chunk 1), "F3:2" (chunk 2 of v > 2) into buf */
static void step_label(const mt_pp_timeline *tl, const mt_pp_step *x, char *buf, size_t n) {
    const int fwd = x->op == MT_PP_FWD;
    if (tl->v == 1) snprintf(buf, n, "%c%d", fwd ? 'F' : 'B', x->mb);
    else if (tl->v == 2) snprintf(buf, n, "%c%d", fwd ? (x->chunk ? 'f' : 'F') : (x->chunk ? 'b' : 'B'), x->mb);
    else snprintf(buf, n, "%c%d:%d", fwd ? 'F' : 'B', x->mb, x->chunk);
}

void mt_pp_timeline_print(FILE *f, const mt_pp_timeline *tl, int width) {
    if (width <= 0) width = 180;
    if (width < 20) width = 20;
    /* columns per time unit: the cheapest step gets 3 ("F3 ") when that fits, else a whole number
     * of columns the width allows (2, then 1), else a fraction */
    double smallest = INFINITY;
    for (int i = 0; i < tl->p * tl->v; i++) smallest = fmin(smallest, fmin(tl->f_vs[i], tl->b_vs[i]));
    if (!(smallest > 0)) smallest = 1;
    double cpu = 3.0 / smallest; /* columns per time unit */
    while (tl->makespan * cpu > width && cpu * smallest > 1.0) cpu = (floor(cpu * smallest + 1e-9) - 1) / smallest;
    if (tl->makespan * cpu > width) cpu = width / tl->makespan;
    const int ncol = (int)ceil(tl->makespan * cpu - 1e-9);
    char *row = malloc((size_t)ncol + 1);
    if (!row) return;
    fprintf(f, "pipeline timeline: %s schedule, p = %d stages, m = %d micro-batches, v = %d chunk%s per stage "
            "(the tables the trainer runs, timed by plan/schedule_sim.c)\n", mt_schedule_name(tl->kind), tl->p, tl->m,
            tl->v, tl->v > 1 ? "s" : "");
    if (tl->unit) fprintf(f, "costs: forward 1, backward 2 time units on every stage, transfers free\n");
    else fprintf(f, "costs: forward of each virtual stage by its FLOPs (the last holds the output layer), backward 2x, "
                 "transfers free; time unit = the smallest\n");
    for (int s = 0; s < tl->p; s++) {
        memset(row, '.', (size_t)ncol);
        row[ncol] = 0;
        for (int i = tl->off[s]; i < tl->off[s + 1]; i++) { /* waits inside transfer groups first */
            const mt_pp_step *x = &tl->steps[i];
            if (!mt_pp_op_is_comm(x->op)) continue;
            int c0 = (int)lround(tl->start[i] * cpu), c1 = (int)lround(tl->end[i] * cpu);
            for (int c = c0; c < c1 && c < ncol; c++) row[c] = '~';
        }
        for (int i = tl->off[s]; i < tl->off[s + 1]; i++) {
            const mt_pp_step *x = &tl->steps[i];
            if (mt_pp_op_is_comm(x->op)) continue;
            int c0 = (int)lround(tl->start[i] * cpu), c1 = (int)lround(tl->end[i] * cpu);
            if (c1 <= c0) c1 = c0 + 1;
            char lab[24];
            step_label(tl, x, lab, sizeof lab);
            const int n_lab = (int)strlen(lab), glyph = lab[0];
            for (int c = c0; c < c1 && c < ncol; c++) {
                const int k = c - c0;
                /* the label when it fits (with a space before the next step when there is room), else the letter */
                row[c] = c1 - c0 >= n_lab ? (k < n_lab ? lab[k] : ' ') : (char)glyph;
            }
        }
        fprintf(f, "  stage %d |%s| busy %.0f%%\n", s, row, 100.0 * tl->busy[s] / tl->makespan);
    }
    /* axis: a tick every 5 (or more) units */
    int step = 1;
    while (step * cpu < 6) step = step < 5 ? 5 : step * 2;
    memset(row, ' ', (size_t)ncol);
    row[ncol] = 0;
    char axis[32];
    for (int t = 0; t <= (int)tl->makespan; t += step) {
        const int c = (int)lround(t * cpu);
        const int k = snprintf(axis, sizeof axis, "%d", t);
        if (c + k <= ncol) memcpy(row + c, axis, (size_t)k);
    }
    fprintf(f, "  time    |%s|\n", row);
    free(row);
    fprintf(f, "legend: F<mb> forward of micro-batch <mb>, B<mb> backward%s; ~ waiting in a send/recv (bubble); "
            ". idle before the first or after the last step (bubble)\n",
            tl->v == 2 ? "; f / b the same on the stage's second chunk"
            : tl->v > 2 ? "; F<mb>:<c> on the stage's chunk c" : "");
    const double vm = tl->kind == MT_SCHED_INTERLEAVED ? (double)tl->v * tl->m : (double)tl->m;
    fprintf(f, "bubble: %.1f%% of the step (idle share, mean over stages; makespan %.4g time units)\n",
            100.0 * tl->bubble, tl->makespan);
    if (tl->kind == MT_SCHED_INTERLEAVED)
        fprintf(f, "formula: (p-1)/(v*m+p-1) = %d/(%d*%d+%d) = %.1f%% (Megatron's bubble time over ideal time (p-1)/(v*m) "
                "= %.1f%%)%s\n", tl->p - 1, tl->v, tl->m, tl->p - 1, 100.0 * tl->formula, 100.0 * (tl->p - 1) / vm,
                tl->unit ? (fabs(tl->bubble - tl->formula) < 1e-9 ? ": equal" : ": DIFFERS") : "");
    else
        fprintf(f, "formula: (p-1)/(m+p-1) = %d/(%d+%d) = %.1f%% (Megatron's bubble time over ideal time (p-1)/m = %.1f%%)%s\n",
                tl->p - 1, tl->m, tl->p - 1, 100.0 * tl->formula, 100.0 * (tl->p - 1) / vm,
                tl->unit ? (fabs(tl->bubble - tl->formula) < 1e-9 ? ": equal" : ": DIFFERS") : "");
}

/* ---------- SVG ---------- */

static void xml_text(FILE *f, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\t') fputc(*s, f);
        }
    }
}

void mt_pp_timeline_json(FILE *f, const mt_pp_timeline *tl) {
    fprintf(f, "{\"kind\": \"%s\", \"p\": %d, \"m\": %d, \"v\": %d, \"unit_costs\": %s, \"makespan\": %.9g, "
               "\"bubble\": %.9g, \"formula\": %.9g, \"stages\": [",
            mt_schedule_name(tl->kind), tl->p, tl->m, tl->v, tl->unit ? "true" : "false", tl->makespan, tl->bubble,
            tl->formula);
    for (int s = 0; s < tl->p; s++) {
        fprintf(f, "%s\n {\"stage\": %d, \"busy\": %.9g, \"steps\": [", s ? "," : "", s, tl->busy[s]);
        for (int i = tl->off[s]; i < tl->off[s + 1]; i++) {
            const mt_pp_step *x = &tl->steps[i];
            fprintf(f, "%s{\"op\": \"%s\", \"mb\": %d, \"chunk\": %d, \"peer\": %d, \"start\": %.9g, \"end\": %.9g}",
                    i > tl->off[s] ? ", " : "", mt_pp_op_name(x->op), x->mb, x->chunk, x->peer, tl->start[i], tl->end[i]);
        }
        fputs("]}", f);
    }
    fputs("]}\n", f);
}

void mt_pp_timeline_svg(FILE *f, const mt_pp_timeline *tl, const char *title) {
    const double left = 70, top = 56, row_h = 26, gap = 6, plot_w = 960;
    const double scale = tl->makespan > 0 ? plot_w / tl->makespan : 1;
    const double height = top + tl->p * (row_h + gap) + 70;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
            "font-family=\"monospace\" font-size=\"11\">\n", left + plot_w + 30, height, left + plot_w + 30, height);
    fputs("<defs><pattern id=\"bubble\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
          "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#eeeeee\"/>"
          "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#bbbbbb\" stroke-width=\"2\"/></pattern></defs>\n", f);
    fputs("<title>", f);
    xml_text(f, title ? title : "pipeline timeline");
    fputs("</title>\n<text x=\"10\" y=\"18\" font-size=\"13\">", f);
    xml_text(f, title ? title : "pipeline timeline");
    fprintf(f, "</text>\n<text x=\"10\" y=\"36\">%s schedule, p = %d, m = %d, v = %d: bubble %.1f%% (simulated), "
            "formula %s = %.1f%%</text>\n", mt_schedule_name(tl->kind), tl->p, tl->m, tl->v, 100.0 * tl->bubble,
            tl->kind == MT_SCHED_INTERLEAVED ? "(p-1)/(v*m+p-1)" : "(p-1)/(m+p-1)", 100.0 * tl->formula);
    static const char *const fwd_fill[4] = { "#4e79a7", "#76a5d3", "#2c5a85", "#9ec3e6" };
    static const char *const bwd_fill[4] = { "#e15759", "#f28e8c", "#b33a3c", "#f7b6b5" };
    for (int s = 0; s < tl->p; s++) {
        const double y = top + s * (row_h + gap);
        fprintf(f, "<text x=\"8\" y=\"%.1f\">stage %d</text>\n", y + row_h * 0.65, s);
        fprintf(f, "<rect class=\"bubble\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"url(#bubble)\"/>\n",
                left, y, tl->makespan * scale, row_h);
        for (int i = tl->off[s]; i < tl->off[s + 1]; i++) {
            const mt_pp_step *x = &tl->steps[i];
            if (mt_pp_op_is_comm(x->op)) continue;
            const int fwd = x->op == MT_PP_FWD;
            const double x0 = left + tl->start[i] * scale, w = (tl->end[i] - tl->start[i]) * scale;
            char lab[24];
            step_label(tl, x, lab, sizeof lab);
            fprintf(f, "<rect class=\"%s\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\" "
                    "stroke=\"#ffffff\" stroke-width=\"0.5\"><title>stage %d %s micro-batch %d chunk %d: %.4g to %.4g</title></rect>\n",
                    fwd ? "fwd" : "bwd", x0, y, w, row_h, (fwd ? fwd_fill : bwd_fill)[x->chunk % 4], s,
                    fwd ? "forward" : "backward", x->mb, x->chunk, tl->start[i], tl->end[i]);
            if (w >= 7.0 * (double)strlen(lab))
                fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" fill=\"#ffffff\">%s</text>\n", x0 + 2, y + row_h * 0.65, lab);
        }
    }
    /* time axis */
    const double ya = top + tl->p * (row_h + gap) + 4;
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000000\"/>\n", left, ya,
            left + tl->makespan * scale, ya);
    double tick = 1;
    while (tick * scale < 40) tick *= tick < 5 ? 5 : 2;
    for (double t = 0; t <= tl->makespan + 1e-9; t += tick)
        fprintf(f, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#000000\"/>"
                "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", left + t * scale, ya, left + t * scale,
                ya + 4, left + t * scale, ya + 16, t);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">time (%s)</text>\n", left, ya + 32,
            tl->unit ? "forward = 1, backward = 2" : "units of the cheapest step's cost");
    /* legend */
    const double yl = ya + 42;
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"10\" fill=\"%s\"/><text x=\"%.1f\" y=\"%.1f\">forward</text>\n",
            left, yl, fwd_fill[0], left + 18, yl + 9);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"10\" fill=\"%s\"/><text x=\"%.1f\" y=\"%.1f\">backward</text>\n",
            left + 90, yl, bwd_fill[0], left + 108, yl + 9);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"10\" fill=\"url(#bubble)\" stroke=\"#999999\"/>"
            "<text x=\"%.1f\" y=\"%.1f\">bubble (idle or waiting in send/recv)</text>\n", left + 190, yl, left + 208, yl + 9);
    if (tl->v > 1)
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">lighter / darker shade: model chunk 1, 2, ... of the stage</text>\n",
                left + 480, yl + 9);
    fputs("</svg>\n", f);
}

mt_status mt_pp_timeline_write_svg(const char *path, const mt_pp_timeline *tl, const char *title) {
    char tmp[4096];
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) /* renaming over a device or folder would replace it */
        return mt_errorf(MT_ERR_IO, "--timeline-svg %s: exists and is not a regular file; name a file to write", path);
    mt_status st = mt_tmpfiles_name(path, "tmp", tmp, sizeof tmp);
    if (st != MT_OK) return st;
    FILE *f = fopen(tmp, "w");
    if (!f) return mt_errorf(MT_ERR_IO, "--timeline-svg %s: cannot create %s: %s; pick a writable folder", path, tmp,
                             strerror(errno));
    const int slot = mt_tmpfiles_register(tmp);
    mt_pp_timeline_svg(f, tl, title);
    int err = ferror(f) ? (errno ? errno : EIO) : 0;
    if (fflush(f) != 0 && !err) err = errno;
    if (!err && fsync(fileno(f)) != 0) err = errno;
    if (fclose(f) != 0 && !err) err = errno;
    if (!err && rename(tmp, path) != 0) err = errno;
    if (err) {
        unlink(tmp);
        st = mt_errorf(MT_ERR_IO, "--timeline-svg %s: writing failed: %s", path, strerror(err));
    }
    if (slot >= 0) mt_tmpfiles_forget(slot);
    return st;
}
