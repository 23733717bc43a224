/* mtrain.c — the command line: argument parsing and subcommand dispatch. The only place in
 * mtrain that decides to exit; everything below returns a status with a message.
 *   mtrain [train] --config R [--set k=v ...] [Megatron-style flags]
 *   mtrain check --config R [--world-size N]     validate a recipe, print it resolved
 *   mtrain pretrain_gpt.py ARGS                   the same as mtrain train ARGS (torchrun's script slot)
 *   mtrain preprocess --input X.jsonl --output-prefix P --tokenizer byte [...]
 *   mtrain launch -n N [--] ARGS...               N local ranks under a built-in PMIx server
 *   mtrain checkpoint inspect DIR                 what a save holds; verify every file
 *   mtrain export --load CKPT --format hf --output DIR   a save (any layout) as a Hugging Face model
 *   mtrain import --format hf --input DIR --save CKPT --config R   the reverse
 *   mtrain logprobs --config R --load CKPT --prompts P --output O   per-token log-probabilities
 *   mtrain bootstrap-check                        diagnostic: bootstrap, allgather, check
 *   mtrain recipe-reference                       every recipe key as a markdown table */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cmd/cmd_ranks.h"
#include "cmd/recipe_args.h"
#include "cmd/cmd_checkpoint.h"
#include "cmd/cmd_export.h"
#include "cmd/cmd_import.h"
#include "cmd/cmd_logprobs.h"
#include "cmd/cmd_generate.h"
#include "cmd/cmd_launch.h"
#include "cmd/cmd_preprocess.h"
#include "cmd/cmd_plan.h"
#include "cmd/cmd_tokenize.h"
#include "core/backend.h"
#include "train/backend_select.h"
#include "train/checkpoint.h"
#include "core/recipe/recipe.h"
#include "train/train.h"
#include "parallel/parallel_state.h"

#define MT_VERSION "0.1.0"

static void usage(FILE *f) {
    fprintf(f,
            "mtrain " MT_VERSION " — GPT / Llama pretraining from a YAML recipe\n"
            "\n"
            "usage:\n"
            "  mtrain [train] [--config RECIPE] [--set key=value ...] [flags]   train (flags alone: on the defaults)\n"
            "  mtrain check --config RECIPE [--world-size N] [overrides]     validate, print the resolved recipe\n"
            "  mtrain preprocess --input X.jsonl --output-prefix P --tokenizer byte [--append-eod]\n"
            "  mtrain plan --config RECIPE [--gpus N] [--gpu a100-80g] [--search] [--json]   memory, FLOPs, bubble, days\n"
            "  mtrain launch -n N [--nnodes K --node-rank R --master-addr H --master-port P] [--max-restarts M] [--] ARGS...\n"
            "                                             N ranks of `mtrain ARGS` here (torchrun's flags; one node of K)\n"
            "  mtrain checkpoint inspect DIR [--iteration N]                  what a save holds; verify sizes and checksums\n"
            "  mtrain export --load CKPT --format hf --output DIR [--dtype bf16] a save (any layout) as a Hugging Face model\n"
            "  mtrain import --format hf --input DIR --save CKPT --config R   a Hugging Face GPT-2 / Llama into a save\n"
            "  mtrain logprobs --config R --load CKPT --prompts P.jsonl --output O.jsonl   per-token log-probabilities;\n"
            "                  --compare A.jsonl B.jsonl [--tol 0.01]           the golden-prompt gate\n"
            "  mtrain generate --config R --load CKPT --prompt TEXT [--temperature T] [--top-k K] [--top-p P]   sample text\n"
            "  mtrain bootstrap-check                                         check how ranks find each other (PMIx / env:// / single)\n"
            "  mtrain recipe-reference [--megatron]                           all recipe keys / Megatron flags (markdown)\n"
            "  mtrain --version | --help\n"
            "\n"
            "overrides: --set section.key=value, and Megatron-style flags such as --lr, --train-iters,\n"
            "--micro-batch-size, --global-batch-size, --seq-length, --tensor-model-parallel-size,\n"
            "--backend cpu|cuda, --metrics FILE, --save DIR, --load DIR, --save-interval N (see README,\n"
            "'Recipe reference'). Every flag taken (docs/megatron-flags.md says what each does here):\n");
    mt_recipe_print_flag_list(f);
}

static int fail(mt_status st) {
    fprintf(stderr, "mtrain: error: %s\n", mt_last_error());
    (void)st;
    return 1;
}

/* The notes of the Megatron flags that were accepted with no effect or run with a substitute. */
static void print_notes(const mt_recipe *r) {
    const char *p = r->notes;
    while (*p) {
        const char *e = strchr(p, '\n');
        const int n = e ? (int)(e - p) : (int)strlen(p);
        fprintf(stderr, "mtrain: note: %.*s\n", n, p);
        p += n + (e != NULL);
    }
}

/* An attempt after the first under `mtrain launch --max-restarts` (MT_RESTART_COUNT >= 1) that has
 * nowhere to resume from says so: without checkpoint.dir the restart begins again at iteration 0
 * (or at checkpoint.load's save), not where the failed attempt stopped. */
static void note_restart(const mt_recipe *r) {
    const char *var;
    const int restart = mt_restart_count(&var);
    if (restart < 1 || r->checkpoint.dir[0]) return;
    fprintf(stderr, "mtrain: note: restart %d of this job (%s) without checkpoint.dir (--save): "
                    "training starts again from %s, not where the failed attempt stopped; give --save DIR "
                    "(with --save-interval) so that a restart resumes from the latest save\n",
            restart, var, r->checkpoint.load[0] ? "checkpoint.load's save" : "iteration 0");
}

/* The world a recipe's own layout implies (tp * pp * cp * dp, dp auto counting 1). */
static int recipe_world(const mt_recipe *r) {
    const mt_parallel_cfg *p = &r->parallel;
    const int world = p->tensor * p->pipeline * p->context * (p->data > 0 ? p->data : 1);
    return world < 1 ? 1 : world;
}

/* Loads --config (optional) and every override. Every problem of the command line is printed in
 * one report: refused flags, values, Megatron rules, unknown arguments, and with them the recipe's
 * own rules (layout, ranges) as they stand, so that no problem hides behind another. --help:
 * the usage, and -1 (the caller exits 0). *world_size gets --world-size N when given (0 otherwise). */
static int load_recipe(int argc, char **argv, mt_recipe *r, int *world_size) {
    static char report[24576];
    const char *config = NULL;
    int n = 0, file_ok = 0;
    mt_recipe_defaults(r);
    *world_size = 0;
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return -1;
        }
    /* first pass: --config and --world-size, the rest stays for the recipe overrides */
    for (int i = 0; i < argc; i++) {
        if ((!strcmp(argv[i], "--config") || !strcmp(argv[i], "-c")) && i + 1 < argc) {
            config = argv[++i];
        } else if (!strncmp(argv[i], "--config=", 9)) {
            config = argv[i] + 9;
        } else if (!strcmp(argv[i], "--world-size") && i + 1 < argc) {
            *world_size = atoi(argv[++i]);
        } else {
            argv[n++] = argv[i];
        }
    }
    argc = n;
    /* no --config: the flags alone define the run, on the defaults (a Megatron launch script) */
    const int rc = mt_cmd_recipe_problems(config, &argc, argv, r, report, sizeof report, &file_ok);
    if (!rc) return 0;
    if (file_ok && mt_recipe_validate(r, *world_size > 0 ? *world_size : recipe_world(r)) != MT_OK) {
        size_t used = strlen(report);
        used += (size_t)snprintf(report + used, sizeof report - used, "\nand the recipe's own rules, with the "
                                 "values above as they stand:");
        for (const char *p = mt_last_error(); *p && used + 4 < sizeof report;) { /* one indented line each */
            const char *e = strchr(p, '\n');
            const int n = e ? (int)(e - p) : (int)strlen(p);
            used += (size_t)snprintf(report + used, sizeof report - used, "\n  %.*s", n, p);
            p += n + (e != NULL);
        }
    }
    fprintf(stderr, "mtrain: error: %s\n", report);
    return rc;
}

/* after a SIGTERM under mpirun: ends the process with 0 if the PMIx finalize has not returned
 * within a second (see cmd_train) */
static void *finalize_watchdog(void *arg) {
    (void)arg;
    struct timespec ts = {.tv_sec = 1, .tv_nsec = 0};
    while (nanosleep(&ts, &ts) != 0) {
    }
    fflush(stdout);
    fflush(stderr);
    _exit(0);
    return NULL;
}

static int cmd_train(int argc, char **argv) {
    static mt_recipe r;
    static mt_parallel_state ps;
    int world_flag = 0;
    int rc = load_recipe(argc, argv, &r, &world_flag);
    if (rc) return rc < 0 ? 0 : MT_EXIT_CONFIG;
    char support_note[512], note[1024];
    mt_backend be;
    rc = mt_cmd_start_ranks("mtrain", &r, &ps, &be, support_note, sizeof support_note, note, sizeof note);
    if (rc) return rc;
    if (ps.logger) print_notes(&r);
    if (ps.logger) note_restart(&r);
    if (support_note[0] && ps.logger) fprintf(stderr, "mtrain: %s\n", support_note);
    if (note[0] && ps.logger) fprintf(stderr, "mtrain: %s\n", note);
    if (r.training.precision == MT_PREC_BF16 && be.act == MT_F32 && ps.logger)
        fprintf(stderr, "mtrain: note: training.precision=bf16 applies on the CUDA backend; the CPU backend computes in fp32\n");
    mt_train_report rep;
    mt_status st = mt_train(&r, &be, &ps, stdout, NULL, &rep);
    mt_backend_destroy(&be);
    if (st != MT_OK) return mt_cmd_fail_rank("mtrain", &ps, st);
    if (ps.logger) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        printf("%s%smtrain: finished %lld iterations: %.1f ms/iteration, %.0f tokens/s, %.2f GFLOP/s achieved, "
               "final lm loss %.4f, peak memory %.1f MiB\n",
               ps.size > 1 ? ps.prefix : "", ps.size > 1 ? " " : "", (long long)rep.iters_done, rep.mean_ms_per_iter,
               rep.tokens_per_s,
               rep.mean_ms_per_iter > 0 ? rep.flops_per_iter / (rep.mean_ms_per_iter * 1e-3) / 1e9 : 0.0,
               rep.last_loss, ru.ru_maxrss / 1024.0);
    }
    if (rep.stop_reason == MT_STOP_SIGNAL && rep.stop_signal == SIGTERM && rep.saved_iteration &&
        getenv("OMPI_COMM_WORLD_SIZE")) {
        /* The save is published (it is collective). A SIGTERM from mpirun is its abort: it may no
         * longer serve the finalize fence, and SIGKILLs the ranks soon; a SIGTERM to one rank is
         * not, and mpirun reports a rank that skips the finalize as "exiting improperly" (exit 1).
         * So finalize, but leave with 0 after a second if the fence does not return. */
        pthread_t th;
        if (pthread_create(&th, NULL, finalize_watchdog, NULL) == 0) {
            pthread_detach(th);
        } else {
            mt_pstate_free_without_finalize(&ps);
            fflush(stdout);
            fflush(stderr);
            _exit(0);
        }
    }
    mt_pstate_free(&ps);
    /* a stop signal with nowhere to save: report it as the signal it was (128 + N, as a shell does) */
    if (rep.stop_reason == MT_STOP_SIGNAL && !rep.saved_iteration) return 128 + rep.stop_signal;
    if (rep.stop_reason == MT_STOP_RERUN) return rep.exit_code; /* Megatron's 16 or 17 (train/rerun.h) */
    return 0;
}

static int cmd_check(int argc, char **argv) {
    static mt_recipe r;
    int world = 0;
    int rc = load_recipe(argc, argv, &r, &world);
    if (rc) return rc < 0 ? 0 : rc;
    if (world <= 0) world = recipe_world(&r); /* without --world-size: the recipe's own layout */
    mt_status st = mt_recipe_validate(&r, world);
    if (st != MT_OK) return fail(st);
    char support_note[512]; /* what training would refuse, check refuses too */
    st = mt_train_check_supported(&r, support_note, sizeof support_note);
    if (st != MT_OK) return fail(st);
    print_notes(&r);
    if (support_note[0]) fprintf(stderr, "mtrain: %s\n", support_note);
    mt_recipe_write_yaml(stdout, &r);
    return 0;
}

/* Training on the CPU backend: when OpenBLAS picked weaker GEMM kernels than the CPU supports,
 * set OPENBLAS_CORETYPE and start again (the kernel is chosen when the library loads). Runs
 * before any bootstrap, so PMIx / env:// see the same process. MT_NO_REEXEC=1 turns it off.
 * `plan --probe` too, so that it times the kernels the runs it predicts will use (where OpenBLAS
 * under-detects the CPU the probe would time the weaker ones: on the project's AVX-512 EPYC the
 * 1-thread GEMMs ran at ~100 GFLOP/s with the Haswell kernels, ~195 with the SkylakeX ones). */
static void maybe_reexec_for_blas(char **argv) {
    const char *core = mt_cpu_blas_better_coretype();
    if (!core || getenv("MT_NO_REEXEC")) return;
    setenv("OPENBLAS_CORETYPE", core, 1);
    execv("/proc/self/exe", argv);
    /* exec failed: carry on with the kernels we have */
}

static int has_probe_flag(int argc, char **argv) {
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--probe")) return 1;
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && (!strcmp(argv[1], "train") || !strcmp(argv[1], "launch") || argv[1][0] == '-') &&
        strcmp(argv[1], "--help") && strcmp(argv[1], "-h") && strcmp(argv[1], "--version"))
        maybe_reexec_for_blas(argv);
    else if (argc >= 3 && !strcmp(argv[1], "plan") && has_probe_flag(argc, argv))
        maybe_reexec_for_blas(argv);
    /* a training run's log is read live through pipes (mpirun, srun, mtrain launch, tee): line
     * buffering, so that no line (a stop's "checkpoint saved" above all) waits in a buffer that a
     * launcher's SIGKILL during teardown would throw away */
    if (argc >= 2 && (!strcmp(argv[1], "train") || !strcmp(argv[1], "launch") || argv[1][0] == '-'))
        setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h") || !strcmp(sub, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(sub, "--version") || !strcmp(sub, "version")) {
        printf("mtrain %s\n", MT_VERSION);
        return 0;
    }
    static const struct {
        const char *name;
        int (*run)(int argc, char **argv);
    } commands[] = {
        {"train", cmd_train},         {"check", cmd_check},           {"preprocess", mt_cmd_preprocess},
        {"plan", mt_cmd_plan},        {"tokenize", mt_cmd_tokenize},  {"launch", mt_cmd_launch},
        {"checkpoint", mt_cmd_checkpoint}, {"export", mt_cmd_export}, {"import", mt_cmd_import},
        {"logprobs", mt_cmd_logprobs}, {"generate", mt_cmd_generate},
        {"bootstrap-check", mt_cmd_bootstrap_check},
    };
    for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++)
        if (!strcmp(sub, commands[k].name)) return commands[k].run(argc - 2, argv + 2);
    if (!strcmp(sub, "recipe-reference")) {
        if (argc > 2 && !strcmp(argv[2], "--megatron")) mt_recipe_print_megatron_flags(stdout);
        else mt_recipe_print_reference(stdout);
        return 0;
    }
    if (sub[0] == '-') return cmd_train(argc - 1, argv + 1);
    /* torchrun ... pretrain_gpt.py ARGS as mtrain launch ... pretrain_gpt.py ARGS: the script's name
     * stands for training (Megatron's other scripts train models mtrain does not have) */
    const char *base = strrchr(sub, '/') ? strrchr(sub, '/') + 1 : sub;
    if (!strcmp(base, "pretrain_gpt.py")) return cmd_train(argc - 2, argv + 2);
    const size_t n_sub = strlen(sub);
    if (n_sub > 3 && !strcmp(sub + n_sub - 3, ".py")) {
        fprintf(stderr, "mtrain: error: '%s': of Megatron-LM's scripts mtrain runs pretrain_gpt.py (GPT / Llama "
                "pretraining) only; its arguments follow the script name, or give them to `mtrain train`\n", sub);
        return 2;
    }
    fprintf(stderr, "mtrain: error: unknown command '%s'; commands: train, check, preprocess, plan, tokenize, launch, checkpoint, export, import, logprobs, generate, bootstrap-check, recipe-reference\n", sub);
    return 2;
}
