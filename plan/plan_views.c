/* plan_views.c — the two views of `mtrain plan` beside the report (see plan_views.h): the pipeline
 * schedule drawn (plan/schedule_timeline.c) and the plan set beside a finished run
 * (plan/plan_compare.c). Rule: returns exit codes, never exits. */
#include "plan/plan_views.h"

#include <stdio.h>
#include <stdlib.h>

#include "plan/plan_compare.h"
#include "plan/schedule_timeline.h"

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
        if (vw->flops || p->uneven) { /* uneven stages: unit costs would hide them */
            fv = malloc((size_t)pv * sizeof *fv);
            bv = malloc((size_t)pv * sizeof *bv);
            if (!fv || !bv) st = mt_errorf(MT_ERR_OOM, "timeline: %d virtual stages", pv);
            if (st == MT_OK) st = mt_pp_vstage_flops(r, fv, pv);
            if (st == MT_OK) {
                double lo = 0; /* a chunk that only embeds costs 0 here: the cheapest of the others */
                for (int i = 0; i < pv; i++) lo = fv[i] > 0 && (lo == 0 || fv[i] < lo) ? fv[i] : lo;
                if (lo <= 0) lo = 1;
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
