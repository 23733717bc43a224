/* logprobs.h — `mtrain logprobs`: the log-probability a trained checkpoint gives each token of a
 * completion after its prompt, computed by the training model itself (forward + vocab-parallel
 * cross-entropy of one micro-batch of one sequence, no backward), on any layout: tensor
 * (and sequence) parallel, pipeline parallel through the pipeline executor's forward-only table,
 * replicated over data parallel. The checkpoint may come from any layout (the loader reshards).
 * Also the comparison of two such files (`mtrain logprobs --compare`), e.g. against the NumPy
 * reference test/ref/hf_logprobs.py run on a Hugging Face export.
 *
 * Input: JSON lines {"prompt": "...", "completion": "..."}; both are tokenized separately with the
 * recipe's tokenizer (data.tokenizer, data.vocab, data.merges) and concatenated. Output (written by
 * the logging rank only, through a temporary file renamed at the end): per input line
 *   {"prompt": ..., "completion": ..., "prompt_tokens": [ids], "tokens": [completion ids],
 *    "logprobs": [log p(token | everything before it)], "sum": total}
 * A logprob is minus the per-token loss at the position that predicts the token. A sequence runs
 * through the shortest scoring view that holds it (64, 128, ... tokens; logprobs_view.c) or the
 * full model, padded after the text with the end-of-document id (causal attention: what comes
 * after a position never changes its output).
 * Rules kept: statuses, never exit; nothing here prints except to the `log` stream given. */
#ifndef MT_LOGPROBS_H
#define MT_LOGPROBS_H

#include <stdint.h>
#include <stdio.h>

#include "core/backend.h"
#include "core/data/tokenizer.h"
#include "core/recipe/recipe.h"
#include "parallel/parallel_state.h"
#include "train/model.h"
#include "train/pipeline.h"

#define MT_LOGPROBS_MAX_VIEWS 16 /* scoring views: lengths 64 .. 64 * 2^15 */

/* One rank's scorer: the model (micro-batch of one sequence) with the checkpoint's weights, the
 * pipeline executor when parallel.pipeline > 1, the tokenizer, host staging. */
typedef struct {
    const mt_recipe *r;
    mt_backend *be;
    const mt_parallel_state *ps;
    mt_model model;
    int have_model;
    mt_pipeline pipe;
    int have_pipe;
    int n_micro;            /* micro-batches per pipeline run: 1, or pp under interleaving (the same row each) */
    int head_slot;          /* pipeline: the slot whose activation buffer holds the last losses */
    int has_losses;         /* this rank computes the loss (the whole model, or the last stage) */
    mt_tokenizer *tok;
    int32_t *row;           /* (T+1) host: the tokens of one sequence */
    float *losses;          /* (T) host */
    int64_t iteration;      /* of the loaded checkpoint */
    char ckpt_path[4400];
    int views_usable;       /* shorter scoring views allowed (logprobs_view.c) */
    int last_T;             /* the length the last sequence ran at */
    int view_T[MT_LOGPROBS_MAX_VIEWS]; /* 0: view k not made yet */
    mt_model views[MT_LOGPROBS_MAX_VIEWS];
} mt_logprobs;

/* logprobs_view.c: scoring views at lengths 64, 128, ... below model.seq_length, so that a short
 * sequence is not run at the full length. views_usable: the whole model on this rank and no
 * length-dependent routing. view_for: the shortest view that holds n_ids tokens (made on first
 * use), NULL for the full model (or with *st set when making it failed). */
int mt_logprobs_views_usable(const mt_model *m);
mt_model *mt_logprobs_view_for(mt_logprobs *lp, int n_ids, mt_status *st);
void mt_logprobs_views_close(mt_logprobs *lp);

/* Builds the model for this rank, loads the checkpoint r->checkpoint.load (required; any layout)
 * and opens the recipe's tokenizer. Errors: no --load, a folder without a save, a checkpoint of
 * another model or tokenizer, context parallelism. Mixture-of-experts layers route dropless
 * (mt_model_create_for_use: no capacity when scoring), in every layout (tp, pp, ep). log: the
 * logging rank's stream (NULL = quiet). Not collective beyond what the model's setup is. */
mt_status mt_logprobs_open(mt_logprobs *lp, const mt_recipe *r, mt_backend *be, const mt_parallel_state *ps, FILE *log);
void mt_logprobs_close(mt_logprobs *lp);

/* Scores one sequence: ids[0, n_ids), of which the first n_prompt are the context (n_prompt >= 1,
 * n_ids <= model.seq_length + 1). Collective over the job: every rank calls it with the same ids.
 * On the ranks that hold the loss (lp->has_losses) logprobs[k] (k < n_ids - n_prompt) receives
 * log p(ids[n_prompt + k] | ids[0 .. n_prompt + k)); elsewhere it is left untouched. */
mt_status mt_logprobs_score(mt_logprobs *lp, const int32_t *ids, int n_ids, int n_prompt, double *logprobs);

typedef struct {
    int64_t n_prompts;
    int64_t n_tokens;       /* completion tokens scored */
    int longest_T;          /* the longest length a sequence ran at (model.seq_length without views) */
    double seconds;
} mt_logprobs_report;

/* Reads every line of prompts_path, scores it and (logging rank) writes out_path. Collective:
 * every rank reads the prompts file (the same file on every node). Errors name the file and
 * line: a malformed line, a missing or non-string "prompt" / "completion", an empty prompt or
 * completion, a sequence longer than model.seq_length + 1 tokens. Nothing is left at out_path
 * on an error (a previous file there is kept). */
mt_status mt_logprobs_run_file(mt_logprobs *lp, const char *prompts_path, const char *out_path, FILE *log,
                               mt_logprobs_report *rep);

/* The comparison of two logprobs files: the same number of lines, and line by line the same
 * "tokens" (and "prompt_tokens", "prompt", "completion" when both lines have them), else
 * MT_ERR_DATA naming the line and what differs. max_abs is the largest |a - b| over every
 * per-token logprob (infinite when a value is not finite in one file and differs in the other). */
typedef struct {
    int64_t n_lines, n_tokens;
    double max_abs;
    int64_t worst_line;     /* 1-based; 0 when no token was compared */
    int worst_token;        /* index in the line's completion tokens */
    char worst_prompt[96];  /* the start of that line's prompt ("" when the files have none) */
    double max_abs_sum;     /* largest |sum_a - sum_b| */
} mt_logprobs_diff;

mt_status mt_logprobs_compare(const char *path_a, const char *path_b, mt_logprobs_diff *d);

#endif
