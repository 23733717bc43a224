/* cmd_plan_views.h — the two views of `mtrain plan` beside the report: --timeline [--timeline-svg
 * FILE] [--timeline-costs unit|flops] [--timeline-width N] (the pipeline schedule drawn) and
 * --compare METRICS.jsonl (the plan against a finished run). parallel/schedule_timeline.h does the
 * work; this file parses their flags and prints. Rule kept: returns exit codes, never exits. */
#ifndef MT_CMD_PLAN_VIEWS_H
#define MT_CMD_PLAN_VIEWS_H

#include "core/plan/plan.h"
#include "core/recipe/recipe.h"

typedef struct {
    int timeline;              /* --timeline: draw in the terminal */
    const char *svg;           /* --timeline-svg FILE */
    int flops;                 /* --timeline-costs flops: stages by their FLOPs (default unit costs) */
    int width;                 /* --timeline-width N (0 = 180) */
    const char *compare;       /* --compare METRICS.jsonl */
} mt_plan_views;

/* Takes argv[*i] (and its value) when it is one of the views' flags: 1 taken (*i advanced past a
 * value), 0 not ours, -1 bad usage (message printed). */
int mt_plan_views_arg(mt_plan_views *vw, int argc, char **argv, int *i);
/* Any view asked for. */
static inline int mt_plan_views_any(const mt_plan_views *vw) { return vw->timeline || vw->svg || vw->compare; }
/* With parallel.data auto and no --gpus: the world size the --compare file recorded (0 = none). */
int mt_plan_views_world(const mt_plan_views *vw);
/* Prints / writes the views of plan p of recipe r (validated); the exit code (0, or 1 on error). */
int mt_plan_views_run(const mt_plan_views *vw, const char *config, const mt_recipe *r, const mt_plan *p, int json);
/* The usage lines of the views' flags. */
extern const char mt_plan_views_usage[];

#endif
