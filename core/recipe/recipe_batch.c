/* recipe_batch.c — the global batch of each iteration: constant, Megatron's batch-size ramp-up
 * (--rampup-batch-size), or its step schedule (--step-batch-size-schedule: training.batch_schedule,
 * megatron/core/num_microbatches_calculator.py, StepBatchsizeNumMicroBatchesCalculator), all
 * functions of the samples consumed so far, so a resumed run takes its batch from the checkpoint's
 * consumed samples. Rule: pure functions of the recipe; no allocation, no I/O. */
#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/recipe/recipe.h"

/* Megatron's _parse_numeric_value: optional K/M/B/T suffix (either case), int(float(x) * mult). */
static int parse_number(const char *s, size_t n, int64_t *out) {
    char buf[64];
    if (n == 0 || n >= sizeof buf) return 1;
    memcpy(buf, s, n);
    buf[n] = 0;
    double mult = 1;
    const char c = (char)toupper((unsigned char)buf[n - 1]);
    if (c == 'T' || c == 'B' || c == 'M' || c == 'K') {
        mult = c == 'T' ? 1e12 : c == 'B' ? 1e9 : c == 'M' ? 1e6 : 1e3;
        buf[--n] = 0;
    }
    char *end = NULL;
    const double v = strtod(buf, &end);
    if (n == 0 || !end || *end || !(v >= 0) || v * mult > 9e18 || buf[0] == '-' || isspace((unsigned char)buf[0]))
        return 1;
    *out = (int64_t)(v * mult);
    return 0;
}

mt_status mt_recipe_batch_steps_parse(const char *text, int seq_length, mt_batch_steps *out) {
    memset(out, 0, sizeof *out);
    if (seq_length <= 0) return mt_errorf(MT_ERR_CONFIG, "model.seq_length must be set to read the thresholds (tokens)");
    for (const char *p = text; *p;) {
        while (*p == ',' || isspace((unsigned char)*p)) p++; /* Megatron: commas as spaces, then split() */
        if (!*p) break;
        const char *e = p;
        while (*e && *e != ',' && !isspace((unsigned char)*e)) e++;
        const char *colon = memchr(p, ':', (size_t)(e - p));
        int64_t thr, bs;
        if (!colon || parse_number(p, (size_t)(colon - p), &thr) || parse_number(colon + 1, (size_t)(e - colon - 1), &bs))
            return mt_errorf(MT_ERR_CONFIG, "entry '%.*s' is not THRESHOLD:BATCH_SIZE (numbers, a K/M/B/T suffix "
                             "allowed); write e.g. '0:384 200B:768'", (int)(e - p), p);
        if (bs <= 0 || bs > (1 << 30))
            return mt_errorf(MT_ERR_CONFIG, "entry '%.*s': the batch size must be between 1 and 2^30", (int)(e - p), p);
        if (out->n == MT_BATCH_STEPS_MAX)
            return mt_errorf(MT_ERR_CONFIG, "more than %d entries; merge some", MT_BATCH_STEPS_MAX);
        int i = out->n++; /* insertion keeps it sorted by threshold, as Megatron's sort does */
        for (; i > 0 && out->at[i - 1] > thr / seq_length; i--) {
            out->at[i] = out->at[i - 1];
            out->batch[i] = out->batch[i - 1];
        }
        out->at[i] = thr / seq_length; /* tokens -> samples */
        out->batch[i] = (int)bs;
        p = e;
    }
    if (out->n == 0) return mt_errorf(MT_ERR_CONFIG, "no entries; write THRESHOLD:BATCH_SIZE pairs, e.g. '0:384 200B:768'");
    if (out->at[0] != 0)
        return mt_errorf(MT_ERR_CONFIG, "the first threshold is %" PRId64 " samples (thresholds are tokens, divided "
                         "by model.seq_length = %d); the first entry must be at 0", out->at[0], seq_length);
    for (int i = 1; i < out->n; i++) {
        if (out->at[i] <= out->at[i - 1])
            return mt_errorf(MT_ERR_CONFIG, "thresholds %" PRId64 " and %" PRId64 " samples (tokens / model.seq_length "
                             "= %d) are not strictly increasing", out->at[i - 1], out->at[i], seq_length);
        if (out->batch[i] < out->batch[i - 1])
            return mt_errorf(MT_ERR_CONFIG, "the batch falls from %d to %d; Megatron's train loop asserts that the "
                             "number of micro-batches never decreases", out->batch[i - 1], out->batch[i]);
    }
    return MT_OK;
}

static int entry_of(const mt_batch_steps *s, int64_t consumed) {
    int i = 0;
    while (i + 1 < s->n && consumed >= s->at[i + 1]) i++;
    return i;
}

int mt_recipe_global_batch_at(const mt_recipe *r, int64_t consumed) {
    const mt_training_cfg *t = &r->training;
    if (t->steps.n > 0) return t->steps.batch[entry_of(&t->steps, consumed)]; /* the last entry reached */
    if (t->rampup_start <= 0 || t->rampup_increment <= 0 || t->rampup_start >= t->global_batch) return t->global_batch;
    if (consumed > t->rampup_samples) return t->global_batch;
    const int n_inc = (t->global_batch - t->rampup_start) / t->rampup_increment;
    const double per_inc = (double)t->rampup_samples / n_inc;
    const int64_t steps = per_inc > 0 ? (int64_t)((double)consumed / per_inc) : n_inc;
    const int64_t g = t->rampup_start + steps * (int64_t)t->rampup_increment;
    return g < t->global_batch ? (int)g : t->global_batch;
}

int mt_recipe_global_batch_max(const mt_recipe *r) {
    const mt_batch_steps *s = &r->training.steps;
    return s->n > 0 ? s->batch[s->n - 1] : r->training.global_batch;
}

void mt_recipe_batch_walk(const mt_recipe *r, int64_t *consumed, int64_t *iters, int64_t max_iters,
                          int64_t until_samples) {
    const mt_batch_steps *s = &r->training.steps;
    while (*iters < max_iters && *consumed < until_samples) {
        const int i = entry_of(s, *consumed);
        const int64_t b = s->n > 0 ? s->batch[i] : mt_recipe_global_batch_at(r, *consumed);
        int64_t end = i + 1 < s->n ? s->at[i + 1] : INT64_MAX;
        if (s->n == 0 && r->training.rampup_start > 0) end = *consumed + 1; /* the ramp-up: one iteration */
        if (end > until_samples) end = until_samples;
        int64_t n = (end - *consumed + b - 1) / b; /* iterations of this batch before the next threshold */
        if (n > max_iters - *iters) n = max_iters - *iters;
        if (n > (INT64_MAX / 2 - *consumed) / b) n = (INT64_MAX / 2 - *consumed) / b; /* no overflow */
        if (n < 1) return;
        *consumed += n * b;
        *iters += n;
    }
}

int64_t mt_recipe_train_samples(const mt_recipe *r) {
    if (r->training.steps.n == 0) return r->training.iters * r->training.global_batch;
    int64_t consumed = 0, iters = 0;
    mt_recipe_batch_walk(r, &consumed, &iters, r->training.iters, INT64_MAX);
    return consumed;
}

mt_status mt_recipe_batch_steps_check(const mt_recipe *r, int dp, int64_t consumed, int64_t iters_done) {
    const mt_batch_steps *s = &r->training.steps;
    const int64_t mb_dp = (int64_t)r->training.micro_batch * dp;
    while (s->n > 0 && iters_done < r->training.iters) { /* each entry an iteration of the run starts in */
        const int i = entry_of(s, consumed);
        if (s->batch[i] % mb_dp)
            return mt_errorf(MT_ERR_CONFIG, "training.batch_schedule: the global batch %d (from %" PRId64 " samples "
                             "on) is not a multiple of micro_batch * dp = %d * %d = %" PRId64 " (Megatron's consistency "
                             "check); use multiples of %" PRId64 " or change the layout", s->batch[i], s->at[i],
                             r->training.micro_batch, dp, mb_dp, mb_dp);
        if (i + 1 == s->n) break;
        mt_recipe_batch_walk(r, &consumed, &iters_done, r->training.iters, s->at[i + 1]);
    }
    return MT_OK;
}

int mt_recipe_micro_batches(const mt_recipe *r) {
    int64_t dp = r->parallel.data > 0 ? r->parallel.data : 1;
    int64_t d = (int64_t)r->training.micro_batch * dp;
    return d > 0 ? (int)(mt_recipe_global_batch_max(r) / d) : 0;
}
