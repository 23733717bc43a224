/* cmd_logprobs.c — `mtrain logprobs`: score completions with a checkpoint, and compare two
 * logprobs files (train/logprobs.h does both).
 *   mtrain logprobs --config RECIPE --load CKPT --prompts FILE.jsonl --output OUT.jsonl [overrides]
 *   mtrain launch -n N -- logprobs ... --tensor-model-parallel-size N   (any tp x pp x dp layout)
 *   mtrain logprobs --compare A.jsonl B.jsonl [--tol 0.01]
 * Bootstraps like training (ranks, recipe validation, backend, process groups), builds the model
 * for one sequence per micro-batch and loads the checkpoint (any saved layout). Datasets are never
 * opened. Rule kept: returns the exit code; cmd/mtrain.c exits. */
#include "cmd/cmd_logprobs.h"
#include "cmd/cmd_args.h"
#include "cmd/cmd_ranks.h"
#include "cmd/recipe_args.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/recipe/recipe.h"
#include "parallel/parallel_state.h"
#include "train/backend_select.h"
#include "train/logprobs.h"
#include "train/train.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: mtrain logprobs --config RECIPE --load CKPT --prompts FILE.jsonl --output OUT.jsonl [--set k=v ...]\n"
            "       mtrain launch -n N -- logprobs ... [--tensor-model-parallel-size TP] [--pipeline-model-parallel-size PP]\n"
            "       mtrain logprobs --compare A.jsonl B.jsonl [--tol 0.01]\n"
            "\n"
            "  Scores each line {\"prompt\": \"...\", \"completion\": \"...\"} of FILE.jsonl with the checkpoint CKPT\n"
            "  (a folder --save wrote, or one iter_* folder in it; saved at any layout): prompt and completion\n"
            "  are tokenized separately with the recipe's tokenizer (data.tokenizer, data.vocab, data.merges),\n"
            "  at most model.seq_length + 1 tokens in all, and run through the model's forward and loss.\n"
            "  The logging rank writes one line per prompt to OUT.jsonl:\n"
            "    {\"prompt\", \"completion\", \"prompt_tokens\": [ids], \"tokens\": [completion ids],\n"
            "     \"logprobs\": [log p(token | everything before it)], \"sum\": total}\n"
            "  RECIPE gives the model shape and tokenizer (its data.path is not read); flags as for training\n"
            "  (--tensor-model-parallel-size, --sequence-parallel, --pipeline-model-parallel-size, --backend ...).\n"
            "  Tensor, sequence and pipeline parallelism (virtual pipeline included) work; extra data-parallel\n"
            "  ranks compute the same values.\n"
            "\n"
            "  --compare: A and B must score the same text (same \"tokens\", and \"prompt_tokens\" / \"prompt\" /\n"
            "  \"completion\" where both have them; else exit 2). Prints the largest |difference| of the per-token\n"
            "  logprobs and where; exit 0 when it is <= --tol (default 0.01), 1 otherwise.\n");
}

static int compare(const char *a, const char *b, double tol) {
    mt_logprobs_diff d;
    if (mt_logprobs_compare(a, b, &d) != MT_OK) {
        fprintf(stderr, "mtrain logprobs --compare: error: %s\n", mt_last_error());
        return 2;
    }
    const int ok = d.max_abs <= tol; /* NaN / infinite differences fail */
    printf("logprobs compare: %lld prompts, %lld tokens: max |difference| %.3e (prompt %lld%s%s%s, token %d), "
           "max |difference| of the sums %.3e; %s tolerance %g\n",
           (long long)d.n_lines, (long long)d.n_tokens, d.max_abs, (long long)d.worst_line,
           d.worst_prompt[0] ? " \"" : "", d.worst_prompt, d.worst_prompt[0] ? "\"" : "", d.worst_token, d.max_abs_sum,
           ok ? "within" : "EXCEEDS", tol);
    return ok ? 0 : 1;
}

int mt_cmd_logprobs(int argc, char **argv) {
    static mt_recipe r;
    static mt_parallel_state ps;
    const char *config = NULL, *prompts = NULL, *output = NULL, *cmp_a = NULL, *cmp_b = NULL, *tol_s = NULL;
    int n = 0, missing = 0;
    for (int i = 0; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--compare")) {
            if (i + 2 >= argc) {
                fprintf(stderr, "mtrain logprobs: error: --compare needs two files: --compare A.jsonl B.jsonl\n");
                return 2;
            }
            cmp_a = argv[++i];
            cmp_b = argv[++i];
        } else if ((v = mt_flag_value(argc, argv, &i, "--tol", &missing))) {
            tol_s = v;
        } else if ((v = mt_flag_value(argc, argv, &i, "--config", &missing)) || (v = mt_flag_value(argc, argv, &i, "-c", &missing))) {
            config = v;
        } else if ((v = mt_flag_value(argc, argv, &i, "--prompts", &missing))) {
            prompts = v;
        } else if ((v = mt_flag_value(argc, argv, &i, "--output", &missing))) {
            output = v;
        } else if (missing) {
            break;
        } else {
            argv[n++] = argv[i];
        }
        if (missing) break;
    }
    if (missing) {
        fprintf(stderr, "mtrain logprobs: error: a flag has no value; see `mtrain logprobs --help`\n");
        return 2;
    }
    if (cmp_a) {
        double tol = 0.01;
        if (tol_s) {
            char *end = NULL;
            tol = strtod(tol_s, &end);
            if (!end || *end || !(tol >= 0) || !isfinite(tol)) {
                fprintf(stderr, "mtrain logprobs: error: --tol %s: expected a non-negative number\n", tol_s);
                return 2;
            }
        }
        if (config || prompts || output || n > 0) {
            fprintf(stderr, "mtrain logprobs: error: --compare takes two files and --tol only (got '%s')\n",
                    config ? "--config" : prompts ? "--prompts" : output ? "--output" : argv[0]);
            return 2;
        }
        return compare(cmp_a, cmp_b, tol);
    }
    if (tol_s) {
        fprintf(stderr, "mtrain logprobs: error: --tol goes with --compare A.jsonl B.jsonl\n");
        return 2;
    }
    if (!config || !prompts || !output) {
        fprintf(stderr, "mtrain logprobs: error: missing %s; see `mtrain logprobs --help`\n",
                !config ? "--config RECIPE" : !prompts ? "--prompts FILE.jsonl" : "--output OUT.jsonl");
        return 2;
    }
    argc = n;
    const int load_rc = mt_cmd_load_recipe("mtrain logprobs", config, &argc, argv, &r);
    if (load_rc) return load_rc;
    if (!r.checkpoint.load[0]) {
        fprintf(stderr, "mtrain logprobs: error: no checkpoint: pass --load DIR (a folder --save wrote)\n");
        return 2;
    }
    /* one sequence per micro-batch: the recipe's batch sizes only have to fit the layout */
    if (mt_recipe_set(&r, "training.micro_batch", "1", "mtrain logprobs") != MT_OK) return mt_cmd_fail("mtrain logprobs");

    char note[1024];
    mt_backend be;
    const int rc = mt_cmd_start_ranks("mtrain logprobs", &r, &ps, &be, note, sizeof note, note, sizeof note);
    if (rc) return rc;
    if (note[0] && ps.logger) fprintf(stderr, "mtrain logprobs: %s\n", note);
    mt_logprobs lp;
    mt_logprobs_report rep;
    mt_status st = mt_logprobs_open(&lp, &r, &be, &ps, stdout);
    if (st == MT_OK) {
        st = mt_logprobs_run_file(&lp, prompts, output, stdout, &rep);
        mt_logprobs_close(&lp);
    }
    char device[160];
    snprintf(device, sizeof device, "%s", be.device_name ? be.device_name : be.i->name);
    mt_backend_destroy(&be);
    if (st != MT_OK) return mt_cmd_fail_rank("mtrain logprobs", &ps, st);
    if (ps.logger)
        printf("%s%smtrain logprobs: %lld prompts, %lld completion tokens scored in %.2f s (backend %s, %d rank%s: "
               "tp %d, pp %d, dp %d; sequences run at up to %d of model.seq_length %d positions) -> %s\n",
               ps.size > 1 ? ps.prefix : "", ps.size > 1 ? " " : "", (long long)rep.n_prompts, (long long)rep.n_tokens,
               rep.seconds, device, ps.size, ps.size > 1 ? "s" : "",
               ps.grid.tp, ps.grid.pp, ps.grid.dp, rep.longest_T, r.model.seq_length, output);
    mt_pstate_free(&ps);
    return 0;
}
