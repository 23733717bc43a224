/* rerun.c — the rerun state machine of rerun.h, written after Megatron-LM's
 * megatron/core/rerun_state_machine.py (RerunStateMachine.should_run_forward_backward,
 * validate_result, should_checkpoint_and_exit, is_unexpectedly_large, state_dict /
 * load_state_dict, and RerunErrorInjector.maybe_inject / maybe_miscompare): the same states,
 * transitions, messages and tracker-file lines. Rule: every branch that decides what the job does
 * next reads a value reduced over the world. */
#include "train/rerun.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "core/rng.h"

#define LOGGER "megatron.core.rerun_state_machine"
#define REC_WORDS 24              /* one rank's record in the rerun save's gather */
#define SPIKY_FACTOR 10.0         /* pretrain_gpt.py's SPIKY_LOSS_FACTOR */
#define SPIKY_SAMPLES 100         /* is_unexpectedly_large's num_samples */
#define STATS_INTERVAL 2          /* RerunStateMachine.REPORTING_INTERVAL_ITERATIONS */
#define INJECT_STREAM 0x72657275ULL /* the injector's stream of mt_rng_u64 */

/* pretrain_gpt.py's loss_func checks, then param_and_grad_buffer.py's check_grads (one bucket here) */
enum { CHECK_NAN = 0, CHECK_INF, CHECK_SPIKY, CHECK_GRAD_NAN, CHECK_GRAD_INF, N_CHECKS };
_Static_assert(N_CHECKS == MT_RERUN_CHECKS, "rerun.h's MT_RERUN_CHECKS");
static const char *const check_msg[N_CHECKS] = {
    "found NaN in local forward loss calculation", "found Inf in local forward loss calculation", "Spiky loss",
    "found NaN in local grad norm for bucket #0 in backward pass before data-parallel communication collective",
    "found Inf in local grad norm for bucket #0 in backward pass before data-parallel communication collective"};
static const int check_fatal[N_CHECKS] = {1, 1, 0, 1, 1};
static const double check_tolerance[N_CHECKS] = {0, 0, 0, 0.001, 0.001}; /* Megatron's: a grad norm gets 0.1% */
static const char *const inject_name[] = {"Expected result", "Transient error", "Persistent error"};
static const char *const state_name[] = {"not_running_yet", "initial_run", "rerunning_in_place",
                                         "will_rerun_from_checkpoint", "rerunning_from_checkpoint",
                                         "rerunning_again_from_checkpoint"};

/* One line of Megatron's logger: "LEVEL:megatron.core.rerun_state_machine:message" */
static void say(const mt_rerun *rr, const char *level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(const mt_rerun *rr, const char *level, const char *fmt, ...) {
    va_list ap;
    flockfile(stderr); /* one line, whole, among other threads' */
    fprintf(stderr, "%s%s:" LOGGER ":", rr->prefix, level);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    funlockfile(stderr);
    fflush(stderr);
}
#define SAY_RANK0(rr, ...) do { if ((rr)->rank == 0) say(rr, __VA_ARGS__); } while (0)

/* log_failure: "Rank R, node N, device D, iteration #I: message!" as an error when fatal */
static void log_failure(const mt_rerun *rr, int fatal, const char *msg) {
    say(rr, fatal ? "ERROR" : "WARNING", "Rank %d, node %s, device %d, iteration #%" PRId64 ": %s!", rr->rank, rr->node,
        rr->device, rr->iteration, msg);
}

/* _log_validation_error_to_file: one line per event, Megatron's format (its parser,
 * get_skipped_iterations_from_tracker_file, reads it back) */
static void track(const mt_rerun *rr, const char *status, float result, const char *message) {
    if (!rr->tracker[0]) return;
    FILE *f = fopen(rr->tracker, "a");
    if (!f) {
        say(rr, "ERROR", "Could not log validation error! (%s: cannot append)", rr->tracker);
        return;
    }
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    char ts[32];
    strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S", &tm);
    const char *job = getenv("SLURM_JOBID");
    fprintf(f, "ts=%s.%06ld node=%s device=%d jobID=%s rank=%d iteration=%" PRId64 " status=%s result=%.9g "
               "message='%s'\n", ts, (long)tv.tv_usec, rr->node, rr->device, job ? job : "N/A", rr->rank,
            rr->iteration, status, (double)result, message);
    fclose(f);
}

int mt_rerun_active(const mt_rerun *rr) { return rr->mode != MT_RERUN_DISABLED; }

mt_status mt_rerun_init(mt_rerun *rr, const mt_recipe *r, const mt_parallel_state *ps, mt_backend *be, int has_loss) {
    mt_status st = MT_OK;
    memset(rr, 0, sizeof *rr);
    const mt_training_cfg *tc = &r->training;
    rr->mode = tc->rerun_mode;
    rr->injected = -1;
    rr->ps = ps;
    rr->be = be;
    rr->rank = ps->rank;
    rr->world = ps->size;
    if (rr->mode == MT_RERUN_DISABLED) return MT_OK;
    rr->rate = tc->error_injection_rate;
    rr->inject_type = tc->error_injection_type;
    rr->check_nan = tc->check_nan_in_loss;
    rr->check_spiky = tc->check_spiky_loss;
    rr->has_loss = has_loss;
    rr->susp_device = -1;
    rr->device = be->device >= 0 ? be->device : ps->local_rank; /* the CPU: one "device" per local rank */
    rr->seed = mt_rng_mix64(tc->seed + 100u * (uint64_t)ps->coord[MT_AX_PP]); /* Megatron seeds per stage: seed + 100 pp */
    const char *node = getenv("MT_RERUN_NODE_NAME"); /* tests: a resume "on another node" of one machine */
    if (node && node[0]) snprintf(rr->node, sizeof rr->node, "%s", node);
    else if (gethostname(rr->node, sizeof rr->node - 1) != 0) snprintf(rr->node, sizeof rr->node, "unknown");
    if (ps->size > 1) snprintf(rr->prefix, sizeof rr->prefix, "%s ", ps->prefix);
    snprintf(rr->tracker, sizeof rr->tracker, "%s", tc->result_rejected_tracker);
    if (rr->tracker[0]) {
        FILE *f = fopen(rr->tracker, "a");
        if (!f) return mt_errorf(MT_ERR_IO, "training.result_rejected_tracker %s: cannot be appended to "
                                 "(RerunStateMachine result validation log)", rr->tracker);
        fclose(f);
    }
    MT_CHECK(be->i->alloc(be, 64, &rr->flags));
    MT_CHECK(be->i->alloc(be, (size_t)(ps->size + 1) * REC_WORDS * 4, &rr->gather));
    rr->table = calloc((size_t)ps->size * REC_WORDS, sizeof *rr->table);
    if (!rr->table) return mt_errorf(MT_ERR_OOM, "rerun state machine: %d records", ps->size);
    SAY_RANK0(rr, "WARNING", "RerunStateMachine initialized in mode %s",
              rr->mode == MT_RERUN_VALIDATE ? "validate_results" : "report_determinism_stats");
out:
    return st;
}

void mt_rerun_free(mt_rerun *rr) {
    if (rr->flags) rr->be->i->free(rr->be, rr->flags);
    if (rr->gather) rr->be->i->free(rr->be, rr->gather);
    free(rr->table);
    rr->flags = rr->gather = NULL;
    rr->table = NULL;
}

/* _reduce_any over the world, n flags (<= 4) at once, in place */
static mt_status reduce_any(mt_rerun *rr, int *v, int n) {
    mt_status st = MT_OK;
    const mt_group *w = mt_pstate_group(rr->ps, MT_PG_WORLD);
    if (w->size <= 1) return MT_OK;
    float f[4];
    for (int i = 0; i < n; i++) f[i] = v[i] ? 1.0f : 0.0f;
    MT_CHECK(rr->be->i->copy_h2d(rr->be, rr->flags, f, (size_t)n * 4));
    MT_CHECK(w->comm->i->allreduce(w->comm, rr->flags, rr->flags, (size_t)n, MT_F32, MT_RED_MAX));
    MT_CHECK(rr->be->i->copy_d2h(rr->be, f, rr->flags, (size_t)n * 4));
    for (int i = 0; i < n; i++) v[i] = f[i] > 0;
out:
    return st;
}

/* whether validation call `c` is made (loss_func's and check_grads' switches) */
static int check_on(const mt_rerun *rr, int c) {
    return c == CHECK_SPIKY ? rr->check_spiky : rr->check_nan;
}

/* _maybe_report_stats: every other iteration, the differences of every rank's reruns per call */
static mt_status report_stats(mt_rerun *rr) {
    mt_status st = MT_OK;
    if ((rr->iteration - 1) % STATS_INTERVAL != 0) return MT_OK;
    float v[3 * N_CHECKS], mx[N_CHECKS];
    for (int c = 0; c < N_CHECKS; c++) {
        v[3 * c] = (float)rr->stat_zero[c], v[3 * c + 1] = (float)rr->stat_n[c], v[3 * c + 2] = (float)rr->stat_sum[c];
        mx[c] = (float)rr->stat_max[c];
    }
    const mt_group *w = mt_pstate_group(rr->ps, MT_PG_WORLD);
    if (w->size > 1) {
        MT_CHECK(rr->be->i->copy_h2d(rr->be, rr->flags, v, sizeof v));
        MT_CHECK(w->comm->i->allreduce(w->comm, rr->flags, rr->flags, 3 * N_CHECKS, MT_F32, MT_RED_SUM));
        MT_CHECK(rr->be->i->copy_d2h(rr->be, v, rr->flags, sizeof v));
        MT_CHECK(rr->be->i->copy_h2d(rr->be, rr->flags, mx, sizeof mx));
        MT_CHECK(w->comm->i->allreduce(w->comm, rr->flags, rr->flags, N_CHECKS, MT_F32, MT_RED_MAX));
        MT_CHECK(rr->be->i->copy_d2h(rr->be, mx, rr->flags, sizeof mx));
    }
    if (rr->rank == 0) say(rr, "INFO", "Stats on computation determinism in validation calls");
    for (int c = 0; c < N_CHECKS && rr->rank == 0; c++) {
        const double z = v[3 * c], t = z + v[3 * c + 1];
        if (!check_on(rr, c) || t == 0) continue;
        say(rr, "INFO", "  From validation call '%s':", check_msg[c]);
        if (v[3 * c + 1] > 0)
            say(rr, "INFO", "    %.0f/%.0f total/identical samples, rel. variability: avg= %.3E, max: %.3E", t, z,
                v[3 * c + 2] / t, (double)mx[c]);
        else
            say(rr, "INFO", "    %.0f samples, all identical", z);
    }
    memset(rr->stat_zero, 0, sizeof rr->stat_zero);
    memset(rr->stat_n, 0, sizeof rr->stat_n);
    memset(rr->stat_sum, 0, sizeof rr->stat_sum);
    memset(rr->stat_max, 0, sizeof rr->stat_max);
out:
    return st;
}

mt_status mt_rerun_should_run(mt_rerun *rr, int64_t it, int *run) {
    mt_status st = MT_OK;
    int v[2];
    *run = 0;
    switch (rr->state) {
    case MT_RS_NOT_RUNNING_YET: /* the initial run (data and weights are the iteration's: nothing to save) */
        rr->iteration = it;
        rr->rerun_req = rr->ckpt_req = rr->again_req = rr->cont_req = 0;
        rr->failed = 0; /* an earlier iteration's failed call is not this one's (Megatron keeps it, and a later
                         * rerun of another rank's failure would compare this rank against a stale result) */
        rr->state = MT_RS_INITIAL_RUN;
        *run = 1;
        break;
    case MT_RS_INITIAL_RUN:
        v[0] = rr->rerun_req;
        if (rr->mode != MT_RERUN_DISABLED) MT_CHECK(reduce_any(rr, v, 1));
        if (rr->mode == MT_RERUN_DISABLED || !v[0]) {
            rr->state = MT_RS_NOT_RUNNING_YET;
            break;
        }
        if (rr->mode == MT_RERUN_VALIDATE) SAY_RANK0(rr, "WARNING", "Need to rerun step to check reproducibility of initial result");
        rr->state = MT_RS_RERUNNING_IN_PLACE;
        *run = 1;
        break;
    case MT_RS_RERUNNING_IN_PLACE:
        if (rr->mode == MT_RERUN_STATS) {
            rr->state = MT_RS_NOT_RUNNING_YET;
            MT_CHECK(report_stats(rr));
            break;
        }
        v[0] = rr->cont_req, v[1] = rr->ckpt_req;
        MT_CHECK(reduce_any(rr, v, 2));
        if (v[0]) {
            SAY_RANK0(rr, "WARNING", "Continuing normal execution because failed validation was not fatal");
            rr->state = MT_RS_NOT_RUNNING_YET;
        } else if (v[1])
            rr->state = MT_RS_WILL_RERUN_FROM_CHECKPOINT;
        break;
    case MT_RS_WILL_RERUN_FROM_CHECKPOINT: /* a resumed save: the third run, on other hardware */
        rr->iteration = it;
        rr->state = MT_RS_RERUNNING_FROM_CHECKPOINT;
        *run = 1;
        break;
    case MT_RS_RERUNNING_FROM_CHECKPOINT:
        v[0] = rr->again_req, v[1] = rr->cont_req;
        MT_CHECK(reduce_any(rr, v, 2));
        if (v[0]) {
            SAY_RANK0(rr, "WARNING", "Need to restart job from the same checkpoint because it was scheduled on the "
                      "same node/GPU");
            rr->state = MT_RS_RERUNNING_AGAIN_FROM_CHECKPOINT;
        } else if (v[1]) {
            SAY_RANK0(rr, "WARNING", "Continuing normal execution because failed validation was not fatal");
            rr->state = MT_RS_NOT_RUNNING_YET;
        }
        break;
    default:
        return mt_errorf(MT_ERR_INTERNAL, "rerun state machine: should_run in state %s", state_name[rr->state]);
    }
out:
    return st;
}

/* RerunErrorInjector.maybe_inject for validation call `call` of this iteration: a draw r in
 * [0, rate) and (r + rank) % rate == 0, at most one pending injection */
static int maybe_inject(mt_rerun *rr, int64_t call) {
    if (rr->rate <= 0 || rr->injected >= 0) return 0;
    const uint64_t r = mt_rng_u64(rr->seed, INJECT_STREAM, (uint64_t)rr->iteration << 24 | (uint64_t)call) %
                       (uint64_t)rr->rate;
    if ((r + (uint64_t)rr->rank) % (uint64_t)rr->rate != 0) return 0;
    rr->injected = (int)rr->inject_type;
    say(rr, "WARNING", "Injecting error type %s", inject_name[rr->inject_type]);
    return 1;
}

/* _compare_floats: 0 = match, inf = NaN / Inf on one side only, else the relative difference */
static double compare(float a, float b) {
    if (a == b || (isnan(a) && isnan(b))) return 0;
    if (isnan(a) || isnan(b) || isinf(a) || isinf(b)) return INFINITY;
    return fabs(((double)a - b) / ((double)a + b) * 2);
}

/* RerunErrorInjector.maybe_miscompare: an injected fault decides the comparison */
static double maybe_miscompare(mt_rerun *rr, float initial, float result) {
    if (rr->injected < 0) return compare(initial, result);
    if (rr->state == MT_RS_RERUNNING_IN_PLACE) {
        if (rr->injected != MT_INJECT_TRANSIENT) return 0;
        rr->injected = -1;
        return INFINITY;
    }
    const int persistent = rr->injected == MT_INJECT_PERSISTENT;
    rr->injected = -1;
    return persistent ? INFINITY : 0;
}

static int rejects(mt_rerun *rr, int check, float v) {
    if (check == CHECK_NAN || check == CHECK_GRAD_NAN) return isnan(v);
    if (check == CHECK_INF || check == CHECK_GRAD_INF) return isinf(v);
    const double a = fabs((double)v); /* is_unexpectedly_large(threshold 10, context "loss") */
    if (isnan(a) || isinf(a)) return 0;
    if (rr->large_count < SPIKY_SAMPLES) {
        rr->large_count++;
        if (a > rr->max_value) rr->max_value = a;
        if (rr->large_count == SPIKY_SAMPLES) say(rr, "WARNING", "Max value for loss: %.9g", rr->max_value);
        return 0;
    }
    return a >= rr->max_value * SPIKY_FACTOR;
}

/* the first and the second rerun reached the call that failed */
static void compare_rerun(mt_rerun *rr, float result) {
    const int fatal = check_fatal[rr->check];
    const char *m = check_msg[rr->check];
    char msg[384];
    const double cmp = maybe_miscompare(rr, rr->initial, result), tol = check_tolerance[rr->check];
    if (rr->state == MT_RS_RERUNNING_IN_PLACE && cmp > tol) {
        if (!fatal) rr->cont_req = 1;
        snprintf(msg, sizeof msg, "First rerun: unexpected result is not reproducible within the tolerance (%.9g != "
                 "%.9g)", (double)result, (double)rr->initial);
        log_failure(rr, fatal, msg);
        track(rr, "first_rerun_not_reproducible", result, m);
        log_failure(rr, fatal, "Possible transient error!");
    } else if (rr->state == MT_RS_RERUNNING_IN_PLACE) {
        if (fatal) rr->ckpt_req = 1;
        else rr->cont_req = 1;
        snprintf(rr->susp_node, sizeof rr->susp_node, "%s", rr->node);
        rr->susp_device = rr->device;
        track(rr, "first_rerun_reproducible", result, m);
        snprintf(msg, sizeof msg, "First rerun: unexpected result is reproducible within the tolerance (%.9g = %.9g). "
                 "Need to rerun on a different GPU to verify correctness.", (double)result, (double)rr->initial);
        log_failure(rr, fatal, msg);
    } else if (!strcmp(rr->node, rr->susp_node) && rr->device == rr->susp_device) {
        say(rr, "ERROR", "Got rescheduled on the same GPU. Need to resume again from the same checkpoint (node: %s, "
            "gpu: %d)", rr->susp_node, rr->susp_device);
        rr->again_req = 1;
    } else if (cmp > tol) {
        track(rr, "second_rerun_not_reproducible", result, m);
        say(rr, "WARNING", "Second rerun: unexpected result is not reproducible on a different GPU, therefore was "
            "likely incorrect (%.9g != %.9g)", (double)result, (double)rr->initial);
        log_failure(rr, 1, "Possible persistent error!");
        if (!fatal) rr->cont_req = 1;
    } else {
        track(rr, "second_rerun_reproducible", result, m);
        say(rr, "WARNING", "Second rerun: unexpected result is reproducible on a different GPU, therefore it was "
            "likely correct (%.9g = %.9g)", (double)result, (double)rr->initial);
        snprintf(msg, sizeof msg, "Correct result (but possible Application error) (%s)", m);
        log_failure(rr, 1, msg);
        if (!fatal) rr->cont_req = 1;
    }
}

/* validate_result for one call (check, seq = its invocation number), call = its index this pass */
static void validate_call(mt_rerun *rr, int check, int seq, int64_t call, float v) {
    if (rr->mode == MT_RERUN_STATS) {
        if (rr->state == MT_RS_INITIAL_RUN) {
            rr->rerun_req = 1;
            rr->stat_initial[check] = v; /* every call of a check validates the same value here */
        } else if (rr->state == MT_RS_RERUNNING_IN_PLACE) {
            const double d = compare(rr->stat_initial[check], v);
            if (d == 0) rr->stat_zero[check]++;
            else {
                rr->stat_n[check]++;
                rr->stat_sum[check] += d;
                if (d > rr->stat_max[check]) rr->stat_max[check] = d;
            }
        }
        return;
    }
    if (!rr->logged_enabled) {
        rr->logged_enabled = 1;
        SAY_RANK0(rr, "WARNING", "Result validation enabled");
    }
    if (rr->state == MT_RS_INITIAL_RUN && !rr->rerun_req) {
        if (!rr->first_done) return; /* a save must be possible: the optimizer has stepped once */
        if (!maybe_inject(rr, call) && !rejects(rr, check, v)) return;
        rr->failed = 1, rr->check = check, rr->seq = seq, rr->initial = v;
        rr->rerun_req = 1;
        track(rr, "initial_run", v, check_msg[check]);
        say(rr, "ERROR", "Unexpected result %.9g on rank %d at iteration #%" PRId64 " invocation #%d (message='%s')",
            (double)v, rr->rank, rr->iteration, seq, check_msg[check]);
    } else if ((rr->state == MT_RS_RERUNNING_IN_PLACE || rr->state == MT_RS_RERUNNING_FROM_CHECKPOINT) && rr->failed &&
               rr->check == check && rr->seq == seq)
        compare_rerun(rr, v);
}

mt_status mt_rerun_validate(mt_rerun *rr, float local_loss, int n_micro, const void *grads, size_t n_grads) {
    mt_status st = MT_OK;
    if (rr->mode == MT_RERUN_DISABLED) return MT_OK;
    int64_t call = 0;
    for (int mb = 0; rr->has_loss && mb < n_micro; mb++) /* loss_func per micro-batch: NaN, Inf, spiky loss */
        for (int c = CHECK_NAN; c <= CHECK_SPIKY; c++) {
            if (!check_on(rr, c)) continue;
            validate_call(rr, c, mb + 1, call++, local_loss);
        }
    if (!rr->check_nan || !n_grads) return MT_OK;
    float sq = 0; /* the rank's gradient norm, every rank (check_grads before the data-parallel collective) */
    mt_sum_args sa = {.out = rr->flags, .x = grads, .n = n_grads, .squares = 1};
    MT_CHECK(rr->be->i->memset_zero(rr->be, rr->flags, 4));
    MT_CHECK(MT_BE_CALL(rr->be, sum, &sa));
    MT_CHECK(rr->be->i->copy_d2h(rr->be, &sq, rr->flags, 4));
    validate_call(rr, CHECK_GRAD_NAN, 1, call++, sqrtf(sq));
    validate_call(rr, CHECK_GRAD_INF, 1, call++, sqrtf(sq));
out:
    return st;
}

void mt_rerun_exit_decision(mt_rerun *rr, int *save, int *exit_code) {
    *save = *exit_code = 0;
    rr->first_done = 1;
    if (rr->mode != MT_RERUN_VALIDATE) return;
    switch (rr->state) {
    case MT_RS_RERUNNING_IN_PLACE:
        SAY_RANK0(rr, "WARNING", "Exiting now. The job can be resumed from a previous checkpoint");
        *exit_code = MT_EXIT_FAILED_ON_RESULT_VALIDATION;
        break;
    case MT_RS_WILL_RERUN_FROM_CHECKPOINT:
        SAY_RANK0(rr, "WARNING", "Saving a checkpoint and exiting now. Please resume the job from the checkpoint to "
                  "rerun the last iteration and establish a diagnostic");
        *save = 1;
        *exit_code = MT_EXIT_RESUME_TO_DISAMBIGUATE;
        break;
    case MT_RS_RERUNNING_FROM_CHECKPOINT:
        SAY_RANK0(rr, "WARNING", "Exiting now. A checkpoint at the last iteration already exists if further "
                  "examination is needed");
        *exit_code = MT_EXIT_FAILED_ON_RESULT_VALIDATION;
        break;
    case MT_RS_RERUNNING_AGAIN_FROM_CHECKPOINT:
        SAY_RANK0(rr, "WARNING", "Exiting now. Please resume the job from the same checkpoint to rerun the last "
                  "iteration and establish a diagnostic");
        *exit_code = MT_EXIT_RESUME_TO_DISAMBIGUATE;
        break;
    default:
        break;
    }
}

/* Text: "state=S iteration=I world=W" then one line per rank whose call failed:
 * "rank=R check=C seq=Q result=BITS injected=T device=D node=N" */
mt_status mt_rerun_state_text(mt_rerun *rr, char *buf, size_t n) {
    mt_status st = MT_OK;
    int32_t me[REC_WORDS];
    memset(me, 0, sizeof me);
    uint32_t bits;
    memcpy(&bits, &rr->initial, 4);
    me[0] = rr->failed, me[1] = rr->check, me[2] = rr->seq, me[3] = (int32_t)bits, me[4] = rr->injected;
    me[5] = rr->susp_device;
    memcpy(&me[6], rr->susp_node, sizeof rr->susp_node);
    const mt_group *w = mt_pstate_group(rr->ps, MT_PG_WORLD);
    if (w->size > 1) {
        char *send = (char *)rr->gather + (size_t)rr->world * REC_WORDS * 4;
        MT_CHECK(rr->be->i->copy_h2d(rr->be, send, me, sizeof me));
        MT_CHECK(w->comm->i->allgather(w->comm, send, rr->gather, REC_WORDS, MT_F32));
        MT_CHECK(rr->be->i->copy_d2h(rr->be, rr->table, rr->gather, (size_t)rr->world * REC_WORDS * 4));
    } else
        memcpy(rr->table, me, sizeof me);
    size_t k = (size_t)snprintf(buf, n, "state=%s iteration=%" PRId64 " world=%d\n", state_name[rr->state],
                                rr->iteration, rr->world);
    for (int r = 0; r < rr->world && k < n; r++) {
        const int32_t *t = rr->table + (size_t)r * REC_WORDS;
        if (!t[0]) continue;
        char node[65];
        memcpy(node, &t[6], 64);
        node[64] = 0;
        const int len = snprintf(buf + k, n - k, "rank=%d check=%d seq=%d result=%08" PRIx32 " injected=%d device=%d "
                                 "node=%s\n", r, t[1], t[2], (uint32_t)t[3], t[4], t[5], node);
        if (len < 0 || (size_t)len >= n - k) { /* the manifest keeps the lowest ranks' records */
            buf[k] = 0;
            say(rr, "WARNING", "rerun state: records from rank %d on do not fit the manifest's %zu bytes", r, n);
            break;
        }
        k += (size_t)len;
    }
out:
    return st;
}

mt_status mt_rerun_load(mt_rerun *rr, const char *text) {
    if (!text[0]) return MT_OK;
    if (rr->mode == MT_RERUN_DISABLED) {
        if (rr->rank == 0)
            fprintf(stderr, "%sWARNING:" LOGGER ":RerunStateMachine disabled via CLI, ignoring machine state saved in "
                    "checkpoint\n", rr->prefix);
        return MT_OK;
    }
    char state[40];
    int64_t it = 0;
    int world = 0;
    if (sscanf(text, "state=%39s iteration=%" SCNd64 " world=%d", state, &it, &world) != 3 ||
        strcmp(state, state_name[MT_RS_WILL_RERUN_FROM_CHECKPOINT]))
        return mt_errorf(MT_ERR_DATA, "the save's rerun_state_machine field is not a pending rerun: \"%.80s\"", text);
    if (world != rr->world)
        return mt_errorf(MT_ERR_CONFIG, "the save holds a pending rerun of iteration %" PRId64 " from %d ranks, each "
                         "comparing its own result: resume it on %d ranks with the same layout (or with "
                         "--rerun-mode disabled to ignore it)", it, world, world);
    SAY_RANK0(rr, "WARNING", "Getting RerunStateMachine state from checkpoint. Will rerun step.");
    rr->state = MT_RS_WILL_RERUN_FROM_CHECKPOINT;
    rr->iteration = it;
    for (const char *line = strchr(text, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        int rank, check, seq, injected, device;
        uint32_t bits;
        char node[65];
        if (sscanf(line + 1, "rank=%d check=%d seq=%d result=%" SCNx32 " injected=%d device=%d node=%64s", &rank,
                   &check, &seq, &bits, &injected, &device, node) != 7 || check < 0 || check >= N_CHECKS ||
            injected < -1 || injected > MT_INJECT_PERSISTENT)
            return mt_errorf(MT_ERR_DATA, "the save's rerun_state_machine field: a bad record \"%.80s\"", line + 1);
        if (rank != rr->rank) continue;
        rr->failed = 1, rr->check = check, rr->seq = seq, rr->injected = injected, rr->susp_device = device;
        memcpy(&rr->initial, &bits, 4);
        snprintf(rr->susp_node, sizeof rr->susp_node, "%.63s", node);
    }
    return MT_OK;
}
