/* cmd_generate.c — `mtrain generate`: tokenize a prompt with the recipe's tokenizer, continue it
 * with a checkpoint (train/generate.h: full recomputation, or the KV cache: both the training forward on the backend),
 * print the prompt and the continuation on stdout (a summary on stderr).
 *   mtrain generate --config RECIPE --load CKPT --prompt TEXT [--max-new-tokens N] [--temperature T]
 *                   [--top-k K] [--top-p P] [--seed S] [--no-kv-cache] [--show-tokens] [overrides]
 * One process only (the checkpoint may come from any layout: the loader reshards). Rule kept:
 * returns the exit code; cmd/mtrain.c exits. */
#include "cmd/cmd_generate.h"
#include "cmd/cmd_args.h"
#include "cmd/recipe_args.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/recipe/recipe.h"
#include "parallel/parallel_state.h"
#include "train/backend_select.h"
#include "train/generate.h"
#include "train/train.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: mtrain generate --config RECIPE --load CKPT --prompt TEXT [--max-new-tokens N] [--temperature T]\n"
            "                       [--top-k K] [--top-p P] [--seed S] [--no-kv-cache] [--show-tokens] [--set k=v ...]\n"
            "\n"
            "  Continues TEXT (tokenized with the recipe's data.tokenizer / data.vocab / data.merges) with the\n"
            "  checkpoint CKPT (a folder --save wrote, or one iter_* folder in it; saved at any layout) and\n"
            "  prints the prompt and the continuation on stdout. Stops at the end-of-document token, after\n"
            "  --max-new-tokens (default 64), or when the context (model.seq_length) is full.\n"
            "  --temperature T   0 = greedy (argmax); default 0.8\n"
            "  --top-k K         sample among the K most likely tokens (default 0: all)\n"
            "  --top-p P         nucleus: the smallest most-likely set of probability >= P (default 1: all)\n"
            "  --seed S          the sampling seed (default 1234): the same seed gives the same text\n"
            "  --no-kv-cache     recompute the whole context with the model's forward each step (on the\n"
            "                    backend) instead of the KV cache; greedy gives the same tokens\n"
            "  --show-tokens     also print the generated token ids on stderr\n"
            "  One process: tensor / pipeline / context / expert parallel sizes must be 1.\n");
}

static int parse_double(const char *s, double *v) {
    char *end = NULL;
    errno = 0;
    *v = strtod(s, &end);
    return end != s && !*end && !errno && isfinite(*v);
}

static int parse_long(const char *s, long long *v) {
    char *end = NULL;
    errno = 0;
    *v = strtoll(s, &end, 10);
    return end != s && !*end && !errno;
}

static const char *stop_name(mt_gen_stop s) {
    return s == MT_GEN_STOP_EOD ? "end of document" : s == MT_GEN_STOP_CONTEXT ? "context full" : "max tokens";
}

typedef struct {
    const char *config, *prompt, *s_max, *s_temp, *s_k, *s_p, *s_seed;
    int no_kv, show;
} gen_args;

/* Takes the command's own flags out of argv (the rest stay, in order, in argv[0, *argc) for the
 * recipe). Returns -1 to go on, else the exit code (0 after --help). */
static int parse_flags(int *argc, char **argv, gen_args *a) {
    const struct { const char *name; const char **dst; } valued[] = {
        {"--config", &a->config}, {"-c", &a->config}, {"--prompt", &a->prompt}, {"--max-new-tokens", &a->s_max},
        {"--temperature", &a->s_temp}, {"--top-k", &a->s_k}, {"--top-p", &a->s_p}, {"--seed", &a->s_seed},
    };
    int n = 0, missing = 0;
    for (int i = 0; i < *argc && !missing; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--no-kv-cache")) {
            a->no_kv = 1;
            continue;
        }
        if (!strcmp(argv[i], "--show-tokens")) {
            a->show = 1;
            continue;
        }
        const char *v = NULL;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0] && !v && !missing; k++)
            if ((v = mt_flag_value(*argc, argv, &i, valued[k].name, &missing))) *valued[k].dst = v;
        if (!v && !missing) argv[n++] = argv[i];
    }
    if (missing) {
        fprintf(stderr, "mtrain generate: error: a flag has no value; see `mtrain generate --help`\n");
        return 2;
    }
    if (!a->config || !a->prompt) {
        fprintf(stderr, "mtrain generate: error: missing %s; see `mtrain generate --help`\n",
                !a->config ? "--config RECIPE" : "--prompt TEXT");
        return 2;
    }
    *argc = n;
    return -1;
}

/* The sampling flags' values into *sc and *max_new; 0, or 2 after the message. */
static int parse_sampling(const gen_args *a, mt_sample_cfg *sc, long long *max_new) {
    long long ll;
    double d;
    if (a->s_max && (!parse_long(a->s_max, max_new) || *max_new < 0 || *max_new > 1 << 30)) {
        fprintf(stderr, "mtrain generate: error: --max-new-tokens %s: expected a count >= 0\n", a->s_max);
        return 2;
    }
    if (a->s_temp) {
        if (!parse_double(a->s_temp, &d) || d < 0) {
            fprintf(stderr, "mtrain generate: error: --temperature %s: expected a number >= 0 (0 = greedy)\n",
                    a->s_temp);
            return 2;
        }
        sc->temperature = (float)d;
    }
    if (a->s_k) {
        if (!parse_long(a->s_k, &ll) || ll < 0 || ll > 1 << 30) {
            fprintf(stderr, "mtrain generate: error: --top-k %s: expected a count >= 0 (0 = off)\n", a->s_k);
            return 2;
        }
        sc->top_k = (int)ll;
    }
    if (a->s_p) {
        if (!parse_double(a->s_p, &d) || !(d > 0) || d > 1) {
            fprintf(stderr, "mtrain generate: error: --top-p %s: expected a number in (0, 1] (1 = off)\n", a->s_p);
            return 2;
        }
        sc->top_p = (float)d;
    }
    if (a->s_seed) {
        char *end = NULL;
        errno = 0;
        const unsigned long long u = strtoull(a->s_seed, &end, 10);
        if (end == a->s_seed || *end || errno || a->s_seed[0] == '-') {
            fprintf(stderr, "mtrain generate: error: --seed %s: expected a non-negative integer\n", a->s_seed);
            return 2;
        }
        sc->seed = (uint64_t)u;
    }
    return 0;
}

/* The recipe of argv, checked for one process with a checkpoint, with batches of one sequence;
 * 0 or the exit code. */
static int load_recipe(const char *config, int argc, char **argv, mt_recipe *r) {
    const int load_rc = mt_cmd_load_recipe("mtrain generate", config, &argc, argv, r);
    if (load_rc) return load_rc;
    if (!r->checkpoint.load[0]) {
        fprintf(stderr, "mtrain generate: error: no checkpoint: pass --load DIR (a folder --save wrote)\n");
        return 2;
    }
    if (r->parallel.tensor > 1 || r->parallel.pipeline > 1 || r->parallel.context > 1 || r->parallel.expert > 1 ||
        r->parallel.data > 1) {
        fprintf(stderr, "mtrain generate: error: generation runs as one process: the recipe asks for tp %d pp %d cp %d "
                        "ep %d dp %d; set them to 1 (e.g. --tensor-model-parallel-size 1); a checkpoint saved at any "
                        "layout loads into one process (the loader reshards)\n",
                r->parallel.tensor, r->parallel.pipeline, r->parallel.context, r->parallel.expert, r->parallel.data);
        return 2;
    }
    /* one sequence per micro-batch: the batch sizes only have to fit one rank */
    if (mt_recipe_set(r, "training.micro_batch", "1", "mtrain generate") != MT_OK) return mt_cmd_fail("mtrain generate");
    if (mt_recipe_set(r, "training.global_batch", "1", "mtrain generate") != MT_OK) return mt_cmd_fail("mtrain generate");
    return 0;
}

/* Encodes the prompt (an empty one: the end-of-document token, a new document), prints it,
 * generates and prints the continuation and the summary. */
static mt_status run(mt_generator *g, const mt_recipe *r, const mt_backend *be, const gen_args *a,
                     const mt_sample_cfg *sc, long long max_new) {
    mt_status st = MT_OK;
    mt_token_buf pt = {0};
    int32_t *out = NULL;
    MT_CHECK(mt_tokenizer_encode(g->tok, a->prompt, strlen(a->prompt), &pt));
    const int empty = pt.n_ids == 0;
    if (empty) MT_CHECK(mt_token_buf_push(&pt, mt_tokenizer_eod(g->tok)));
    if (pt.n_ids > r->model.seq_length) {
        st = mt_errorf(MT_ERR_CONFIG, "the prompt is %lld tokens, longer than the context (model.seq_length = %d)",
                       (long long)pt.n_ids, r->model.seq_length);
        goto out;
    }
    out = malloc((size_t)(max_new > 0 ? max_new : 1) * sizeof *out);
    if (!out) {
        st = mt_errorf(MT_ERR_OOM, "generate: %lld token ids", max_new);
        goto out;
    }
    if (!empty) {
        fwrite(a->prompt, 1, strlen(a->prompt), stdout);
        fflush(stdout);
    }
    mt_gen_report rep;
    MT_CHECK(mt_generate(g, pt.ids, (int)pt.n_ids, (int)max_new, sc, !a->no_kv, out, stdout, &rep));
    fputc('\n', stdout);
    fflush(stdout);
    if (a->show) {
        fprintf(stderr, "mtrain generate: prompt ids:");
        for (int64_t i = 0; i < pt.n_ids; i++) fprintf(stderr, " %d", (int)pt.ids[i]);
        fprintf(stderr, "\nmtrain generate: generated ids:");
        for (int i = 0; i < rep.n_new; i++) fprintf(stderr, " %d", (int)out[i]);
        fputc('\n', stderr);
    }
    fprintf(stderr, "mtrain generate: %d prompt tokens, %d new tokens in %.3f s (%.1f tokens/s; %s, backend %s), "
                    "stopped: %s; temperature %g top-k %d top-p %g seed %llu\n",
            rep.n_prompt, rep.n_new, rep.seconds, rep.seconds > 0 ? rep.n_new / rep.seconds : 0.0,
            a->no_kv ? "full recomputation" : "KV cache", be->device_name ? be->device_name : be->i->name,
            stop_name(rep.stop), (double)sc->temperature, sc->top_k, (double)sc->top_p, (unsigned long long)sc->seed);
out:
    free(out);
    mt_token_buf_free(&pt);
    return st;
}

int mt_cmd_generate(int argc, char **argv) {
    static mt_recipe r;
    static mt_parallel_state ps;
    gen_args a = {0};
    int rc = parse_flags(&argc, argv, &a);
    if (rc >= 0) return rc;
    mt_sample_cfg sc = {.temperature = 0.8f, .top_k = 0, .top_p = 1.0f, .seed = 1234};
    long long max_new = 64;
    if ((rc = parse_sampling(&a, &sc, &max_new)) || (rc = load_recipe(a.config, argc, argv, &r))) return rc;

    mt_status st = mt_pstate_bootstrap(&ps, r.parallel.timeout_s);
    if (st != MT_OK) return mt_cmd_fail("mtrain generate");
    if (ps.size > 1) {
        fprintf(stderr, "mtrain generate: error: generation runs as one process, this job has %d ranks (run it "
                        "without mtrain launch / srun / mpirun)\n", ps.size);
        mt_pstate_abort(&ps);
        mt_pstate_free(&ps);
        return 2;
    }
    rc = 1;
    mt_backend be;
    int have_be = 0, have_gen = 0;
    mt_generator g;
    char note[1024];
    if ((st = mt_recipe_validate(&r, ps.size)) != MT_OK) goto done;
    if ((st = mt_train_check_supported(&r, note, sizeof note)) != MT_OK) goto done;
    if ((st = mt_backend_select(&r, ps.size, ps.local_rank, ps.local_size, &be, note, sizeof note)) != MT_OK) goto done;
    have_be = 1;
    if ((st = mt_pstate_setup(&ps, &r, &be)) != MT_OK) goto done;
    if (note[0]) fprintf(stderr, "mtrain generate: %s\n", note);
    if ((st = mt_generator_open(&g, &r, &be, &ps, !a.no_kv, stderr)) != MT_OK) goto done;
    have_gen = 1;
    if ((st = run(&g, &r, &be, &a, &sc, max_new)) != MT_OK) goto done;
    rc = 0;
done:
    if (st != MT_OK) fprintf(stderr, "mtrain generate: error: %s\n", mt_last_error());
    if (have_gen) mt_generator_close(&g);
    if (have_be) mt_backend_destroy(&be);
    mt_pstate_free(&ps);
    return rc;
}
