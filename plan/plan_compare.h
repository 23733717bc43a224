/* plan_compare.h — `mtrain plan --compare METRICS.jsonl`: the plan of a recipe (plan/plan.h) set
 * beside what a finished run of it measured, read from the trainer's metrics JSON lines
 * (train/metrics.h: the timers, the pipeline's F / B cost per virtual stage, the bubble), per term:
 * forward, backward, each collective, optimizer, forward-backward, step, and the bubble (replayed
 * on the schedule tables by plan/schedule_timeline.h). docs/plan.md, "Predicted against
 * measured", says how each number is derived. It reads train/'s metrics format as text (no train/
 * header). Rule: returns statuses; prints only on the given FILE. */
#ifndef MT_PLAN_COMPARE_H
#define MT_PLAN_COMPARE_H

#include <stdio.h>

#include "plan/plan.h"
#include "core/recipe/recipe.h"
#include "core/status.h"

/* Reads metrics_path (the trainer's JSON lines) and prints the comparison with plan p of recipe
 * r on f. The run's layout (pp, virtual stages, micro-batches from the records) must match the
 * recipe's: MT_ERR_CONFIG naming the field and the fix otherwise; MT_ERR_DATA "path:line: what"
 * for a malformed file or one without iteration records. json: one JSON object instead. */
mt_status mt_plan_compare(FILE *f, const char *metrics_path, const mt_recipe *r, const mt_plan *p, int json);
/* The world size the run recorded (its first "layout"), for a recipe with parallel.data auto;
 * *world = 0 when the file has none. Errors as mt_plan_compare's. */
mt_status mt_plan_compare_world(const char *metrics_path, int *world);

#endif
