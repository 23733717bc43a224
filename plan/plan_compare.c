/* plan_compare.c — `mtrain plan --compare METRICS.jsonl`: a finished run's metrics (the trainer's
 * JSON lines, train/metrics.h) against the plan of the same recipe, term by term: forward,
 * backward, the collectives, the optimizer, forward-backward, the step, and the pipeline bubble.
 * Measured times are the timers of the log-line records (logging.timing_level >= 1; 2 adds
 * forward / backward compute and the pipeline transfers; 3 the backend's ops by class, set beside the
 * plan's GEMM, attention and elementwise terms), per iteration, min and max over the
 * ranks; the first log line (the warm-up iteration) is left out when there are others.
 * The bubble is measured two ways: "replayed" runs the run's own F / B cost of every virtual stage
 * (its "pp_cost": CPU time on the CPU backend) through the same schedule tables with free
 * transfers, so it is the schedule's idle share given the measured compute, unaffected by other
 * processes on shared cores; "wall" is the trainer's 1 - busy / table time, which also holds
 * transfer time and the time a rank was descheduled. Their difference is what the transfers and
 * the machine add. docs/plan.md, "Predicted against measured". */
#include "plan/plan_compare.h"

#include "plan/schedule_timeline.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/data/json_lines.h"
#include "core/json_tree.h"

#define CMP_MAX_VS 1024 /* virtual stages p v a record may carry */

typedef struct {
    const char *name;   /* the trainer's timer */
    double lo, hi;      /* weighted sums over the log records used */
    double w;           /* weight (iterations) those records cover */
} timer_acc;

typedef struct {
    int64_t n_iters;     /* iteration records */
    double ms_sum;       /* ms_per_iter of the iteration records after the first */
    int64_t n_ms;
    double first_ms;
    int n_logs, n_used;  /* log-line records; of them used (the first left out when others exist) */
    int64_t global_batch; /* > 0: only iterations of this batch count (the step the plan predicts) */
    int64_t n_ramp;       /* iterations left out for another batch (ramp-up), and log records with them */
    int n_ramp_logs;
    int have_layout, lt[10], lt_line;  /* tp pp vpp cp dp ep micro_batch n_micro global_batch world */
    double bubble_sum, bubble_w, formula;
    double *f_sum, *b_sum, cost_w;   /* pp_cost by virtual stage */
    int n_vs;
    char clock[8];
    timer_acc t[64];
    int n_t;
} cmp_data;

static const char *const layout_keys[10] = { "tp", "pp", "vpp", "cp", "dp", "ep", "micro_batch", "n_micro",
                                             "global_batch", "world" };

static double num(const mt_json_node *n, double dflt) {
    return n && n->type == MT_JSON_NUMBER ? n->number : dflt;
}

static timer_acc *timer_slot(cmp_data *d, const char *name) {
    for (int i = 0; i < d->n_t; i++)
        if (!strcmp(d->t[i].name, name)) return &d->t[i];
    if (d->n_t >= (int)(sizeof d->t / sizeof d->t[0])) return NULL;
    timer_acc *a = &d->t[d->n_t++];
    memset(a, 0, sizeof *a);
    a->name = strdup(name);
    return a->name ? a : NULL;
}

/* One log-line record: layout, timers, pp_cost, bubble, weighted by the iterations it covers. */
static mt_status take_log_record(cmp_data *d, const mt_json_node *o, const char *path, int64_t line, int use) {
    const double w = num(mt_json_get(o, "interval_iters"), 1);
    const mt_json_node *lay = mt_json_get(o, "layout");
    if (lay && lay->type == MT_JSON_OBJECT) {
        int v[10];
        for (int k = 0; k < 10; k++) v[k] = (int)num(mt_json_get(lay, layout_keys[k]), -1);
        if (!d->have_layout) {
            memcpy(d->lt, v, sizeof v);
            d->have_layout = 1;
            d->lt_line = (int)line;
        } else if (memcmp(d->lt, v, sizeof v)) {
            return mt_errorf(MT_ERR_DATA, "%s:%lld: the layout differs from line %d's: the file holds more than one run; "
                             "compare one run's metrics (a fresh --metrics file per run)", path, (long long)line, d->lt_line);
        }
    }
    if (!use) return MT_OK;
    d->n_used++;
    const mt_json_node *b = mt_json_get(o, "bubble");
    if (b && b->type == MT_JSON_NUMBER) {
        d->bubble_sum += w * b->number;
        d->bubble_w += w;
        d->formula = num(mt_json_get(o, "bubble_formula"), 0);
    }
    const mt_json_node *tm = mt_json_get(o, "timers");
    if (tm && tm->type == MT_JSON_OBJECT)
        for (size_t i = 0; i < tm->n_items; i++) {
            const mt_json_node *x = &tm->items[i];
            if (x->type != MT_JSON_ARRAY || x->n_items != 2 || x->items[0].type != MT_JSON_NUMBER ||
                x->items[1].type != MT_JSON_NUMBER)
                return mt_errorf(MT_ERR_DATA, "%s:%lld: timers.%s: expected [min, max] in ms", path, (long long)line, x->key);
            timer_acc *a = timer_slot(d, x->key);
            if (!a) return mt_errorf(MT_ERR_OOM, "plan --compare: too many timers");
            a->lo += w * x->items[0].number;
            a->hi += w * x->items[1].number;
            a->w += w;
        }
    const mt_json_node *pc = mt_json_get(o, "pp_cost");
    if (pc && pc->type == MT_JSON_OBJECT) {
        const mt_json_node *f = mt_json_get(pc, "f_ms"), *bb = mt_json_get(pc, "b_ms"), *ck = mt_json_get(pc, "clock");
        if (!f || !bb || f->type != MT_JSON_ARRAY || bb->type != MT_JSON_ARRAY || f->n_items != bb->n_items ||
            f->n_items < 1 || f->n_items > CMP_MAX_VS)
            return mt_errorf(MT_ERR_DATA, "%s:%lld: pp_cost: expected f_ms and b_ms arrays of p v numbers", path,
                             (long long)line);
        if (!d->f_sum) {
            d->n_vs = (int)f->n_items;
            d->f_sum = calloc((size_t)d->n_vs, sizeof *d->f_sum);
            d->b_sum = calloc((size_t)d->n_vs, sizeof *d->b_sum);
            if (!d->f_sum || !d->b_sum) return mt_errorf(MT_ERR_OOM, "plan --compare: %d virtual stages", d->n_vs);
        } else if ((int)f->n_items != d->n_vs) {
            return mt_errorf(MT_ERR_DATA, "%s:%lld: pp_cost has %zu virtual stages, earlier lines %d: more than one run "
                             "in the file", path, (long long)line, f->n_items, d->n_vs);
        }
        for (int i = 0; i < d->n_vs; i++) {
            d->f_sum[i] += w * num(&f->items[i], 0);
            d->b_sum[i] += w * num(&bb->items[i], 0);
        }
        d->cost_w += w;
        if (ck && ck->type == MT_JSON_STRING) snprintf(d->clock, sizeof d->clock, "%s", ck->str);
    }
    return MT_OK;
}

/* Reads the file in two passes over the lines: count the log records, then take them all but the
 * first (when more than one). With global_batch > 0, an iteration counts only when it trained that
 * many sequences (consumed_samples minus the previous record's: batch-size ramp-up iterations are
 * smaller), and a log record only when every iteration of its interval did. */
static mt_status read_metrics(const char *path, int64_t global_batch, cmp_data *d) {
    mt_status st = MT_OK;
    mt_json_parser *jp = NULL;
    char *line = NULL;
    size_t cap = 0;
    memset(d, 0, sizeof *d);
    d->global_batch = global_batch;
    for (int pass = 0; pass < 2 && st == MT_OK; pass++) {
        FILE *f = fopen(path, "r");
        if (!f) {
            st = mt_errorf(MT_ERR_IO, "--compare %s: cannot open: %s; pass the --metrics file of a finished run "
                           "(logging.metrics)", path, strerror(errno));
            break;
        }
        if (!jp && (st = mt_json_parser_new(&jp, MT_JSONL_PARSER_FLAGS)) != MT_OK) {
            fclose(f);
            break;
        }
        int64_t ln = 0, prev_cs = -1, run_full = 0; /* run_full: iterations of the full batch in a row */
        int log_i = 0, first_it = 1;
        ssize_t n;
        while ((n = getline(&line, &cap, f)) > 0) {
            ln++;
            while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
            size_t k = 0;
            while (k < (size_t)n && (line[k] == ' ' || line[k] == '\t')) k++;
            if (k == (size_t)n) continue;
            const mt_json_node *o;
            st = mt_json_parser_parse(jp, line, (size_t)n, path, &o);
            if (st != MT_OK) {
                st = mt_errorf(MT_ERR_DATA, "%s:%lld: %s", path, (long long)ln, mt_last_error());
                break;
            }
            const mt_json_node *it = mt_json_get(o, "iteration"), *ms = mt_json_get(o, "ms_per_iter");
            if (!it || !ms || ms->type != MT_JSON_NUMBER) continue; /* validation / test records */
            /* this iteration's batch: the samples it consumed (the first record of a fresh run: all of them) */
            const int64_t cs = (int64_t)num(mt_json_get(o, "consumed_samples"), -1);
            const int64_t batch = prev_cs >= 0 ? cs - prev_cs : (int64_t)num(it, 0) == 1 ? cs : -1;
            prev_cs = cs;
            const int full = global_batch <= 0 || batch < 0 || batch == global_batch;
            run_full = full ? run_full + 1 : 0;
            const mt_json_node *ivl = mt_json_get(o, "interval_iters");
            const int log_full = full && run_full >= (int64_t)num(ivl, 1);
            if (pass == 0) {
                d->n_iters++;
                if (!full) d->n_ramp++;
                if (first_it) d->first_ms = ms->number;
                else if (full) {
                    d->ms_sum += ms->number;
                    d->n_ms++;
                }
                first_it = 0;
                if (ivl && log_full) d->n_logs++;
                if (ivl && !log_full) d->n_ramp_logs++;
                continue;
            }
            if (!ivl || !log_full) continue;
            st = take_log_record(d, o, path, ln, d->n_logs == 1 || log_i > 0);
            log_i++;
            if (st != MT_OK) break;
        }
        if (st == MT_OK && ferror(f))
            st = mt_errorf(MT_ERR_IO, "--compare %s: reading failed: %s", path, strerror(errno));
        fclose(f);
        if (st == MT_OK && pass == 0 && d->n_iters == 0)
            st = mt_errorf(MT_ERR_DATA, "--compare %s: no iteration records (lines with \"iteration\" and "
                           "\"ms_per_iter\"); pass the --metrics file a training run wrote", path);
        if (st == MT_OK && pass == 0 && d->n_logs == 0 && d->n_ramp_logs > 0)
            st = mt_errorf(MT_ERR_DATA, "--compare %s: every log-line record covers batch-size ramp-up iterations "
                           "(fewer than training.global_batch = %lld sequences): compare a run that trains past "
                           "training.rampup_samples", path, (long long)d->global_batch);
        else if (st == MT_OK && pass == 0 && d->n_logs == 0)
            st = mt_errorf(MT_ERR_DATA, "--compare %s: no log-line records (with \"interval_iters\"): the run printed no "
                           "iteration line; train with logging.interval >= 1", path);
    }
    free(line);
    mt_json_parser_free(jp);
    return st;
}

static void cmp_free(cmp_data *d) {
    for (int i = 0; i < d->n_t; i++) free((char *)d->t[i].name);
    free(d->f_sum);
    free(d->b_sum);
}

mt_status mt_plan_compare_world(const char *metrics_path, int *world) {
    cmp_data d;
    *world = 0;
    mt_status st = read_metrics(metrics_path, 0, &d);
    if (st == MT_OK && d.have_layout) *world = d.lt[9];
    cmp_free(&d);
    return st;
}

/* ---------- the table ---------- */

typedef struct {
    const char *term;        /* what the row compares */
    const char *timers[10];  /* the trainer's timers summed for the measured column (NULL-ended) */
    double predicted_ms;     /* < 0: the plan has no such term (or no time model) */
} row_def;

static int find_timer(const cmp_data *d, const char *name) {
    for (int i = 0; i < d->n_t; i++)
        if (!strcmp(d->t[i].name, name)) return i;
    return -1;
}

/* measured min / max of a row (the sum of its timers); 0 when none of them was recorded */
static int measured(const cmp_data *d, const row_def *r, double *lo, double *hi) {
    int any = 0;
    *lo = *hi = 0;
    for (int k = 0; k < 10 && r->timers[k]; k++) {
        const int i = find_timer(d, r->timers[k]);
        if (i < 0 || d->t[i].w <= 0) continue;
        *lo += d->t[i].lo / d->t[i].w;
        *hi += d->t[i].hi / d->t[i].w;
        any = 1;
    }
    return any;
}

static void json_num(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, "%.9g", v);
    else fputs("null", f);
}

/* The bubble four ways: the plan's formula, the plan's with each stage's FLOPs, the run's F / B
 * costs replayed through the same tables, and the run's wall clock. */
typedef struct {
    mt_sched kind;
    int pv;                       /* virtual stages p v */
    mt_pp_timeline replay, flops; /* the two simulated timelines (replay.f_vs / b_vs: the run's costs) */
    double b_flops, b_replay, b_wall, b_pred;
} cmp_bubble;

/* The run must be the recipe's layout: MT_ERR_CONFIG naming every key that differs. */
static mt_status check_layout(const cmp_data *d, const char *metrics_path, const mt_plan *p) {
    if (d->have_layout) {
        const int want[10] = { p->tp, p->pp, p->pp > 1 ? p->vpp : 1, p->cp, p->dp, p->ep, p->micro_batch, p->n_micro,
                               p->global_batch, p->n_gpus };
        static const char *const keys[10] = { "parallel.tensor", "parallel.pipeline", "parallel.virtual_pipeline",
                                              "parallel.context", "parallel.data", "parallel.expert",
                                              "training.micro_batch", "micro-batches per step (global / (micro x dp))",
                                              "training.global_batch", "world size (--gpus)" };
        char msg[2048];
        int len = 0;
        for (int k = 0; k < 10; k++)
            if (d->lt[k] >= 0 && d->lt[k] != want[k] && len < (int)sizeof msg - 200)
                len += snprintf(msg + len, sizeof msg - (size_t)len, "%s%s: the run had %d, the recipe %d", len ? "; " : "",
                                keys[k], d->lt[k], want[k]);
        if (len)
            return mt_errorf(MT_ERR_CONFIG, "--compare %s: the run's layout is not the recipe's (%s); pass the recipe and "
                             "overrides the run used (--config, --set / Megatron flags, --gpus %d)", metrics_path, msg,
                             d->lt[9]);
    }
    const int pv = p->pp * (p->pp > 1 ? p->vpp : 1);
    if (d->f_sum && d->n_vs != pv)
        return mt_errorf(MT_ERR_CONFIG, "--compare %s: the run recorded %d virtual stages, the recipe has pp x vpp = %d; "
                         "pass the recipe the run used", metrics_path, d->n_vs, pv);
    return MT_OK;
}

/* Fills bu (its timelines freed by the caller with mt_pp_timeline_free, also after a failure). */
static mt_status compare_bubble(const cmp_data *d, const mt_recipe *r, const mt_plan *p, cmp_bubble *bu) {
    mt_status st = MT_OK;
    const int pv = p->pp * (p->pp > 1 ? p->vpp : 1);
    bu->pv = pv;
    bu->kind = mt_schedule_default(p->pp, p->pp > 1 ? p->vpp : 1);
    bu->b_flops = bu->b_replay = NAN;
    bu->b_wall = d->bubble_w > 0 ? d->bubble_sum / d->bubble_w : NAN;
    double *fv = NULL, *bv = NULL;
    if (p->pp > 1) {
        fv = malloc((size_t)pv * sizeof *fv);
        bv = malloc((size_t)pv * sizeof *bv);
        if (!fv || !bv) {
            st = mt_errorf(MT_ERR_OOM, "plan --compare: %d virtual stages", pv);
            goto out;
        }
        if (mt_pp_vstage_flops(r, fv, pv) == MT_OK) {
            for (int i = 0; i < pv; i++) bv[i] = 2 * fv[i];
            if (mt_pp_timeline_build(bu->kind, p->pp, p->n_micro, p->vpp, fv, bv, &bu->flops) == MT_OK)
                bu->b_flops = bu->flops.bubble;
        }
        if (d->f_sum && d->cost_w > 0) {
            int ok = 1;
            for (int i = 0; i < pv; i++) {
                fv[i] = d->f_sum[i] / d->cost_w;
                bv[i] = d->b_sum[i] / d->cost_w;
                ok &= fv[i] > 0 && bv[i] > 0;
            }
            if (ok) {
                MT_CHECK(mt_pp_timeline_build(bu->kind, p->pp, p->n_micro, p->vpp, fv, bv, &bu->replay));
                bu->b_replay = bu->replay.bubble;
            }
        }
    }
    bu->b_pred = isfinite(bu->b_flops) ? bu->b_flops : p->bubble; /* the prediction: per-stage FLOPs, else the formula */
out:
    free(fv);
    free(bv);
    return st;
}

#define CMP_MAX_ROWS 16

/* The terms (ms per iteration) into rows; the plan's when it has a time model (a device peak).
 * Returns their count. */
static int compare_rows(const mt_plan *p, row_def *out) {
    const int timed = p->t_step_s > 0;
    const double T = timed ? 1e3 : -1.0;
    const int has_bw = timed && (p->gpu.hbm_gbs > 0 || p->gpu.probed);
    const double fb_pred = timed ? (p->t_step_s - p->t_dp_s - p->t_opt_s) * 1e3 : -1;
    row_def rows[] = {
        { "forward compute", { "forward-compute" }, timed ? p->t_compute_s * T / 3 : -1 },
        { "backward compute", { "backward-compute" }, timed ? p->t_compute_s * T * 2 / 3 : -1 },
        { "tp collectives", { "tp-collectives" }, timed ? (p->tp_comm.exposed_s + p->cp_comm.exposed_s) * T : -1 },
        { "pp transfers + bubble (waits)",
          { "forward-recv", "forward-send", "backward-recv", "backward-send", "forward-send-backward-recv",
            "backward-send-forward-recv", "forward-send-forward-recv", "backward-send-backward-recv",
            "forward-backward-send-forward-backward-recv" },
          timed && p->pp > 1 ? (p->pp_comm.exposed_s + p->t_bubble_s) * T : -1 },
        { "embedding grads allreduce", { "embedding-grads-all-reduce" }, -1 },
        { "dp gradient sync", { "all-grads-sync", "grads-reduce-scatter", "params-all-gather", "layernorm-grads-all-reduce" },
          timed && p->dp * p->cp > 1 ? p->t_dp_s * T : -1 },
        /* by bytes: needs a bandwidth. The "optimizer" timer holds clip + AdamW; the gradient norm's read and the
         * zeroing of the gradients run outside it (as in Megatron, whose zero_grad precedes its timers) */
        { "optimizer", { "optimizer" }, has_bw ? (p->t_opt_s - p->t_grad_zero_s) * T : -1 },
        { "forward-backward", { "forward-backward" }, fb_pred },
        /* the op timers (logging.timing_level 3): the plan's compute terms against the backend's ops by class.
         * The plan's elementwise term holds the norms, activations, embedding and loss; its optimizer term the
         * AdamW pass, the gradient norm's read (an elementwise-ops sum) and the gradient zeroing (memory-ops). */
        { "  gemm ops", { "gemm-ops" }, timed ? p->t_gemm_s * T : -1 },
        { "  attention ops", { "attention-ops" }, timed ? p->t_attn_s * T : -1 },
        { "  norm + elementwise ops", { "norm-ops", "elementwise-ops" }, has_bw ? p->t_elem_s * T : -1 },
        { "  optimizer ops (+ gradient norm)", { "optimizer-ops" }, has_bw ? (p->t_opt_s - p->t_grad_zero_s) * T : -1 },
        { "  memory ops (gradient zeroing, copies)", { "memory-ops" }, has_bw ? p->t_grad_zero_s * T : -1 },
    };
    const int n_rows = (int)(sizeof rows / sizeof rows[0]);
    memcpy(out, rows, sizeof rows);
    return n_rows;
}

static void print_json(FILE *f, const char *metrics_path, const cmp_data *d, const mt_plan *p, const row_def *rows,
                       int n_rows, double step_ms, const cmp_bubble *bu) {
    const int timed = p->t_step_s > 0;
    const mt_sched kind = bu->kind;
    const double b_pred = bu->b_pred, b_replay = bu->b_replay, b_wall = bu->b_wall;
    fputs("{\"ok\": true, \"metrics\": \"", f);
    for (const char *c = metrics_path; *c; c++) {
        if (*c == '"' || *c == '\\') fputc('\\', f);
        if ((unsigned char)*c >= 0x20) fputc(*c, f);
    }
    fprintf(f, "\", \"iterations\": %lld, \"log_records_used\": %d, \"rampup_iterations_left_out\": %lld, "
            "\"rampup_log_records_left_out\": %d, \"timed\": %s, \"terms\": [", (long long)d->n_iters, d->n_used,
            (long long)d->n_ramp, d->n_ramp_logs, timed ? "true" : "false");
    int first = 1;
    for (int i = 0; i < n_rows; i++) {
        double lo, hi;
        const int have = measured(d, &rows[i], &lo, &hi);
        if (!have && (rows[i].predicted_ms <= 0 || rows[i].term[0] == ' ')) continue;
        const char *term = rows[i].term;
        while (*term == ' ') term++;
        fprintf(f, "%s{\"term\": \"%s\", \"predicted_ms\": ", first ? "" : ", ", term);
        json_num(f, rows[i].predicted_ms >= 0 ? rows[i].predicted_ms : NAN);
        fputs(", \"measured_min_ms\": ", f);
        json_num(f, have ? lo : NAN);
        fputs(", \"measured_max_ms\": ", f);
        json_num(f, have ? hi : NAN);
        fputc('}', f);
        first = 0;
    }
    fprintf(f, "%s{\"term\": \"step\", \"predicted_ms\": ", first ? "" : ", ");
    json_num(f, timed ? p->t_step_s * 1e3 : NAN);
    fputs(", \"measured_min_ms\": ", f);
    json_num(f, step_ms);
    fputs(", \"measured_max_ms\": ", f);
    json_num(f, step_ms);
    fputs("}], \"bubble\": {\"pp\": ", f);
    fprintf(f, "%d, \"vpp\": %d, \"m\": %d, \"schedule\": \"%s\", \"predicted\": ", p->pp, p->vpp, p->n_micro,
            mt_schedule_name(kind));
    json_num(f, p->pp > 1 ? b_pred : NAN);
    fputs(", \"formula\": ", f);
    json_num(f, p->pp > 1 ? mt_plan_bubble_fraction(p->pp, p->n_micro, p->vpp) : NAN);
    fputs(", \"measured_replayed\": ", f);
    json_num(f, b_replay);
    fputs(", \"measured_wall\": ", f);
    json_num(f, b_wall);
    fprintf(f, ", \"clock\": \"%s\"}}\n", d->clock[0] ? d->clock : "");
}

/* The readable table's header notes and terms. */
static void print_terms(FILE *f, const char *metrics_path, const cmp_data *d, const mt_plan *p, const row_def *rows,
                        int n_rows, double step_ms) {
    const int timed = p->t_step_s > 0;
    fprintf(f, "mtrain plan --compare %s\n", metrics_path);
    char l[256];
    fprintf(f, "  run        %lld iterations, %d log-line record%s used%s; layout %s\n", (long long)d->n_iters, d->n_used,
            d->n_used == 1 ? "" : "s", d->n_logs > 1 ? " (the first, the warm-up iteration, left out)" : "",
            mt_plan_layout_str(p, l, sizeof l));
    if (d->n_ramp > 0)
        fprintf(f, "  note       %lld iteration%s of batch-size ramp-up (fewer than %d sequences) and %d log record%s "
                "covering them left out: the plan predicts the full batch's step\n", (long long)d->n_ramp,
                d->n_ramp == 1 ? "" : "s", p->global_batch, d->n_ramp_logs, d->n_ramp_logs == 1 ? "" : "s");
    if (!d->have_layout)
        fprintf(f, "  note       the file records no layout (written before mtrain recorded it): assuming the recipe's\n");
    if (d->n_t == 0)
        fprintf(f, "  note       the run recorded no timers: train with logging.timing_level=2 (--timing-log-level 2) for "
                "forward, backward and each collective, 3 for the backend's ops by class\n");
    else if (find_timer(d, "gemm-ops") < 0)
        fprintf(f, "  note       no op timers: train with --timing-log-level 3 to set the plan's GEMM, attention and "
                "elementwise terms against the backend's ops\n");
    if (!timed)
        fprintf(f, "  note       no predicted times: the device's peak is unknown (the host); pass --gpu NAME, or set "
                "logging.peak_tflops to this machine's rate\n");
    fprintf(f, "\n  %-36s %12s %22s %10s\n", "term (ms per iteration)", "predicted", "measured (min..max)", "max/pred");
    for (int i = 0; i < n_rows; i++) {
        double lo, hi;
        const int have = measured(d, &rows[i], &lo, &hi);
        if (!have && (rows[i].predicted_ms <= 0 || rows[i].term[0] == ' ')) continue; /* neither modelled nor run
                                                                    (tp 1, dp 1, ...); op rows only from level 3 */
        char pr[32] = "-", ms[48] = "not recorded", ra[24] = "";
        if (rows[i].predicted_ms >= 0) snprintf(pr, sizeof pr, "%.3f", rows[i].predicted_ms);
        if (have) snprintf(ms, sizeof ms, "%.3f..%.3f", lo, hi);
        if (have && rows[i].predicted_ms > 0) snprintf(ra, sizeof ra, "%.2fx", hi / rows[i].predicted_ms);
        fprintf(f, "  %-36s %12s %22s %10s\n", rows[i].term, pr, ms, ra);
    }
    {
        char pr[32] = "-", ra[24] = "";
        if (timed) snprintf(pr, sizeof pr, "%.3f", p->t_step_s * 1e3);
        if (timed) snprintf(ra, sizeof ra, "%.2fx", step_ms / (p->t_step_s * 1e3));
        char ms[48];
        snprintf(ms, sizeof ms, "%.3f", step_ms);
        fprintf(f, "  %-36s %12s %22s %10s\n", "step (ms_per_iter, mean)", pr, ms, ra);
    }
}

static void print_bubble(FILE *f, const cmp_data *d, const mt_plan *p, const cmp_bubble *bu) {
    const mt_sched kind = bu->kind;
    const int pv = bu->pv;
    const double b_flops = bu->b_flops, b_replay = bu->b_replay, b_wall = bu->b_wall, b_pred = bu->b_pred;
    const mt_pp_timeline *replay = &bu->replay;
    if (p->pp > 1) {
        fprintf(f, "\n  pipeline bubble (share of the forward-backward schedule, mean over stages), %s p %d m %d v %d:\n",
                mt_schedule_name(kind), p->pp, p->n_micro, p->vpp);
        if (isfinite(b_flops))
            fprintf(f, "    predicted: stages by their FLOPs, simulated    %6.1f%%   (the same tables; B = 2 F; the last stage "
                    "holds the output layer)\n", 100 * b_flops);
        fprintf(f, "    formula (p-1)/(%sm+p-1), equal stages           %6.1f%%\n", kind == MT_SCHED_INTERLEAVED ? "v" : "",
                100 * mt_plan_bubble_fraction(p->pp, p->n_micro, p->vpp));
        if (isfinite(b_replay))
            fprintf(f, "    measured: the run's F/B costs replayed         %6.1f%%   (%s time per virtual stage, same tables)"
                    "   %+.1f points against the prediction, %+.1f against the formula\n", 100 * b_replay,
                    d->clock[0] ? d->clock : "?", 100 * (b_replay - b_pred),
                    100 * (b_replay - mt_plan_bubble_fraction(p->pp, p->n_micro, p->vpp)));
        else
            fprintf(f, "    measured: replayed                                -   (the file has no pp_cost: a run of an older "
                    "mtrain)\n");
        if (isfinite(b_wall))
            fprintf(f, "    measured: wall clock (1 - busy/table time)     %6.1f%%   (adds transfers and descheduled time)\n",
                    100 * b_wall);
        if (isfinite(b_replay) && isfinite(b_wall))
            fprintf(f, "    wall - replayed = %+.1f points: what the transfers, wake-ups and other processes on the cores "
                    "add beyond the schedule\n", 100 * (b_wall - b_replay));
        if (isfinite(b_replay)) {
            fprintf(f, "    measured F / B ms per micro-batch by virtual stage:");
            for (int i = 0; i < pv; i++) fprintf(f, " %.3f/%.3f", replay->f_vs[i], replay->b_vs[i]);
            fputc('\n', f);
        }
    }
}

mt_status mt_plan_compare(FILE *f, const char *metrics_path, const mt_recipe *r, const mt_plan *p, int json) {
    mt_status st = MT_OK;
    cmp_data d;
    cmp_bubble bu;
    memset(&bu, 0, sizeof bu);
    MT_CHECK(read_metrics(metrics_path, p->global_batch, &d));
    MT_CHECK(check_layout(&d, metrics_path, p));
    MT_CHECK(compare_bubble(&d, r, p, &bu));
    row_def rows[CMP_MAX_ROWS];
    const int n_rows = compare_rows(p, rows);
    const double step_ms = d.n_ms > 0 ? d.ms_sum / d.n_ms : d.first_ms;
    if (json) {
        print_json(f, metrics_path, &d, p, rows, n_rows, step_ms, &bu);
    } else {
        print_terms(f, metrics_path, &d, p, rows, n_rows, step_ms);
        if (p->pp > 1) print_bubble(f, &d, p, &bu);
    }
out:
    mt_pp_timeline_free(&bu.replay);
    mt_pp_timeline_free(&bu.flops);
    cmp_free(&d);
    return st;
}
