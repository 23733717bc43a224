/* cmd_plan_views.c — `mtrain plan --timeline / --timeline-svg / --compare` (see cmd_plan_views.h). */
#include "cmd/cmd_plan_views.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/schedule_timeline.h"
#include "train/plan_compare.h"

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

int mt_plan_views_world(const mt_plan_views *vw) {
    int world = 0;
    if (vw->compare && mt_plan_compare_world(vw->compare, &world) != MT_OK) return 0; /* reported again by run */
    return world;
}

int mt_plan_views_run(const mt_plan_views *vw, const char *config, const mt_recipe *r, const mt_plan *p, int json) {
    if (json && vw->timeline && vw->compare) { /* one JSON object per call */
        fprintf(stderr, "mtrain plan: error: --json prints one object: give --timeline or --compare, not both\n");
        return 2;
    }
    if (vw->timeline || vw->svg) {
        const int pp = p->pp, v = pp > 1 ? p->vpp : 1, pv = pp * v;
        double *fv = NULL, *bv = NULL;
        mt_pp_timeline tl;
        mt_status st = MT_OK;
        if (vw->flops) {
            fv = malloc((size_t)pv * sizeof *fv);
            bv = malloc((size_t)pv * sizeof *bv);
            if (!fv || !bv) st = mt_errorf(MT_ERR_OOM, "timeline: %d virtual stages", pv);
            if (st == MT_OK) st = mt_pp_vstage_flops(r, fv, pv);
            if (st == MT_OK) {
                double lo = fv[0];
                for (int i = 0; i < pv; i++) lo = fv[i] < lo ? fv[i] : lo;
                for (int i = 0; i < pv; i++) { /* in units of the cheapest forward */
                    fv[i] /= lo;
                    bv[i] = 2 * fv[i];
                }
            }
        }
        if (st == MT_OK) st = mt_pp_timeline_build(mt_schedule_default(pp, v), pp, p->n_micro, v, fv, bv, &tl);
        free(fv);
        free(bv);
        if (st != MT_OK) {
            fprintf(stderr, "mtrain plan: %s: error: %s\n", config, mt_last_error());
            return 1;
        }
        if (vw->timeline && json) {
            mt_pp_timeline_json(stdout, &tl);
        } else if (vw->timeline) {
            printf("%s: ", config);
            mt_pp_timeline_print(stdout, &tl, vw->width);
        }
        if (vw->svg) {
            char title[1200];
            snprintf(title, sizeof title, "mtrain plan --timeline: %s", config);
            st = mt_pp_timeline_write_svg(vw->svg, &tl, title);
            if (st != MT_OK) {
                fprintf(stderr, "mtrain plan: error: %s\n", mt_last_error());
                mt_pp_timeline_free(&tl);
                return 1;
            }
            if (!json) printf("wrote %s (the timeline as SVG)\n", vw->svg);
        }
        mt_pp_timeline_free(&tl);
    }
    if (vw->compare) {
        if (mt_plan_compare(stdout, vw->compare, r, p, json) != MT_OK) {
            fprintf(stderr, "mtrain plan: error: %s\n", mt_last_error());
            return 1;
        }
    }
    return 0;
}
