/* cmd_plan_views.c — the flags of `mtrain plan --timeline / --timeline-svg / --compare` (see
 * cmd_plan_views.h); plan/plan_views.c draws and compares. */
#include "cmd/cmd_plan_views.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


const char mt_plan_views_usage[] =
    "  --timeline     draw the pipeline schedule the trainer runs for the recipe's p, m and virtual stages\n"
    "                 (one row per stage over time, the bubble beside its formula)\n"
    "  --timeline-svg FILE   the same picture as an SVG file\n"
    "  --timeline-costs unit|flops   F 1 and B 2 on every stage (default), or each stage by its FLOPs\n"
    "  --timeline-width N    terminal columns for the picture (default 180)\n"
    "  --compare METRICS.jsonl   predicted against measured per term for a finished run of this recipe\n"
    "                 (its --metrics file; timers with logging.timing_level 2)\n";

int mt_plan_views_arg(mt_plan_views *vw, int argc, char **argv, int *i) {
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (!strcmp(a, "--timeline")) {
        vw->timeline = 1;
        return 1;
    }
    const int svg = !strcmp(a, "--timeline-svg"), costs = !strcmp(a, "--timeline-costs"),
              width = !strcmp(a, "--timeline-width"), compare = !strcmp(a, "--compare");
    if (!svg && !costs && !width && !compare) return 0;
    if (!v || !v[0]) {
        fprintf(stderr, "mtrain plan: error: %s needs a value (%s)\n", a,
                svg ? "the SVG file to write" : costs ? "unit or flops" : width ? "a number of columns"
                                                                        : "the metrics JSON-lines file of a run");
        return -1;
    }
    ++*i;
    if (svg) vw->svg = v;
    else if (compare) vw->compare = v;
    else if (costs) {
        if (strcmp(v, "unit") && strcmp(v, "flops")) {
            fprintf(stderr, "mtrain plan: error: --timeline-costs %s: expected unit or flops\n", v);
            return -1;
        }
        vw->flops = !strcmp(v, "flops");
    } else {
        char *end;
        long w = strtol(v, &end, 10);
        if (*end || w < 20 || w > 100000) {
            fprintf(stderr, "mtrain plan: error: --timeline-width %s: expected a number of columns from 20 to 100000\n", v);
            return -1;
        }
        vw->width = (int)w;
    }
    return 1;
}
