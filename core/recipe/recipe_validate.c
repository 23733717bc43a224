/* recipe_validate.c — mt_recipe_validate: ranges, auto values (parallel.data, global_batch,
 * iters/tokens, kv_heads, ffn_hidden, vocab, max_position, decay_iters), per-arch defaults
 * of unset keys, and the layout checks (world = tp*pp*cp*dp, heads % tp, layers % (pp*vpp), ...).
 * Rules: runs before anything is allocated; every problem is reported as
 * "<where>: <key>: <problem>; <fix>" (several at once, one per line); derived values are
 * marked mt_recipe_derived so validating again (another world size) derives them again. */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/recipe/recipe_internal.h"

#define MAX_PROBLEMS 8

typedef struct {
    const mt_recipe *r;
    char msg[4000];
    size_t used;
    int n;
    mt_status st;
} problems;

static int kid(const char *name) { return mt_recipe_key_index(name); }

/* Ring of buffers so one message can name several origins. */
static const char *where(const mt_recipe *r, const char *key) {
    static _Thread_local char ring[6][1300];
    static _Thread_local int next;
    char *buf = ring[next];
    next = (next + 1) % 6;
    int k = kid(key);
    if (k < 0) { snprintf(buf, sizeof ring[0], "%s", r->origin.file[0] ? r->origin.file : "recipe"); return buf; }
    return mt_recipe_where_id(r, k, buf, sizeof ring[0]);
}

/* Where a key mentioned inside a message came from: "line 9" when from the recipe file
 * (the message already names the file), else the flag, "default" or "derived". */
static const char *ref(const mt_recipe *r, const char *key) {
    static _Thread_local char ring[6][1300];
    static _Thread_local int next;
    int k = kid(key);
    if (k < 0 || r->origin.line[k] <= 0) {
        if (k >= 0 && r->origin.flag[k] == NULL) return "default";
        if (k >= 0 && r->origin.flag[k] == mt_recipe_derived) return "derived";
        return where(r, key);
    }
    char *buf = ring[next];
    next = (next + 1) % 6;
    snprintf(buf, sizeof ring[0], "line %d", r->origin.line[k]);
    return buf;
}

__attribute__((format(printf, 3, 4))) static void add(problems *P, const char *key, const char *fmt, ...) {
    P->st = MT_ERR_CONFIG;
    if (P->n >= MAX_PROBLEMS || P->used + 2 >= sizeof P->msg) { P->n++; return; }
    int w = snprintf(P->msg + P->used, sizeof P->msg - P->used, "%s%s: %s: ", P->n ? "\n" : "",
                     where(P->r, key), key);
    if (w > 0) P->used += (size_t)w;
    if (P->used >= sizeof P->msg) P->used = sizeof P->msg - 1;
    va_list ap;
    va_start(ap, fmt);
    w = vsnprintf(P->msg + P->used, sizeof P->msg - P->used, fmt, ap);
    va_end(ap);
    if (w > 0) P->used += (size_t)w;
    if (P->used >= sizeof P->msg) P->used = sizeof P->msg - 1;
    P->n++;
}

/* A problem whose message another module formatted ("<where>: <key>: <problem>; <fix>"). */
static void add_line(problems *P, const char *line) {
    P->st = MT_ERR_CONFIG;
    if (P->n >= MAX_PROBLEMS || P->used + 2 >= sizeof P->msg) { P->n++; return; }
    int w = snprintf(P->msg + P->used, sizeof P->msg - P->used, "%s%s", P->n ? "\n" : "", line);
    if (w > 0) P->used += (size_t)w;
    if (P->used >= sizeof P->msg) P->used = sizeof P->msg - 1;
    P->n++;
}

static mt_status finish(problems *P) {
    if (P->st == MT_OK) return MT_OK;
    if (P->n > MAX_PROBLEMS)
        return mt_errorf(P->st, "%s\n(%d more problems not shown)", P->msg, P->n - MAX_PROBLEMS);
    return mt_errorf(P->st, "%s", P->msg);
}

/* "1, 2, 4, 8" — the first divisors of n (searched up to 65536, so a huge n stays cheap),
 * for "use a tp that divides ..." fixes. */
static const char *divisors(int64_t n, char *buf, size_t n_bytes) {
    size_t used = 0;
    int shown = 0;
    buf[0] = 0;
    for (int64_t d = 1; d <= n && d <= 65536 && shown < 12 && used + 24 < n_bytes; d++)
        if (n % d == 0) {
            used += (size_t)snprintf(buf + used, n_bytes - used, "%s%" PRId64, shown ? ", " : "", d);
            shown++;
        }
    return buf;
}

static void mark_derived(mt_recipe *r, const char *key) {
    int k = kid(key);
    r->origin.line[k] = 0;
    r->origin.flag[k] = mt_recipe_derived;
}


/* Blend "w1 p1 w2 p2" or a single prefix; returns 0 and a problem text when malformed. */
static int blend_ok(const char *s, char *problem, size_t n_bytes) {
    char buf[MT_BLEND_MAX], *save = NULL;
    snprintf(buf, sizeof buf, "%s", s);
    int n = 0, bad_weight = 0, any_number = 0;
    double sum = 0;
    for (char *t = strtok_r(buf, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save), n++) {
        char *end;
        double w = strtod(t, &end);
        if (end != t && *end == 0) any_number = 1;
        if (n % 2) continue;
        if (*end || !isfinite(w) || w < 0) bad_weight = 1;
        else sum += w;
    }
    if (n <= 1 || !any_number) return 1; /* one prefix, or prefixes weighted by their sizes */
    if (n % 2 || bad_weight || !(sum > 0)) {
        snprintf(problem, n_bytes, "a blend must be weight/path pairs with non-negative weights "
                 "summing to more than 0; write \"0.3 prefixA 0.7 prefixB\"");
        return 0;
    }
    return 1;
}

static int split_ok(const char *s) {
    char buf[64], *save = NULL;
    snprintf(buf, sizeof buf, "%s", s);
    int n = 0;
    double sum = 0;
    for (char *t = strtok_r(buf, ",/", &save); t; t = strtok_r(NULL, ",/", &save), n++) {
        char *end;
        while (*t == ' ') t++;
        double v = strtod(t, &end);
        while (*end == ' ') end++;
        if (end == t || *end || !isfinite(v) || v < 0) return 0;
        sum += v;
    }
    return n >= 1 && n <= 3 && sum > 0;
}

/* Phase 1: every key's value is a legal value of its type and range. */
static void check_ranges(const mt_recipe *r, problems *P) {
    char val[64], lo[32], hi[32];
    for (int k = 0; k < mt_recipe_n_keys; k++) {
        const mt_recipe_key *key = &mt_recipe_keys[k];
        const void *p = (const char *)r + key->offset;
        if (key->type == MT_KEY_STRING) {
            if (!memchr(p, 0, key->n_bytes)) add(P, key->name, "value is not terminated; set it with mt_recipe_set");
            continue;
        }
        if (key->type == MT_KEY_UINT64) continue;
        double v = mt_recipe_numeric(r, k);
        if (key->type == MT_KEY_ENUM || key->type == MT_KEY_BOOL) {
            int n = 0;
            if (key->type == MT_KEY_BOOL) n = 2;
            else while (key->enum_names[n]) n++;
            if (v < 0 || v >= n) add(P, key->name, "invalid value %.0f; set it with mt_recipe_set", v);
            continue;
        }
        if ((key->flags & MT_KF_REQUIRED) && v == 0) {
            const char *flag = NULL; /* its Megatron flag, for a run from flags alone */
            for (int a = 0; a < mt_recipe_n_aliases && !flag; a++)
                if (!strcmp(mt_recipe_aliases[a].key, key->name) && !mt_recipe_aliases[a].fixed)
                    flag = mt_recipe_aliases[a].flag;
            char how[160];
            if (flag) snprintf(how, sizeof how, "%s N", flag);
            else snprintf(how, sizeof how, "--set %s=N", key->name);
            add(P, key->name, "not set; add `%s: N` under `%.*s:` in the recipe, or pass %s",
                strrchr(key->name, '.') + 1, (int)(strchr(key->name, '.') - key->name), key->name, how);
            continue;
        }
        int integral = key->type != MT_KEY_FLOAT;
        int below = (key->flags & MT_KF_MIN_EXCL) ? !(v > key->min) : !(v >= key->min);
        int above = (key->flags & MT_KF_MAX_EXCL) ? !(v < key->max) : !(v <= key->max);
        if (below || above || !isfinite(v)) {
            mt_recipe_format_value(r, k, val, sizeof val);
            snprintf(lo, sizeof lo, integral ? "%.0f" : "%g", key->min);
            snprintf(hi, sizeof hi, integral ? "%.0f" : "%g", key->max);
            add(P, key->name, "out of range: %s; use a value from %s to %s", val, lo, hi);
        }
    }
}

/* Undo what the previous validate derived, so it is derived again from the current values. */
static void reset_derived(mt_recipe *r) {
    char err[256];
    for (int k = 0; k < mt_recipe_n_keys; k++)
        if (r->origin.flag[k] == mt_recipe_derived) {
            (void)mt_recipe_parse_value(r, k, mt_recipe_keys[k].def, err, sizeof err);
            r->origin.flag[k] = NULL;
        }
}

/* model.arch decides norm/activation/position/tie_embeddings/bias unless the recipe set them. */
static void resolve_arch(mt_recipe *r) {
    static const char *const llama[][2] = { { "model.norm", "rmsnorm" }, { "model.activation", "swiglu" },
                                            { "model.position", "rope" }, { "model.tie_embeddings", "false" },
                                            { "model.bias", "false" } };
    char err[256], cur[64], def[64];
    for (size_t i = 0; i < sizeof llama / sizeof llama[0]; i++) {
        int k = kid(llama[i][0]);
        if (mt_recipe_key_is_set(r, k)) continue;
        /* a value assigned in C without an origin stays, unless it is the table default */
        mt_recipe_format_value(r, k, cur, sizeof cur);
        snprintf(def, sizeof def, "%s", mt_recipe_keys[k].def);
        if (strcmp(cur, def) != 0) continue;
        const char *v = r->model.arch == MT_ARCH_LLAMA ? llama[i][1] : mt_recipe_keys[k].def;
        (void)mt_recipe_parse_value(r, k, v, err, sizeof err);
        mark_derived(r, llama[i][0]);
    }
}

/* The model's auto sizes: vocabulary from the tokenizer, kv heads, MLP width, position rows. */
static void resolve_model(mt_recipe *r, problems *P) {
    mt_model_cfg *m = &r->model;
    if (m->vocab == 0) {
        if (r->data.tokenizer == MT_TOK_BYTE) m->vocab = 257;
        else if (r->data.tokenizer == MT_TOK_GPT2BPE) m->vocab = 50257;
        else if (r->data.tokenizer == MT_TOK_NULL)
            add(P, "model.vocab", "not set: the null tokenizer (pre-tokenized ids) needs the vocabulary size; set "
                "model.vocab (--vocab-size)");
        else add(P, "model.vocab", "not set, and the size of an hf tokenizer (or a SentencePiece model) is not known here; set "
                 "model.vocab (e.g. 128256 for Llama 3)");
        if (m->vocab) mark_derived(r, "model.vocab");
    }
    if (m->kv_heads == 0) { m->kv_heads = m->heads; mark_derived(r, "model.kv_heads"); }
    if (m->ffn_hidden == 0) {
        if (m->arch == MT_ARCH_LLAMA) {
            int64_t f = ((int64_t)8 * m->hidden / 3 + 7) / 8 * 8;
            add(P, "model.ffn_hidden", "not set; llama's SwiGLU width must be given: set model.ffn_hidden "
                "(about 8/3*hidden = %" PRId64 ", rounded to a multiple of 8)", f);
        } else {
            m->ffn_hidden = 4 * m->hidden;
            mark_derived(r, "model.ffn_hidden");
        }
    }
    if (m->max_position == 0) { m->max_position = m->seq_length; mark_derived(r, "model.max_position"); }
}

/* parallel.data (auto: what tp*pp*cp leaves of the world); 1 when the layout cannot fit the world. */
static int resolve_data_parallel(mt_recipe *r, int world_size, problems *P) {
    mt_parallel_cfg *pc = &r->parallel;
    if (world_size < 1) {
        add(P, "parallel.data", "world size %d; it must be at least 1 (one rank per process)", world_size);
        return 1;
    }
    int64_t tp = pc->tensor, pp = pc->pipeline, cp = pc->context, model_ranks = tp * pp * cp;
    if (pc->data == 0) {
        if (world_size % model_ranks) {
            add(P, "parallel.data", "auto needs the world size (%d ranks) to be a multiple of tp*pp*cp = "
                "%" PRId64 "*%" PRId64 "*%" PRId64 " = %" PRId64 " (parallel.tensor: %s, parallel.pipeline: "
                "%s, parallel.context: %s); run on a multiple of %" PRId64 " ranks or change the layout",
                world_size, tp, pp, cp, model_ranks, ref(r, "parallel.tensor"), ref(r, "parallel.pipeline"),
                ref(r, "parallel.context"), model_ranks);
            return 1;
        }
        if (world_size / model_ranks > (1 << 20)) {
            add(P, "parallel.data", "auto gives dp = %" PRId64 ", more than the 1048576 supported; check the "
                "world size", world_size / model_ranks);
            return 1;
        }
        pc->data = (int)(world_size / model_ranks);
        mark_derived(r, "parallel.data");
    } else if (model_ranks * pc->data != world_size) {
        if (world_size % model_ranks == 0)
            add(P, "parallel.data", "tp*pp*cp*dp = %" PRId64 "*%" PRId64 "*%" PRId64 "*%d = %" PRId64 " ranks but "
                "the world has %d; set parallel.data: %" PRId64 " (or auto), or run on %" PRId64 " ranks",
                tp, pp, cp, pc->data, model_ranks * pc->data, world_size, world_size / model_ranks,
                model_ranks * pc->data);
        else
            add(P, "parallel.data", "tp*pp*cp*dp = %" PRId64 "*%" PRId64 "*%" PRId64 "*%d = %" PRId64 " ranks but "
                "the world has %d, which is not a multiple of tp*pp*cp = %" PRId64 "; run on %" PRId64
                " ranks or change the layout", tp, pp, cp, pc->data, model_ranks * pc->data, world_size,
                model_ranks, model_ranks * pc->data);
        return 1;
    }
    return 0;
}

/* training.batch_schedule (Megatron's --step-batch-size-schedule): parsed into training.steps; Megatron
 * refuses it with --global-batch-size and ignores --rampup-batch-size (deprecated) at its head: both
 * refused here. The batches the run reaches from the start must divide (checked again from the
 * loaded position when resuming, where a run on more ranks may skip early entries); 1 when fatal. */
static int resolve_batch_schedule(mt_recipe *r, problems *P) {
    mt_training_cfg *t = &r->training;
    memset(&t->steps, 0, sizeof t->steps);
    if (!t->batch_schedule[0]) return 0;
    if (mt_recipe_batch_steps_parse(t->batch_schedule, r->model.seq_length, &t->steps) != MT_OK) {
        add(P, "training.batch_schedule", "%s (Megatron's --step-batch-size-schedule)", mt_last_error());
        return 1;
    }
    const int kg = kid("training.global_batch");
    if (r->origin.flag[kid("training.batch_schedule")] != NULL && mt_recipe_key_is_set(r, kg) &&
        r->origin.flag[kg] == NULL) { /* a flag's schedule replaces the file's batch, as --train-iters its length */
        t->global_batch = 0;
        r->origin.line[kg] = 0;
        r->origin.flag[kg] = mt_recipe_derived;
    }
    if (mt_recipe_key_is_set(r, kg)) {
        add(P, "training.batch_schedule", "and training.global_batch (%s) both set the global batch; give only the "
            "schedule (Megatron: cannot specify both --step-batch-size-schedule and --global-batch-size)",
            ref(r, "training.global_batch"));
        return 1;
    }
    if (t->rampup_start > 0) {
        add(P, "training.batch_schedule", "and training.rampup_start (%s) both set a batch-size ramp; give one "
            "(Megatron-LM ignores the deprecated --rampup-batch-size when a step schedule is used)",
            ref(r, "training.rampup_start"));
        return 1;
    }
    return 0;
}

/* training.global_batch (auto: micro_batch * dp), the eval batch (auto: the global batch) and the
 * ramp-up's batch sizes; 1 when fatal. */
static int resolve_batch(mt_recipe *r, problems *P) {
    mt_training_cfg *t = &r->training;
    int64_t dp = r->parallel.data, mb_dp = (int64_t)t->micro_batch * dp;
    if (resolve_batch_schedule(r, P)) return 1;
    if (t->global_batch == 0) {
        if (mb_dp > (1 << 30)) {
            add(P, "training.micro_batch", "micro_batch*dp = %" PRId64 " sequences per step is too large; "
                "lower training.micro_batch", mb_dp);
            return 1;
        }
        t->global_batch = (int)mb_dp;
        mark_derived(r, "training.global_batch");
    }
    if (t->eval_global_batch == 0) { /* Megatron: --eval-global-batch-size defaults to --global-batch-size */
        t->eval_global_batch = t->global_batch;
        mark_derived(r, "training.eval_global_batch");
    }
    if (t->eval_global_batch % mb_dp && t->eval_global_batch != t->global_batch) /* Megatron's assert (validate_args); a
                                                                * copied global batch has its own check */
        add(P, "training.eval_global_batch", "%d is not a multiple of micro_batch*dp = %d*%" PRId64 " = %" PRId64
            " (each evaluation iteration runs eval_global_batch / (micro_batch*dp) micro-batches); use a multiple "
            "of %" PRId64 " (e.g. %" PRId64 ")", t->eval_global_batch, t->micro_batch, dp, mb_dp, mb_dp,
            (t->eval_global_batch / mb_dp + 1) * mb_dp);
    if (t->rampup_start > 0) { /* Megatron's asserts on --rampup-batch-size, and the batch sizes it goes through */
        const int64_t g = t->global_batch, s0 = t->rampup_start, inc = t->rampup_increment;
        if (s0 >= g || inc <= 0 || (g - s0) % inc || t->rampup_samples <= 0)
            add(P, "training.rampup_start", "ramp-up %" PRId64 " +%" PRId64 " over %" PRId64 " samples to "
                "training.global_batch %" PRId64 ": the start must be below the global batch, the increment > 0 must "
                "divide their difference, and the samples > 0 (Megatron's --rampup-batch-size START INC SAMPLES)",
                s0, inc, t->rampup_samples, g);
        else if (s0 % mb_dp || inc % mb_dp)
            add(P, "training.rampup_start", "every ramp-up batch (%" PRId64 ", +%" PRId64 ") must be a multiple of "
                "micro_batch*dp = %" PRId64 " (%s); change the ramp-up or the micro-batch", s0, inc, mb_dp,
                ref(r, "training.micro_batch"));
    }
    return 0;
}

/* Megatron's --train-samples: training.iters from the samples (through the ramp-up); 1 when fatal. */
static int resolve_samples(mt_recipe *r, problems *P) {
    mt_training_cfg *t = &r->training;
    if (t->samples > 0) { /* iterations = samples // global batch */
        int ki = mt_recipe_key_find("training.iters"), kt = mt_recipe_key_find("training.tokens");
        const int ks = mt_recipe_key_find("training.samples");
        const int s_flag = r->origin.flag[ks] != NULL;
        for (int q = 0; q < 2 && s_flag; q++) { /* a flag replaces the file's length, as --train-iters does */
            const int k = q ? kt : ki;
            if (mt_recipe_key_is_set(r, k) && (r->origin.flag[k] == NULL || r->origin.flag[k] == mt_recipe_derived)) {
                r->origin.line[k] = 0;
                r->origin.flag[k] = mt_recipe_derived;
            }
        }
        if (mt_recipe_key_is_set(r, ki) || mt_recipe_key_is_set(r, kt)) {
            add(P, "training.samples", "%" PRId64 " (%s) and training.%s (%s) both set the length; give only one",
                t->samples, ref(r, "training.samples"), mt_recipe_key_is_set(r, ki) ? "iters" : "tokens",
                ref(r, mt_recipe_key_is_set(r, ki) ? "training.iters" : "training.tokens"));
            return 1;
        }
        if (t->samples < t->global_batch) {
            add(P, "training.samples", "%" PRId64 " samples are less than one global batch of %d; train at least "
                "%d samples", t->samples, t->global_batch, t->global_batch);
            return 1;
        }
        t->iters = t->samples / t->global_batch;
        if (t->steps.n > 0) { /* Megatron's update_train_iters: while consumed < train_samples, one more batch */
            int64_t consumed = 0;
            t->iters = 0;
            mt_recipe_batch_walk(r, &consumed, &t->iters, INT64_MAX, t->samples);
        } else if (t->rampup_start > 0 && t->rampup_increment > 0 && t->rampup_start < t->global_batch) {
            /* Megatron's update_train_iters: the ramp-up iterations, then the rest at the full batch */
            int64_t it = 0, consumed = 0;
            while (consumed <= t->rampup_samples && consumed <= t->samples) {
                consumed += mt_recipe_global_batch_at(r, consumed);
                it++;
            }
            t->iters = it + (t->samples - consumed) / t->global_batch;
        }
        t->tokens = 0;
        mark_derived(r, "training.iters");
    }
    return 0;
}

/* training.iters and training.tokens, one from the other; 1 when fatal. */
static int resolve_length(mt_recipe *r, problems *P) {
    mt_training_cfg *t = &r->training;
    const int64_t per_step = (int64_t)t->global_batch * r->model.seq_length; /* <= 2^30 * 2^24 */
    {   /* a length given on the command line replaces the other one from the file, as
         * Megatron's --train-iters does: `--train-iters 6` on a recipe with training.tokens */
        int ki = mt_recipe_key_find("training.iters"), kt = mt_recipe_key_find("training.tokens");
        int iters_flag = r->origin.flag[ki] != NULL && r->origin.flag[ki] != mt_recipe_derived;
        int tokens_flag = r->origin.flag[kt] != NULL && r->origin.flag[kt] != mt_recipe_derived;
        if (t->iters > 0 && t->tokens > 0 && iters_flag != tokens_flag) {
            if (iters_flag) {
                t->tokens = 0;
                r->origin.line[kt] = 0;
            } else {
                t->iters = 0;
                r->origin.line[ki] = 0;
            }
        }
    }
    if (t->iters == 0 && t->tokens == 0) {
        add(P, "training.iters", "the training length is not set; set training.iters or training.tokens");
        return 1;
    }
    if (t->steps.n > 0) { /* the tokens of a step schedule's run are its batches' sum */
        if (t->tokens > 0 && !(r->origin.flag[kid("training.tokens")] == mt_recipe_derived)) {
            add(P, "training.tokens", "a length in tokens with training.batch_schedule is not supported; give "
                "training.iters or training.samples (--train-iters / --train-samples)");
            return 1;
        }
        const int64_t n = mt_recipe_train_samples(r);
        if (n > (int64_t)1e18 / r->model.seq_length) {
            add(P, "training.iters", "%" PRId64 " steps of training.batch_schedule are more than 1e18 tokens; lower "
                "training.iters", t->iters);
            return 1;
        }
        t->tokens = n * r->model.seq_length;
        mark_derived(r, "training.tokens");
        return 0;
    }
    if (t->iters == 0) {
        if ((t->tokens + per_step - 1) / per_step > (int64_t)1e15) {
            add(P, "training.tokens", "%" PRId64 " tokens at %" PRId64 " tokens per step is more than 1e15 "
                "steps; lower training.tokens or raise training.global_batch", t->tokens, per_step);
            return 1;
        }
        t->iters = (t->tokens + per_step - 1) / per_step;
        mark_derived(r, "training.iters");
    } else if (t->tokens == 0) {
        if (t->iters > (int64_t)1e18 / per_step) {
            add(P, "training.iters", "%" PRId64 " steps of %" PRId64 " tokens (global_batch*seq_length) is "
                "more than 1e18 tokens; lower training.iters", t->iters, per_step);
            return 1;
        }
        t->tokens = t->iters * per_step;
        mark_derived(r, "training.tokens");
    } else if (t->iters != (t->tokens + per_step - 1) / per_step) {
        add(P, "training.tokens", "%" PRId64 " tokens at %" PRId64 " tokens per step (global_batch*seq_length) "
            "is %" PRId64 " steps, but training.iters is %" PRId64 " (%s); set only one of the two",
            t->tokens, per_step, (t->tokens + per_step - 1) / per_step, t->iters, ref(r, "training.iters"));
        return 1;
    }
    return 0;
}

/* The learning-rate schedule's lengths: decay and warmup from samples, fractions or the run. */
static void resolve_schedule(mt_recipe *r, problems *P) {
    const mt_training_cfg *t = &r->training;
    mt_optimizer_cfg *o = &r->optimizer;
    const int k_di = mt_recipe_key_find("optimizer.decay_iters"), k_wi = mt_recipe_key_find("optimizer.warmup_iters");
    if (o->decay_samples > 0) {
        if (mt_recipe_key_is_set(r, k_di))
            add(P, "optimizer.decay_samples", "and optimizer.decay_iters (%s) are both set; give only one",
                ref(r, "optimizer.decay_iters"));
        o->decay_iters = o->decay_samples / t->global_batch;
        mark_derived(r, "optimizer.decay_iters");
    }
    if (o->decay_iters == 0 && t->steps.n > 0 && t->samples > 0) { /* Megatron: lr_decay_samples = train_samples */
        o->decay_iters = t->samples / t->global_batch;
        mark_derived(r, "optimizer.decay_iters");
    }
    if (o->decay_iters == 0) {
        o->decay_iters = t->iters;
        mark_derived(r, "optimizer.decay_iters");
    }
    const int n_warm = (o->warmup_samples > 0) + (o->warmup_fraction > 0) + mt_recipe_key_is_set(r, k_wi);
    if (n_warm > 1)
        add(P, "optimizer.warmup_iters", "the warmup is given more than once (warmup_iters %s, warmup_samples %s, "
            "warmup_fraction %s); give only one", ref(r, "optimizer.warmup_iters"),
            ref(r, "optimizer.warmup_samples"), ref(r, "optimizer.warmup_fraction"));
    if (o->warmup_samples > 0) {
        o->warmup_iters = o->warmup_samples / t->global_batch;
        mark_derived(r, "optimizer.warmup_iters");
    } else if (o->warmup_fraction > 0) { /* Megatron: lr_warmup_steps = fraction * lr_decay_steps */
        o->warmup_iters = (int64_t)((double)o->warmup_fraction * (double)o->decay_iters);
        mark_derived(r, "optimizer.warmup_iters");
    }
    if (o->decay == MT_DECAY_WSD && (o->wsd_decay_iters <= 0 || o->wsd_decay_iters > o->decay_iters))
        add(P, "optimizer.wsd_decay_iters", "%" PRId64 " (%s): WSD anneals over the last wsd_decay_iters steps of "
            "optimizer.decay_iters = %" PRId64 "; set it between 1 and %" PRId64 " (Megatron's --lr-wsd-decay-iters)",
            o->wsd_decay_iters, ref(r, "optimizer.wsd_decay_iters"), o->decay_iters, o->decay_iters);
}

/* Phase 2: auto values. Returns nonzero when a problem stops the later checks. */
static int resolve_auto(mt_recipe *r, int world_size, problems *P) {
    resolve_model(r, P);
    if (resolve_data_parallel(r, world_size, P) || resolve_batch(r, P) || resolve_samples(r, P) ||
        resolve_length(r, P))
        return 1;
    resolve_schedule(r, P);
    /* without a checkpoint to load the run starts at 0 samples (else the trainer checks from the loaded one) */
    if (!r->checkpoint.load[0] && mt_recipe_batch_steps_check(r, r->parallel.data, 0, 0) != MT_OK)
        add(P, "training.batch_schedule", "%s", mt_last_error() + strlen("training.batch_schedule: "));
    return P->n > 0;
}

/* Phase 3: the layout and the cross-key rules. */
/* Uneven pipeline stages (recipe_stages.c), Megatron-Core's rules (TransformerConfig's checks of
 * num_layers_in_first/last_pipeline_stage and account_for_embedding/loss_in_pipeline_split): a
 * pipeline; not both ways at once; the layers left after the first and last stage split evenly
 * over the middle ones; with the embedding / loss counted, layers + 1 (+ 1) split evenly; every
 * stage at least one layer. With the interleaved schedule only the embedding / loss rule, over
 * pp * vpp chunks of at least one place each (Megatron-Core: a chunk may then hold no layer). */
static void check_uneven_stages(const mt_recipe *r, problems *P) {
    const mt_parallel_cfg *pc = &r->parallel;
    const int pp = pc->pipeline, L = r->model.layers, first = pc->first_stage_layers, last = pc->last_stage_layers;
    const char *key = first > 0 ? "parallel.first_stage_layers" : last > 0 ? "parallel.last_stage_layers"
                      : pc->embedding_in_split ? "parallel.embedding_in_split" : "parallel.loss_in_split";
    if (pp <= 1) {
        add(P, key, "uneven pipeline stages need parallel.pipeline > 1 (it is %d); remove the key", pp);
        return;
    }
    if ((first > 0 || last > 0) && (pc->embedding_in_split || pc->loss_in_split)) {
        add(P, key, "first_stage_layers / last_stage_layers and embedding_in_split / loss_in_split cannot be "
            "combined (as in Megatron); use one way of making the stages uneven");
        return;
    }
    if (pc->virtual_pipeline > 1 && (first > 0 || last > 0)) {
        add(P, key, "first / last stage layer counts with the interleaved schedule (parallel.virtual_pipeline = %d) "
            "are not supported; set virtual_pipeline: 1, or count the embedding / loss as layers instead "
            "(parallel.embedding_in_split / loss_in_split)", pc->virtual_pipeline);
        return;
    }
    if (pc->embedding_in_split || pc->loss_in_split) {
        const int n = L + (pc->embedding_in_split ? 1 : 0) + (pc->loss_in_split ? 1 : 0), v = pc->virtual_pipeline;
        if (v > 1 && (n % (pp * v) || n < pp * v)) /* Megatron: chunks of one place or more, possibly no layer */
            add(P, key, "model.layers = %d plus the embedding / loss counted as layers = %d do not split into "
                "parallel.pipeline x parallel.virtual_pipeline = %d x %d model chunks of equal size; choose pp x vpp "
                "dividing %d", L, n, pp, v, n);
        else if (v <= 1 && (n % pp || n / pp < 2))
            add(P, key, "model.layers = %d plus the embedding / loss counted as layers = %d do not split into "
                "parallel.pipeline = %d stages of at least 2; choose pp dividing %d", L, n, pp, n);
        return;
    }
    const int n_mid = pp - (first > 0) - (last > 0), rest = L - first - last;
    if (rest < 0 || (n_mid == 0 && rest != 0) || (n_mid > 0 && (rest < n_mid || rest % n_mid)))
        add(P, key, "model.layers = %d minus first_stage_layers %d and last_stage_layers %d leaves %d layers, "
            "which do not split evenly over the %d middle stage%s (each at least one); change the counts so that "
            "they do", L, first, last, rest, n_mid, n_mid == 1 ? "" : "s");
}

static void check_layout(const mt_recipe *r, problems *P) {
    const mt_model_cfg *m = &r->model;
    const mt_parallel_cfg *pc = &r->parallel;
    const mt_training_cfg *t = &r->training;
    const mt_optimizer_cfg *o = &r->optimizer;
    int64_t tp = pc->tensor, pp = pc->pipeline, vpp = pc->virtual_pipeline, dp = pc->data;
    int64_t ep = pc->expert, cp = pc->context;
    char dv[256], problem[256];

    if (m->head_dim == 0 && m->hidden % m->heads)
        add(P, "model.hidden", "%d is not divisible by model.heads = %d (%s); pick heads dividing hidden "
            "(head_dim = hidden/heads, usually 64 or 128)", m->hidden, m->heads, ref(r, "model.heads"));
    if (m->heads % tp)
        add(P, "model.heads", "%d heads do not split over parallel.tensor = %" PRId64 " (%s); use a tp that "
            "divides %d (%s)", m->heads, tp, ref(r, "parallel.tensor"), m->heads, divisors(m->heads, dv, sizeof dv));
    if (m->kv_heads > m->heads || m->heads % m->kv_heads)
        add(P, "model.kv_heads", "%d does not divide model.heads = %d; use one of %s", m->kv_heads, m->heads,
            divisors(m->heads, dv, sizeof dv));
    else if (m->kv_heads % tp && m->kv_heads != m->heads) /* else the heads message says it */
        add(P, "model.kv_heads", "%d key/value heads do not split over parallel.tensor = %" PRId64 " (%s); use a "
            "tp that divides %d (%s)", m->kv_heads, tp, ref(r, "parallel.tensor"), m->kv_heads,
            divisors(m->kv_heads, dv, sizeof dv));
    if (m->ffn_hidden % tp)
        add(P, "model.ffn_hidden", "%d does not split over parallel.tensor = %" PRId64 " (%s); use a multiple "
            "of %" PRId64, m->ffn_hidden, tp, ref(r, "parallel.tensor"), tp);
    if (mt_recipe_uneven_stages(r))
        check_uneven_stages(r, P);
    else if (m->layers % pp)
        add(P, "model.layers", "%d layers do not split into parallel.pipeline = %" PRId64 " stages (%s); use a "
            "pp that divides %d (%s)", m->layers, pp, ref(r, "parallel.pipeline"), m->layers,
            divisors(m->layers, dv, sizeof dv));
    else if (vpp > 1 && pp == 1)
        add(P, "parallel.virtual_pipeline", "%" PRId64 " model chunks need pipeline parallelism; set "
            "parallel.pipeline > 1 or virtual_pipeline: 1", vpp);
    else if (vpp > 1 && m->layers % (pp * vpp))
        add(P, "parallel.virtual_pipeline", "model.layers = %d (%s) does not split into pp*vpp = %" PRId64 "*%"
            PRId64 " chunks; pick vpp so that pp*vpp divides %d", m->layers, ref(r, "model.layers"), pp, vpp,
            m->layers);
    int64_t mb_dp = (int64_t)t->micro_batch * dp;
    if (t->global_batch % mb_dp)
        add(P, "training.global_batch", "%d is not a multiple of micro_batch*dp = %d*%" PRId64 " = %" PRId64
            " (training.micro_batch: %s, parallel.data: %s); use a multiple of %" PRId64 " (e.g. %" PRId64 ")",
            t->global_batch, t->micro_batch, dp, mb_dp, ref(r, "training.micro_batch"),
            ref(r, "parallel.data"), mb_dp, (t->global_batch / mb_dp + 1) * mb_dp);
    if (m->moe.experts > 0) {
        if (m->moe.experts % ep)
            add(P, "model.moe.experts", "%d experts do not split over parallel.expert = %" PRId64 " (%s); use an "
                "ep that divides %d (%s)", m->moe.experts, ep, ref(r, "parallel.expert"), m->moe.experts,
                divisors(m->moe.experts, dv, sizeof dv));
        if (m->moe.top_k > m->moe.experts)
            add(P, "model.moe.top_k", "routes each token to %d experts but there are only %d; set top_k <= %d",
                m->moe.top_k, m->moe.experts, m->moe.experts);
        if (m->moe.apply_probs_on_input && m->moe.top_k != 1)
            add(P, "model.moe.apply_probs_on_input", "with top_k = %d (%s): the weight on the expert's input is "
                "defined for one expert per token (Megatron asserts moe_router_topk == 1); set top_k: 1 or drop it",
                m->moe.top_k, ref(r, "model.moe.top_k"));
        const int G = m->moe.num_groups, Kg = m->moe.group_topk;
        if (Kg > 0 && G <= 1)
            add(P, "model.moe.group_topk", "%d groups kept per token but model.moe.num_groups is %d (%s); group-limited "
                "routing needs num_groups > 1 (Megatron: --moe-router-num-groups), or set group_topk: 0", Kg, G,
                ref(r, "model.moe.num_groups"));
        if (G > 1 && m->moe.experts % G)
            add(P, "model.moe.num_groups", "%d groups do not split the %d experts (%s) evenly; use a divisor of %d (%s)",
                G, m->moe.experts, ref(r, "model.moe.experts"), m->moe.experts,
                divisors(m->moe.experts, dv, sizeof dv));
        else if (G > 1 && Kg > G)
            add(P, "model.moe.group_topk", "keeps %d groups per token but there are only model.moe.num_groups = %d; "
                "set group_topk <= %d", Kg, G, G);
        else if (G > 1 && Kg > 0 && Kg > m->moe.top_k)
            add(P, "model.moe.group_topk", "keeps %d groups but a token goes to top_k = %d experts: a group's score is "
                "the sum of its top top_k / group_topk = 0 scores; set group_topk <= %d", Kg, m->moe.top_k,
                m->moe.top_k);
        else if (G > 1 && Kg > 0 && (int64_t)m->moe.top_k > (int64_t)Kg * (m->moe.experts / G))
            add(P, "model.moe.top_k", "%d experts per token from %d kept groups of %d experts (model.moe.group_topk, "
                "num_groups); set top_k <= %d", m->moe.top_k, Kg, m->moe.experts / G, Kg * (m->moe.experts / G));
        if (m->moe.expert_bias && m->moe.score_function != 1)
            add(P, "model.moe.expert_bias", "the aux-loss-free expert bias needs model.moe.score_function: sigmoid "
                "(%s; Megatron-Core raises the same for softmax scores); set score_function: sigmoid or expert_bias: "
                "false", ref(r, "model.moe.score_function"));
        if ((dp * cp) % ep)
            add(P, "parallel.expert", "ep = %" PRId64 " must divide dp*cp = %" PRId64 "*%" PRId64 " (expert "
                "groups are carved out of the data-parallel ranks); use ep in %s", ep, dp, cp,
                divisors(dp * cp, dv, sizeof dv));
        if (m->moe.shared_ffn > 0 && m->moe.shared_ffn % tp)
            add(P, "model.moe.shared_ffn", "%d does not split over parallel.tensor = %" PRId64 " (the shared experts "
                "are a tensor-parallel MLP); use a multiple of %" PRId64, m->moe.shared_ffn, tp, tp);
        if (m->moe.shared_ffn > 0 && m->bias)
            add(P, "model.moe.shared_ffn", "shared experts have no biases (Megatron's SharedExpertMLP asserts "
                "add_bias_linear false); set model.bias: false (--disable-bias-linear) or drop the shared experts");
        if (m->moe.shared_gate && m->moe.shared_ffn <= 0)
            add(P, "model.moe.shared_gate", "gates the shared experts, but there are none (model.moe.shared_ffn = 0, "
                "%s); set shared_ffn or drop shared_gate", ref(r, "model.moe.shared_ffn"));
    } else if (ep > 1) {
        add(P, "parallel.expert", "%" PRId64 " but the model is dense (model.moe.experts = 0, %s); set "
            "parallel.expert: 1 or give model.moe.experts", ep, ref(r, "model.moe.experts"));
    }
    if (m->moe.experts <= 0 && (m->moe.shared_ffn > 0 || m->moe.shared_gate))
        add(P, "model.moe.shared_ffn", "shared experts belong to MoE layers but the model is dense "
            "(model.moe.experts = 0, %s); give model.moe.experts or drop shared_ffn / shared_gate",
            ref(r, "model.moe.experts"));
    if (pc->overlap_param_gather && !pc->distributed_optimizer) /* Megatron's asserts in arguments.py */
        add(P, "parallel.overlap_param_gather", "needs parallel.distributed_optimizer (only the distributed "
            "optimizer gathers parameters); set overlap_param_gather: false or add --use-distributed-optimizer");
    else if (pc->overlap_param_gather && !pc->overlap_grad_reduce)
        add(P, "parallel.overlap_param_gather", "needs parallel.overlap_grad_reduce (the gathers use its buckets "
            "and its communication thread); add --overlap-grad-reduce");
    if (pc->sequence_parallel && tp == 1)
        add(P, "parallel.sequence_parallel", "needs parallel.tensor > 1 (it shards activations across the "
            "tensor-parallel group; tp = 1, %s); set sequence_parallel: false or raise parallel.tensor",
            ref(r, "parallel.tensor"));
    else if (mt_recipe_check_sp_split(r) != MT_OK)
        add_line(P, mt_last_error());
    if (cp > 1 && m->seq_length % (2 * cp))
        add(P, "model.seq_length", "%d is not divisible by 2*parallel.context = %" PRId64 " (context "
            "parallelism splits each sequence into 2*cp chunks); use a multiple of %" PRId64,
            m->seq_length, 2 * cp, 2 * cp);
    if (m->position == MT_POS_LEARNED && m->max_position < m->seq_length)
        add(P, "model.max_position", "%d learned positions are fewer than model.seq_length = %d (%s); set "
            "max_position >= seq_length (or auto)", m->max_position, m->seq_length, ref(r, "model.seq_length"));
    const int rot = (int)(mt_recipe_head_dim(r) * (double)m->rotary_percent);
    if (m->position == MT_POS_ROPE && m->rotary_percent < 1.0f && (rot < 2 || rot % 2))
        add(P, "model.rotary_percent", "%g of head_dim %d gives %d rotary channels; RoPE needs an even count >= 2",
            (double)m->rotary_percent, mt_recipe_head_dim(r), rot);
    if (m->position == MT_POS_ROPE && m->rotary_percent >= 1.0f && mt_recipe_head_dim(r) % 2)
        add(P, "model.position", "rope needs an even head dimension, %d; change model.head_dim, model.hidden "
            "or model.heads", mt_recipe_head_dim(r));
    if (m->rope_scaling || m->rotary_interpolation != 1.0f) {
        const char *key = m->rope_scaling ? "model.rope_scaling" : "model.rotary_interpolation";
        if (m->position != MT_POS_ROPE)
            add(P, key, "scales rotary embeddings, but model.position is learned (%s); use position: rope, or "
                "leave %s at its default", ref(r, "model.position"), key);
        else if (m->mla.enabled)
            add(P, key, "is not implemented with multi-latent attention, whose rotary embedding is YaRN's "
                "(model.mla.rotary_scaling_factor); leave %s at its default", key);
    }
    if (m->qkv_bias && !m->bias && m->mla.enabled)
        add(P, "model.qkv_bias", "is not implemented with multi-latent attention (no qkv projection); leave it false");
    if (m->rope_scaling && !(m->rope_high_freq_factor > m->rope_low_freq_factor))
        add(P, "model.rope_high_freq_factor", "%g is not above model.rope_low_freq_factor = %g: Llama 3.x's "
            "scaling blends the frequencies between the two (Llama 3.1: 1 and 4)",
            (double)m->rope_high_freq_factor, (double)m->rope_low_freq_factor);
    /* the tokenizer's ids must fit, when there is data to read (tests may use any vocab) */
    if (r->data.path[0] && r->data.tokenizer == MT_TOK_BYTE && m->vocab < 257)
        add(P, "model.vocab", "%d is smaller than the byte tokenizer's 257 ids (256 bytes + end-of-document); "
            "set model.vocab: 257", m->vocab);
    if (r->data.path[0] && r->data.tokenizer == MT_TOK_GPT2BPE && m->vocab < 50257)
        add(P, "model.vocab", "%d is smaller than the GPT-2 tokenizer's 50257 ids; set model.vocab: 50257",
            m->vocab);
    if (o->decoupled_lr > 0 && o->decoupled_min_lr > o->decoupled_lr)
        add(P, "optimizer.decoupled_min_lr", "%g is above optimizer.decoupled_lr = %g (%s); set decoupled_min_lr <= "
            "decoupled_lr", (double)o->decoupled_min_lr, (double)o->decoupled_lr, ref(r, "optimizer.decoupled_lr"));
    if (o->min_lr > o->lr)
        add(P, "optimizer.min_lr", "%g is above optimizer.lr = %g (%s); set min_lr <= lr", (double)o->min_lr,
            (double)o->lr, ref(r, "optimizer.lr"));
    /* a warmup longer than the run is fine (a smoke test with --train-iters 1 must work: the lr
     * simply never reaches its peak, and the decay horizon never matters); a run that goes past
     * its warmup must not have a decay horizon set shorter than it. The recipe a checkpoint saves
     * writes the derived decay_iters (= iters) out, so a short run's saved recipe (iters 4,
     * warmup 30, decay_iters 4) validates again, whatever training.iters it is run with. */
    if (mt_recipe_key_is_set(r, mt_recipe_key_find("optimizer.decay_iters")) && t->iters > o->warmup_iters &&
        o->warmup_iters > o->decay_iters)
        add(P, "optimizer.warmup_iters", "%" PRId64 " warmup steps exceed optimizer.decay_iters = %" PRId64
            " (%s); shorten the warmup or lengthen the decay", o->warmup_iters, o->decay_iters,
            ref(r, "optimizer.decay_iters"));
    if (r->logging.eval_interval > 0 && r->logging.eval_iters == 0)
        add(P, "logging.eval_iters", "0 batches per evaluation but logging.eval_interval = %" PRId64 " (%s); "
            "set eval_iters > 0, or eval_interval: 0 to turn evaluation off", r->logging.eval_interval,
            ref(r, "logging.eval_interval"));
    if (r->logging.profile && r->logging.profile_end < r->logging.profile_start)
        add(P, "logging.profile_end", "%" PRId64 " is before logging.profile_start = %" PRId64 " (%s); profile "
            "at least one iteration (e.g. --profile-step-start 10 --profile-step-end 12)", r->logging.profile_end,
            r->logging.profile_start, ref(r, "logging.profile_start"));
    if (r->logging.profile && !r->logging.profile_path[0])
        add(P, "logging.profile_path", "is empty but logging.profile is on; name the trace file (e.g. profile.json)");
    if (r->checkpoint.save_interval > 0 && !r->checkpoint.dir[0])
        add(P, "checkpoint.save_interval", "%" PRId64 " but checkpoint.dir is empty; set checkpoint.dir (or "
            "--save DIR)", r->checkpoint.save_interval);
    if (!blend_ok(r->data.path, problem, sizeof problem)) add(P, "data.path", "%s", problem);
    if (r->data.fim.enabled && r->data.mock)
        add(P, "data.fim.enabled", "with data.mock: fill-in-the-middle needs text (Megatron asserts the same: "
            "\"Mock dataset is not supported with FIM dataset\")");
    if (r->data.fim.enabled && r->data.tokenizer == MT_TOK_NULL)
        add(P, "data.fim.enabled", "with data.tokenizer null: fill-in-the-middle cuts the detokenized text; name the "
            "data's tokenizer");
    if (r->data.fim.enabled && r->data.fim.split_sample[0] && r->data.fim.fragment_rate < 0)
        add(P, "data.fim.fragment_rate", "is not set but data.fim.split_sample is '%.40s': give each fragment's rate "
            "(--fim-fragment-rate)", r->data.fim.split_sample);
    if (!split_ok(r->data.split))
        add(P, "data.split", "'%.60s' is not 1 to 3 non-negative numbers separated by commas; write e.g. "
            "\"969,30,1\"", r->data.split);
}

/* multi-latent attention: what Megatron refuses with it, and what mtrain does not build */
static void check_mla(const mt_recipe *r, problems *P) {
    const mt_model_cfg *m = &r->model;
    if (!m->mla.enabled) return;
    if (m->kv_heads && m->kv_heads != m->heads)
        add(P, "model.kv_heads", "%d with model.mla.enabled: multi-latent attention has one key / value head per "
            "query head (Megatron: --group-query-attention is mutually exclusive with it); drop kv_heads",
            m->kv_heads);
    if (m->qk_l2_norm)
        add(P, "model.qk_l2_norm", "is not supported with multi-latent attention (as in Megatron); drop it");
    if (m->mla.qk_pos_head_dim % 2)
        add(P, "model.mla.qk_pos_head_dim", "%d: RoPE needs an even count", m->mla.qk_pos_head_dim);
    if (m->mup.enabled)
        add(P, "model.mup.enabled", "with multi-latent attention is not implemented (muP's softmax scale and "
            "MLA's own are not combined here); drop one of them");
}

/* the MoE layers (recipe_moe_layers.c): a pattern of one 0 / 1 per layer with a MoE layer among them,
 * and the experts' width split over tp (expert tensor parallelism = tp) */
static void check_moe_layers(const mt_recipe *r, problems *P) {
    const mt_model_cfg *m = &r->model;
    const int64_t tp = r->parallel.tensor > 0 ? r->parallel.tensor : 1;
    if (m->moe.experts <= 0) return;
    if (m->moe.layer_pattern[0]) {
        unsigned char bits[1024];
        const int n = mt_recipe_moe_pattern_parse(m->moe.layer_pattern, bits, (int)sizeof bits);
        if (n < 0)
            add(P, "model.moe.layer_pattern", "'%.60s' is not one 0 / 1 per layer: write \"0111\" or Megatron's "
                "expression \"([0]+[1]*3)\" (lists of 0 and 1, * and +)", m->moe.layer_pattern);
        else if (n != m->layers)
            add(P, "model.moe.layer_pattern", "'%.60s' gives %d layers, model.layers is %d; one 0 / 1 per layer",
                m->moe.layer_pattern, n, m->layers);
    }
    if (mt_recipe_moe_layers(r, 0, m->layers) == 0)
        add(P, m->moe.layer_pattern[0] ? "model.moe.layer_pattern" : "model.moe.layer_freq",
            "makes no layer a MoE layer; drop model.moe.experts for a dense model");
    if (m->moe.ffn_hidden % tp)
        add(P, "model.moe.ffn_hidden", "%d does not split over parallel.tensor = %" PRId64 " (%s); use a multiple "
            "of %" PRId64, m->moe.ffn_hidden, tp, ref(r, "parallel.tensor"), tp);
}

/* layers without RoPE (recipe_no_rope.c): N dividing the layers (Megatron asserts it), a pattern of one 0 / 1
 * per layer, RoPE to skip, and not multi-latent attention (its rotated part is its own) */
static void check_no_rope(const mt_recipe *r, problems *P) {
    const mt_model_cfg *m = &r->model;
    if (!m->no_rope_layers[0]) return;
    unsigned char bits[1024];
    const int n = m->layers <= 1024 ? mt_recipe_no_rope_parse(m->no_rope_layers, m->layers, bits, (int)sizeof bits) : -2;
    const long every = strchr(m->no_rope_layers, '[') ? 0 : strtol(m->no_rope_layers, NULL, 10);
    if (n < 0)
        add(P, "model.no_rope_layers", "'%.60s' is neither N (every N-th layer) nor one 0 / 1 per layer as Megatron's "
            "expression \"([0]*3+[1])*2\" (lists of 0 and 1, * and +)", m->no_rope_layers);
    else if (n != m->layers)
        add(P, "model.no_rope_layers", "'%.60s' gives %d layers, model.layers is %d; one 0 / 1 per layer",
            m->no_rope_layers, n, m->layers);
    else if (every > 0 && m->layers % every)
        add(P, "model.no_rope_layers", "%ld does not divide model.layers = %d (Megatron asserts num_layers %% "
            "no_rope_freq == 0); pick a divisor or write the pattern", every, m->layers);
    if (m->position != MT_POS_ROPE)
        add(P, "model.no_rope_layers", "'%.60s' with model.position learned: there is no RoPE to skip; set "
            "model.position rope or drop it", m->no_rope_layers);
    if (m->mla.enabled)
        add(P, "model.no_rope_layers", "with multi-latent attention is not implemented (MLA rotates its own "
            "position part); drop one of them");
}

mt_status mt_recipe_validate(mt_recipe *r, int world_size) {
    problems P;
    memset(&P, 0, sizeof P);
    P.r = r;
    reset_derived(r);
    check_ranges(r, &P);
    if (P.n) return finish(&P);
    resolve_arch(r);
    if (resolve_auto(r, world_size, &P)) return finish(&P);
    check_layout(r, &P);
    check_mla(r, &P);
    check_moe_layers(r, &P);
    check_no_rope(r, &P);
    return finish(&P);
}
