/* plan_host.h — the plan the memory tests compare the trainer with: mtrain plan's default options
 * on this machine's host spec (mt_gpu_host), one rank. */
#ifndef MT_TEST_PLAN_HOST_H
#define MT_TEST_PLAN_HOST_H

#include "plan/plan.h"

static inline mt_status plan_on_host(const mt_recipe *r, mt_plan *p) {
    mt_plan_opts o;
    mt_gpu_spec host;
    mt_plan_opts_defaults(&o);
    mt_gpu_host(&host, 0);
    return mt_plan_compute(r, 1, &host, &o, p);
}

#endif
