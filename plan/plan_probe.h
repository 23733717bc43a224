/* plan_probe.h — `mtrain plan --probe`: measure this machine's CPU backend and shared-memory
 * communicator into a device profile (plan/plan_probe.c). */
#ifndef MT_PLAN_PROBE_H
#define MT_PLAN_PROBE_H

#include "plan/plan.h"

/* Fills out (a probed host device) and, when path is not NULL, writes it there as JSON. */
mt_status mt_plan_probe(const char *path, mt_gpu_spec *out);

#endif
