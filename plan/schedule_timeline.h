/* schedule_timeline.h — the picture of `mtrain plan --timeline` / `--timeline-svg FILE`: the
 * pipeline schedule the trainer executes, drawn over time.
 * The p stage tables come from parallel/schedule.c (mt_schedule_build, the same tables
 * train/pipeline.c runs), their timing from its simulator (mt_schedule_simulate):
 * each F and B takes its cost, a transfer group waits for its partner (free transfers), so every
 * gap is the bubble. With unit costs (F 1, B 2 on every stage) the bubble equals the formula
 * (p-1)/(v m + p-1) exactly; with the recipe's FLOPs per virtual stage (the first holds the
 * embedding, the last the output layer and the loss) it shows what unequal stages add.
 * plan/plan_compare.c replays a run's measured costs through it. docs/plan.md, "Timeline".
 * Rules: builders are pure apart from their own allocation; print / SVG functions do the I/O;
 * the SVG is written to FILE.tmp.<pid> and renamed (never a half-written file under FILE). */
#ifndef MT_SCHEDULE_TIMELINE_H
#define MT_SCHEDULE_TIMELINE_H

#include <stdio.h>

#include "core/recipe/recipe.h"
#include "core/status.h"
#include "plan/schedule_sim.h"

typedef struct {
    mt_sched kind;
    int p, m, v;
    int n_total;             /* steps over all stages */
    int *off;                /* p + 1: stage s's steps are [off[s], off[s+1]) */
    mt_pp_step *steps;       /* n_total */
    double *start, *end;     /* n_total: when each step starts and ends (a transfer: its group's span) */
    double *f_vs, *b_vs;     /* p v: cost of one F / B of chunk c on stage s at [c p + s] */
    double makespan;
    double bubble;           /* simulated: mean over stages of idle / makespan */
    double formula;          /* mt_schedule_bubble_formula(kind, p, m, v) */
    double *busy;            /* p: time in F and B per stage */
    int unit;                /* 1: unit costs (F 1, B 2), 0: costs per virtual stage */
} mt_pp_timeline;

/* Builds and simulates the p tables of (kind, p, m, v). f_vs / b_vs NULL: unit costs F = 1,
 * B = 2; else p v costs (index c p + s), copied. Errors: mt_schedule_check's (MT_ERR_CONFIG
 * naming the recipe key), MT_ERR_OOM. Free with mt_pp_timeline_free (also after a failure). */
mt_status mt_pp_timeline_build(mt_sched kind, int p, int m, int v, const double *f_vs, const double *b_vs,
                                 mt_pp_timeline *tl);
void mt_pp_timeline_free(mt_pp_timeline *tl);

/* Relative forward cost of each virtual stage of the recipe (p v entries, index c p + s, in
 * forward FLOPs per token: its layers, plus the output layer on the last virtual stage; the
 * embedding lookup is counted as free), from the trainer's layout functions. B = 2 F. Uneven stages
 * (mt_recipe_stage_layers): each stage's own layers. */
mt_status mt_pp_vstage_flops(const mt_recipe *r, double *f_vs, int n_vs);

/* The terminal picture: one row per stage, time to the right, `width` columns at most (0 = 180),
 * a time axis, a legend, and the bubble beside its formula. */
void mt_pp_timeline_print(FILE *f, const mt_pp_timeline *tl, int width);
/* The same as one JSON object on f (`--timeline --json`): kind, p, m, v, unit, makespan, bubble,
 * formula, and per stage its busy time and every step (op, mb, chunk, peer, start, end). */
void mt_pp_timeline_json(FILE *f, const mt_pp_timeline *tl);
/* The same as an SVG document on f. */
void mt_pp_timeline_svg(FILE *f, const mt_pp_timeline *tl, const char *title);
/* mt_pp_timeline_svg into path, atomically (path.tmp.<pid>, fsync, rename); MT_ERR_IO naming the
 * path and strerror on failure (the temporary is removed). */
mt_status mt_pp_timeline_write_svg(const char *path, const mt_pp_timeline *tl, const char *title);

#endif
