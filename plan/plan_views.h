/* plan_views.h — the two views of `mtrain plan` beside the report: the pipeline schedule drawn
 * (--timeline, --timeline-svg FILE, --timeline-costs, --timeline-width) and --compare
 * METRICS.jsonl (the plan against a finished run). cmd/cmd_plan_views.c parses their flags into
 * mt_plan_views. Rule: returns exit codes, never exits. */
#ifndef MT_PLAN_VIEWS_H
#define MT_PLAN_VIEWS_H

#include "core/recipe/recipe.h"
#include "plan/plan.h"

typedef struct {
    int timeline;              /* --timeline: draw in the terminal */
    const char *svg;           /* --timeline-svg FILE */
    int flops;                 /* --timeline-costs flops: stages by their FLOPs (default unit costs) */
    int width;                 /* --timeline-width N (0 = 180) */
    const char *compare;       /* --compare METRICS.jsonl */
} mt_plan_views;
/* Any view asked for. */
static inline int mt_plan_views_any(const mt_plan_views *vw) { return vw->timeline || vw->svg || vw->compare; }
/* With parallel.data auto and no --gpus: the world size the --compare file recorded (0 = none). */
int mt_plan_views_world(const mt_plan_views *vw);
/* Prints / writes the views of plan p of recipe r (validated); the exit code (0, or 1 on error). */
int mt_plan_views_run(const mt_plan_views *vw, const char *config, const mt_recipe *r, const mt_plan *p, int json);

#endif
