/* rerun.h — Megatron-LM's rerun state machine (megatron/core/rerun_state_machine.py,
 * RerunStateMachine and RerunErrorInjector) for the training loop: each iteration's local loss is
 * validated (pretrain_gpt.py's loss_func: NaN, Inf, and with check_for_spiky_loss a loss 10x the
 * largest of the first 100 seen), and each rank's gradient norm (NaN, Inf: check_grads of
 * megatron/core/distributed/param_and_grad_buffer.py, with one bucket); a rejected result reruns the iteration's forward and backward in
 * place on the same data and weights and compares. Not reproduced: a transient fault (fatal checks
 * exit 17, EXIT_CODE_FAILED_ON_RESULT_VALIDATION; the spiky-loss check goes on). Reproduced: the
 * state before the iteration is saved with the machine's state and the job exits 16
 * (EXIT_CODE_RESUME_TO_DISAMBIGUATE) to be resumed on other hardware, where the iteration is run a
 * third time: a different result is a persistent fault of the first node, the same result a
 * correct one; both exit 17 (a resume on the same node and device exits 16 again). Every verdict is
 * one max-reduction over the world, so all ranks take the same branch. report_stats reruns every
 * iteration once and reports the differences. Log lines are Megatron's, with its logger's
 * "LEVEL:megatron.core.rerun_state_machine:" prefix, on stderr.
 * mtrain's validated value is a rank's loss summed over its micro-batches (one read per
 * iteration); the validation calls are still counted per micro-batch, in loss_func's order, so the
 * injection rate (1 in N calls) and the invocation numbers mean what they mean in Megatron. The
 * injector draws from mtrain's counter-based generator (seed, pipeline stage, iteration, call),
 * not Python's random module: the same rate, other iterations. Nothing is allocated after
 * mt_rerun_init. */
#ifndef MT_RERUN_H
#define MT_RERUN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/backend.h"
#include "core/recipe/recipe.h"
#include "parallel/parallel_state.h"

#define MT_EXIT_RESUME_TO_DISAMBIGUATE 16     /* Megatron's EXIT_CODE_RESUME_TO_DISAMBIGUATE */
#define MT_EXIT_FAILED_ON_RESULT_VALIDATION 17 /* Megatron's EXIT_CODE_FAILED_ON_RESULT_VALIDATION */

#define MT_RERUN_CHECKS 5 /* the validated values: loss NaN, Inf, spiky; gradient norm NaN, Inf */

/* Megatron's RerunState */
typedef enum {
    MT_RS_NOT_RUNNING_YET = 0,
    MT_RS_INITIAL_RUN,
    MT_RS_RERUNNING_IN_PLACE,
    MT_RS_WILL_RERUN_FROM_CHECKPOINT,
    MT_RS_RERUNNING_FROM_CHECKPOINT,
    MT_RS_RERUNNING_AGAIN_FROM_CHECKPOINT
} mt_rerun_state;

typedef struct {
    mt_rerun_mode mode;
    mt_rerun_state state;
    int64_t iteration;        /* the iteration being run, 1-based (Megatron's current_iteration + 1) */
    int first_done;           /* Megatron's first_iteration_complete: no validation before it */
    int rerun_req, ckpt_req, again_req, cont_req; /* this rank's requests, reduced over the world */
    int logged_enabled;
    /* the injector */
    int rate;
    mt_inject_type inject_type;
    int injected;             /* the injected type still to be resolved, -1: none */
    int check_nan, check_spiky;
    /* the call that failed in the initial run, on this rank */
    int failed, check, seq;
    float initial;
    char susp_node[64];
    int susp_device;
    /* spiky loss (is_unexpectedly_large: threshold 10, 100 samples) */
    int64_t large_count;
    double max_value;
    /* report_stats, per check: this iteration's initial result, and the differences seen */
    float stat_initial[MT_RERUN_CHECKS];
    int64_t stat_zero[MT_RERUN_CHECKS], stat_n[MT_RERUN_CHECKS];
    double stat_sum[MT_RERUN_CHECKS], stat_max[MT_RERUN_CHECKS];
    /* this rank */
    int rank, world, has_loss, device;
    uint64_t seed;            /* the injector's: training.seed and the pipeline stage */
    char node[64];
    char prefix[72];          /* the rank's log prefix */
    char tracker[MT_PATH_MAX];
    const mt_parallel_state *ps;
    mt_backend *be;
    void *flags;              /* (16) f32 backend scratch: the world's verdicts, the statistics */
    void *gather;             /* (world + 1) records, backend scratch for the rerun save's state */
    int32_t *table;           /* host copy of the gathered records */
} mt_rerun;

/* Sets the machine up for this rank (has_loss: the rank computes the loss, Megatron's last
 * pipeline stage); checks that the tracker file can be appended to. Disabled mode allocates
 * nothing and every call below is a no-op that runs each iteration once. */
mt_status mt_rerun_init(mt_rerun *rr, const mt_recipe *r, const mt_parallel_state *ps, mt_backend *be, int has_loss);
void mt_rerun_free(mt_rerun *rr);
/* Whether the machine reruns: validation or statistics (the trainer then reads the local loss). */
int mt_rerun_active(const mt_rerun *rr);
/* Megatron's should_run_forward_backward: *run = 1 while iteration `it`'s forward and backward
 * must run (again). Collective over the world after a pass. */
mt_status mt_rerun_should_run(mt_rerun *rr, int64_t it, int *run);
/* The validate_result calls of one pass: loss_func's per micro-batch (local_loss is this rank's loss
 * summed over its n_micro micro-batches; ignored on ranks without the loss), then check_grads' on
 * the norm of this rank's n_grads f32 gradients (every rank; before the data-parallel reduction,
 * or after it when the buckets were reduced during backward). */
mt_status mt_rerun_validate(mt_rerun *rr, float local_loss, int n_micro, const void *grads, size_t n_grads);
/* Megatron's should_checkpoint_and_exit, after the passes: *save = 1 to save the state before this
 * iteration, *exit_code != 0 to end the job with it. */
void mt_rerun_exit_decision(mt_rerun *rr, int *save, int *exit_code);
/* The machine's state for the save it asked for (collective: every rank's failed call is
 * gathered to the text rank 0 writes in the manifest). */
mt_status mt_rerun_state_text(mt_rerun *rr, char *buf, size_t n);
/* A resumed save's state text ("" = none): the next iteration reruns the failed call here. */
mt_status mt_rerun_load(mt_rerun *rr, const char *text);

#endif
