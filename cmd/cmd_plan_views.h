/* cmd_plan_views.h — the two views of `mtrain plan` beside the report: --timeline [--timeline-svg
 * FILE] [--timeline-costs unit|flops] [--timeline-width N] (the pipeline schedule drawn) and
 * --compare METRICS.jsonl (the plan against a finished run). plan/plan_views.h does the
 * work; this file parses their flags. Rule kept: returns exit codes, never exits. */
#ifndef MT_CMD_PLAN_VIEWS_H
#define MT_CMD_PLAN_VIEWS_H

#include "plan/plan_views.h"

/* Takes argv[*i] (and its value) when it is one of the views' flags: 1 taken (*i advanced past a
 * value), 0 not ours, -1 bad usage (message printed). */
int mt_plan_views_arg(mt_plan_views *vw, int argc, char **argv, int *i);
/* The usage lines of the views' flags. */
extern const char mt_plan_views_usage[];

#endif
