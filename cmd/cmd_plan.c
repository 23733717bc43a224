/* cmd_plan.c — `mtrain plan --config R [--gpus N] [--gpu NAME] [--mfu X] [--tflops X]
 * [--step-ms X] [--search] [--json] [--timeline ...] [--compare M] [--set k=v ...] [Megatron
 * flags]`: loads the recipe the way training does, checks the layout for N GPUs
 * (mt_recipe_validate + mt_plan_check) and prints the plan (plan/plan.h) as a table or JSON,
 * or the views of plan/plan_views.c (the schedule timeline, the comparison with a run). Only the
 * command line is handled here: the planner is plan/.
 * Rule kept: no exit here; returns the exit code (0 fits, 1 error / inconsistent layout,
 * 2 bad usage, 3 does not fit) to cmd/mtrain.c. */
#include "cmd/recipe_args.h"
#include "cmd/cmd_plan.h"
#include "cmd/cmd_plan_views.h"
#include "plan/plan_probe.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"
#include "core/recipe/recipe.h"

static void plan_usage(FILE *f) {
    fprintf(f,
            "usage: mtrain plan --config RECIPE [--gpus N] [--gpu NAME] [--mfu X] [--tflops X] [--step-ms X]\n"
            "                   [--search] [--json] [--timeline] [--timeline-svg FILE] [--compare METRICS.jsonl]\n"
            "                   [--set key=value ...] [Megatron-style flags]\n"
            "  --gpus N       number of GPUs (world size); default tp*pp*cp*dp of the recipe\n"
            "  --gpu NAME     %s (default: h100-80g for bf16 recipes,\n"
            "                 this machine's memory for fp32 / CPU recipes)\n"
            "                 or --device FILE (alias --gpu FILE): a profile written by --probe\n"
            "  --probe [FILE] measure this machine (CPU backend GEMMs, memory bandwidth, 2-rank allreduce)\n"
            "                 and write the profile to FILE (default device-profile.json); with --config, plan with it\n"
            "  --mfu X        model FLOPs utilisation for time and days (default 0.40)\n"
            "  --tflops X     achieved TFLOP/s per GPU, Megatron's accounting (counts recomputation)\n"
            "  --step-ms X    a measured step time: the MFU and days it implies\n"
            "  --search       rank every valid layout that fits on N GPUs (top ten, with reasons)\n"
            "  --json         one JSON object instead of the table\n"
            "  --gemm-eff X, --link-eff X, --usable X   cost-model assumptions (matmuls by shape unless --gemm-eff X\n"
            "                 fixes their efficiency; links 0.80; usable memory 0.90)\n"
            "  --activations mtrain|megatron   bf16 activation memory: the buffers mtrain's CUDA trainer allocates\n"
            "                 (default), or Megatron-LM's (Korthikanti et al. 2022: dropout masks, softmax scores)\n"
            "  --fp8 (--fp8-format F)   the layers' linear GEMMs in fp8 at the device's fp8 peak (H100, H200);\n"
            "                 MFU stays against the bf16 peak\n"
            "  --fp8-recipe delayed|tensorwise   Megatron's scaling recipe (implies --fp8): delayed (default), or\n"
            "                 tensorwise current scaling, which reads every cast input once more for its amax\n"
            "  --tp-comm-overlap   the tensor-parallel collectives overlapped with their GEMMs (Transformer Engine,\n"
            "                 needs sequence parallelism); the recipe's parallel.overlap_grad_reduce /\n"
            "                 overlap_param_gather (--overlap-grad-reduce / --overlap-param-gather) overlap the dp terms\n"
            "  --overlap-p2p-communication   pipeline transfers behind each model chunk's compute (interleaved\n"
            "                 schedule; Megatron's default there, mtrain's trainer does not)\n"
            "  --grad-reduce-in-bf16   gradients kept and reduced in bf16 (Megatron's flag; NeMo's and MLPerf's\n"
            "                 recipes): half the gradient buffer and the dp reduce-scatter's bytes; mtrain's trainer\n"
            "                 reduces in fp32\n",
            mt_gpu_names());
    fputs(mt_plan_views_usage, f); /* --timeline, --timeline-svg, --compare (cmd/cmd_plan_views.c) */
    fputs("exit status: 0 fits, 1 error or inconsistent layout, 2 bad usage, 3 does not fit.\n"
          "The cost model and its sources: docs/plan.md\n", f);
}

/* A number in (lo, hi]; 0 and a message on stderr when malformed. */
static int parse_num(const char *flag, const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : NAN;
    if (!s || end == s || *end || errno || !isfinite(v) || v <= lo || v > hi) {
        fprintf(stderr, "mtrain plan: error: %s %s: expected a number above %g and at most %g\n", flag, s ? s : "(missing)",
                lo, hi);
        return 0;
    }
    *out = v;
    return 1;
}

static void print_problems(const char *config, int n_gpus, int json, const char *msg) {
    if (json) {
        mt_plan_print_problems_json(stdout, config, n_gpus, msg);
        return;
    }
    fprintf(stderr, "mtrain plan: %s: the layout is inconsistent on %d GPUs:\n", config, n_gpus);
    const char *s = msg;
    while (*s) {
        const char *e = strchr(s, '\n');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        fprintf(stderr, "  - %.*s\n", (int)n, s);
        s = e ? e + 1 : s + n;
    }
}

/* Appends the lines of `more` not already in msg. */
static void append_lines(char *msg, size_t n_bytes, char *more) {
    for (char *line = more, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        if (strstr(msg, line)) continue;
        size_t used = strlen(msg), n_line = strlen(line);
        if (used + 1 + n_line + 1 > n_bytes) break;
        msg[used] = '\n';
        memcpy(msg + used + 1, line, n_line + 1);
    }
}

/* A world-size mismatch stops mt_recipe_validate before its other layout checks: plan's own
 * checks for n_gpus, and validating a copy for the recipe's own world (tp*pp*cp*dp, dp 1 when
 * auto), find the rest. */
static void add_more_problems(const mt_recipe *validated, mt_recipe *fresh, int n_gpus, const mt_gpu_spec *gpu,
                              char *msg, size_t n_bytes) {
    char more[8192];
    if (mt_plan_check(validated, n_gpus, gpu) != MT_OK) {
        snprintf(more, sizeof more, "%s", mt_last_error());
        append_lines(msg, n_bytes, more);
    }
    const long dp = fresh->parallel.data > 0 ? fresh->parallel.data : 1;
    const long world = (long)fresh->parallel.tensor * fresh->parallel.pipeline * fresh->parallel.context * dp;
    if (world < 1 || world > (1L << 24)) return;
    if (mt_recipe_validate(fresh, (int)world) != MT_OK) {
        snprintf(more, sizeof more, "%s", mt_last_error());
        append_lines(msg, n_bytes, more);
    }
    if (mt_plan_check(fresh, (int)world, gpu) != MT_OK) {
        snprintf(more, sizeof more, "%s", mt_last_error());
        append_lines(msg, n_bytes, more);
    }
}

/* What the command line asked for. */
typedef struct {
    const char *config, *gpu_name, *probe_path;
    int probe, n_gpus, search, json;
    mt_plan_opts o;
    mt_plan_views views; /* --timeline, --timeline-svg, --compare */
} plan_args;

/* The working set of one `mtrain plan` (large: on the heap). */
typedef struct {
    mt_recipe r, r2;
    mt_plan p;
    mt_plan_search_result sr;
    mt_gpu_spec host, profile;
    char msg[8192];
} plan_work;

/* Takes plan's own flags out of argv (the rest, the recipe's, stay in argv[0 .. *argc)). Returns -1
 * to go on, else the exit code (0 after --help, 2 bad usage). */
static int parse_args(int *argc, char **argv, plan_args *pa) {
    int n = 0;
    mt_plan_opts *o = &pa->o;
    for (int i = 0; i < *argc; i++) {
        const char *a = argv[i], *v = i + 1 < *argc ? argv[i + 1] : NULL;
        double x;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            plan_usage(stdout);
            return 0;
        } else if ((!strcmp(a, "--config") || !strcmp(a, "-c")) && v) {
            pa->config = argv[++i];
        } else if (!strncmp(a, "--config=", 9)) {
            pa->config = a + 9;
        } else if (!strcmp(a, "--gpus") || !strcmp(a, "--world-size")) {
            if (!parse_num(a, v, 0, 1 << 24, &x)) return 2;
            if (x != floor(x)) {
                fprintf(stderr, "mtrain plan: error: %s %s: needs a whole number of GPUs\n", a, v);
                return 2;
            }
            pa->n_gpus = (int)x;
            i++;
        } else if ((!strcmp(a, "--gpu") || !strcmp(a, "--device")) && v) {
            pa->gpu_name = argv[++i];
        } else if (!strcmp(a, "--probe")) { /* --probe [FILE]: measure this machine (plan/plan_probe.c) */
            pa->probe = 1;
            if (v && v[0] != '-') pa->probe_path = argv[++i];
        } else if (!strcmp(a, "--mfu")) {
            if (!parse_num(a, v, 0, 1, &o->mfu)) return 2;
            i++;
        } else if (!strcmp(a, "--tflops")) {
            if (!parse_num(a, v, 0, 1e6, &o->tflops)) return 2;
            i++;
        } else if (!strcmp(a, "--step-ms")) {
            if (!parse_num(a, v, 0, 1e12, &o->step_ms)) return 2;
            i++;
        } else if (!strcmp(a, "--gemm-eff")) {
            if (!parse_num(a, v, 0, 1, &o->gemm_eff)) return 2;
            i++;
        } else if (!strcmp(a, "--link-eff")) {
            if (!parse_num(a, v, 0, 1, &o->link_eff)) return 2;
            i++;
        } else if (!strcmp(a, "--activations")) {
            if (!v || (strcmp(v, "mtrain") && strcmp(v, "megatron"))) {
                fprintf(stderr, "mtrain plan: error: --activations %s: expected mtrain or megatron\n", v ? v : "(missing)");
                return 2;
            }
            o->megatron_activations = !strcmp(v, "megatron");
            i++;
        } else if (!strcmp(a, "--usable")) {
            if (!parse_num(a, v, 0, 1, &o->usable_frac)) return 2;
            i++;
        } else if ((x = mt_plan_views_arg(&pa->views, *argc, argv, &i)) != 0) {
            if (x < 0) return 2;
        } else if (!strcmp(a, "--fp8") || !strcmp(a, "--fp8-format")) { /* Megatron's: --fp8-format hybrid|e4m3 */
            o->fp8 = 1;
            if (!strcmp(a, "--fp8-format") && v && v[0] != '-') i++;
        } else if (!strcmp(a, "--fp8-recipe")) { /* Megatron's: tensorwise | delayed | mxfp8 | blockwise */
            if (!v || (strcmp(v, "delayed") && strcmp(v, "tensorwise"))) {
                fprintf(stderr, "mtrain plan: --fp8-recipe %s: the plan models 'delayed' (Megatron's default) and "
                        "'tensorwise' (current scaling); mxfp8 and blockwise scaling are not modelled\n", v ? v : "(missing)");
                return 2;
            }
            o->fp8 = 1;
            o->fp8_recipe = strcmp(v, "tensorwise") ? MT_FP8_DELAYED : MT_FP8_TENSORWISE;
            i++;
        } else if (!strcmp(a, "--overlap-p2p-communication")) {
            o->p2p_overlap = 1;
        } else if (!strcmp(a, "--tp-comm-overlap")) {
            o->tp_comm_overlap = 1;
        } else if (!strcmp(a, "--grad-reduce-in-bf16")) { /* Megatron's: the gradient buffer and its reduction in bf16 */
            o->grad_reduce_bytes = 2;
        } else if (!strcmp(a, "--search")) {
            pa->search = 1;
        } else if (!strcmp(a, "--json")) {
            pa->json = 1;
        } else {
            argv[n++] = argv[i];
        }
    }
    *argc = n;
    return -1;
}

/* --probe without a recipe: writes the profile and says what it measured. The exit code. */
static int probe_only(const plan_args *pa, mt_gpu_spec *profile) {
    const char *path = pa->probe_path ? pa->probe_path : "device-profile.json";
    if (mt_plan_probe(path, profile) != MT_OK) {
        fprintf(stderr, "mtrain plan: error: %s\n", mt_last_error());
        return 1;
    }
    const mt_device_probe *q = &profile->probe;
    printf("device profile written to %s: GEMM %.1f..%.1f GFLOP/s (%d threads), stream %.1f GB/s, op %.1f us, "
           "attention %.2f GFLOP/s, allreduce 2 ranks alpha %.1f us, %.2f GB/s\n", path, q->gemm_flops_nt[0] / 1e9,
           q->gemm_flops_nt[q->n_gemm - 1] / 1e9, q->threads, q->stream_gbs_nt, 1e6 * q->op_overhead_s,
           q->attn_flops_nt / 1e9, 1e6 * q->comm_alpha_s, q->comm_gbs);
    return 0;
}

/* The device: measured now (--probe), a profile file, a table entry, this host for CPU / fp32
 * recipes, else h100-80g. Returns -1 with *gpu set, else the exit code. */
static int pick_device(const plan_args *pa, plan_work *w, const mt_gpu_spec **gpu) {
    const char *name = pa->gpu_name;
    const mt_recipe *r = &w->r;
    if (pa->probe) { /* measured now, used at once */
        if (mt_plan_probe(pa->probe_path, &w->profile) != MT_OK) {
            fprintf(stderr, "mtrain plan: error: %s\n", mt_last_error());
            return 1;
        }
        *gpu = &w->profile;
    } else if (name && (strchr(name, '/') || strstr(name, ".json"))) { /* a profile file */
        if (mt_device_profile_load(name, &w->profile) != MT_OK) {
            fprintf(stderr, "mtrain plan: error: --device %s: %s\n", name, mt_last_error());
            return 2;
        }
        *gpu = &w->profile;
    } else if (name) {
        *gpu = mt_gpu_find(name);
        if (!*gpu) {
            fprintf(stderr, "mtrain plan: error: --gpu %s: unknown device; use one of %s\n", name, mt_gpu_names());
            return 2;
        }
    } else if (r->training.backend == MT_BACKEND_CPU ||
               (r->training.backend == MT_BACKEND_AUTO && r->training.precision == MT_PREC_FP32)) {
        mt_gpu_host(&w->host, r->logging.peak_tflops);
        *gpu = &w->host;
    } else {
        *gpu = mt_gpu_find("h100-80g");
        if (!pa->json)
            fprintf(stderr, "mtrain plan: no --gpu given: assuming h100-80g (choose with --gpu %s)\n", mt_gpu_names());
    }
    return -1;
}

/* The world size: --gpus, the --compare run's, or tp*pp*cp*dp of the recipe. 0 (message printed)
 * when parallel.data is auto and nothing says it. */
static int world_size(plan_args *pa, const mt_recipe *r) {
    int n_gpus = pa->n_gpus;
    if (n_gpus == 0 && r->parallel.data == 0) n_gpus = mt_plan_views_world(&pa->views); /* the --compare run's */
    if (n_gpus == 0) {
        if (r->parallel.data == 0) {
            const int mr = r->parallel.tensor * r->parallel.pipeline * r->parallel.context;
            fprintf(stderr, "mtrain plan: error: parallel.data is auto (world / (tp*pp*cp)), so the number of GPUs is "
                    "not known; pass --gpus N (a multiple of tp*pp*cp = %d; --gpus %d for dp 1)\n", mr, mr);
            return 0;
        }
        n_gpus = r->parallel.tensor * r->parallel.pipeline * r->parallel.context * r->parallel.data;
    }
    return n_gpus;
}

/* The plan of the recipe's layout, or its views, or the problems that stop it. The exit code. */
static int plan_layout(const plan_args *pa, plan_work *w, const mt_gpu_spec *gpu, int n_gpus) {
    mt_recipe *r = &w->r;
    w->r2 = *r; /* before validation: a second look at the layout for its own world size */
    mt_status st = mt_recipe_validate(r, n_gpus);
    if (st == MT_OK) st = mt_plan_check(r, n_gpus, gpu);
    if (st != MT_OK) {
        snprintf(w->msg, sizeof w->msg, "%s", mt_last_error());
        add_more_problems(r, &w->r2, n_gpus, gpu, w->msg, sizeof w->msg);
        print_problems(pa->config, n_gpus, pa->json, w->msg);
        return 1;
    }
    st = mt_plan_compute(r, n_gpus, gpu, &pa->o, &w->p);
    if (st != MT_OK) {
        fprintf(stderr, "mtrain plan: error: %s\n", mt_last_error());
        return 1;
    }
    if (mt_plan_views_any(&pa->views)) return mt_plan_views_run(&pa->views, pa->config, r, &w->p, pa->json);
    if (pa->json) mt_plan_print_json(stdout, pa->config, &w->p, &pa->o);
    else mt_plan_print(stdout, pa->config, &w->p, &pa->o);
    return w->p.capacity_bytes > 0 && !w->p.fits ? 3 : 0;
}

/* --search: the ranked layouts. The exit code (3 when none fits). */
static int plan_search(const plan_args *pa, plan_work *w, const mt_gpu_spec *gpu, int n_gpus) {
    if (mt_plan_search(&w->r, n_gpus, gpu, &pa->o, &w->sr) != MT_OK) {
        fprintf(stderr, "mtrain plan: error: %s\n", mt_last_error());
        return 1;
    }
    if (pa->json) mt_plan_search_print_json(stdout, pa->config, &w->sr, &pa->o);
    else mt_plan_search_print(stdout, pa->config, &w->sr, &pa->o);
    return w->sr.n_top > 0 ? 0 : 3;
}

static int run(int argc, char **argv, plan_args *pa, plan_work *w) {
    int rc = parse_args(&argc, argv, pa);
    if (rc >= 0) return rc;
    if (pa->probe && !pa->config) return probe_only(pa, &w->profile);
    if (!pa->config) {
        fprintf(stderr, "mtrain plan: error: no recipe given; pass --config configs/gpt175b.yaml (see configs/)\n");
        plan_usage(stderr);
        return 2;
    }
    rc = mt_cmd_load_recipe("mtrain plan", pa->config, &argc, argv, &w->r);
    if (rc) return rc;
    const mt_gpu_spec *gpu = NULL;
    rc = pick_device(pa, w, &gpu);
    if (rc >= 0) return rc;
    const int n_gpus = world_size(pa, &w->r);
    if (n_gpus == 0) return 2;
    return pa->search ? plan_search(pa, w, gpu, n_gpus) : plan_layout(pa, w, gpu, n_gpus);
}

int mt_cmd_plan(int argc, char **argv) {
    plan_args pa = { 0 };
    mt_plan_opts_defaults(&pa.o);
    if (argc > 0 && !strcmp(argv[0], "plan")) argc--, argv++;
    plan_work *w = calloc(1, sizeof *w);
    if (!w) {
        fprintf(stderr, "mtrain plan: error: out of memory (%zu bytes)\n", sizeof *w);
        return 1;
    }
    const int rc = run(argc, argv, &pa, w);
    free(w);
    return rc;
}
