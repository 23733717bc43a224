/* logprobs.c — scoring completions with a checkpoint (logprobs.h): the model built for
 * micro-batches of one sequence, the checkpoint loaded into it (weights only), each prompt +
 * completion run forward through the loss (dloss 0, no backward), the per-token losses read
 * back on the rank that holds them; and the comparison of two logprobs files. */
#include "train/logprobs.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/ckpt/manifest.h"
#include "core/clock.h"
#include "core/data/json_lines.h"
#include "core/json_tree.h"
#include "core/json_string.h"
#include "train/checkpoint_use.h"

mt_status mt_logprobs_open(mt_logprobs *lp, const mt_recipe *r, mt_backend *be, const mt_parallel_state *ps, FILE *log) {
    mt_status st = MT_OK;
    memset(lp, 0, sizeof *lp);
    lp->r = r;
    lp->be = be;
    lp->ps = ps;
    lp->n_micro = 1;
    if (!ps->logger) log = NULL;
    if (r->parallel.context > 1)
        return mt_errorf(MT_ERR_UNSUPPORTED, "parallel.context = %d: mtrain logprobs scores with tp and pp only; set "
                         "--context-parallel-size 1 (a save made at any cp loads at cp 1)", r->parallel.context);
    if (!r->checkpoint.load[0])
        return mt_errorf(MT_ERR_CONFIG, "no checkpoint to score: pass --load DIR (a checkpoint folder --save wrote, or "
                         "one iter_* folder in it)");
    const int T = r->model.seq_length;
    MT_CHECK(mt_ckpt_open_for_use(r, "mtrain logprobs", "score", "score", log, lp->ckpt_path, sizeof lp->ckpt_path,
                                  &lp->iteration, &lp->tok));

    mt_model_shape shape = {.B = 1, .ps = ps};
    for (int b = 0; b < MT_GBUFS; b++) shape.shards[b] = 1, shape.shard[b] = 0; /* no optimizer shards */
    MT_CHECK(mt_model_create_for_use(&lp->model, r, be, &shape));
    lp->have_model = 1;
    const int pp = lp->model.pl.pp;
    lp->has_losses = lp->model.pl.has_head; /* the last pipeline stage (every rank without a pipeline) */
    if (pp > 1) {
        const int v = r->parallel.virtual_pipeline > 1 ? r->parallel.virtual_pipeline : 1;
        lp->n_micro = v > 1 ? pp : 1; /* interleaving runs micro-batches in groups of pp: the same row each */
        MT_CHECK(mt_pipeline_init(&lp->pipe, &lp->model, lp->n_micro, lp->n_micro, ps));
        lp->have_pipe = 1;
        lp->head_slot = -1;
        for (int i = 0; i < lp->pipe.n_fsteps; i++)
            if (lp->pipe.fsteps[i].op == MT_PP_FWD && lp->pipe.fsteps[i].chunk == lp->pipe.v - 1)
                lp->head_slot = lp->pipe.fsteps[i].slot;
        if (lp->has_losses && (lp->head_slot < 0 || lp->head_slot >= lp->pipe.n_slots)) {
            st = mt_errorf(MT_ERR_INTERNAL, "logprobs: the forward-only table of the last stage has no loss step");
            goto out;
        }
    }
    MT_CHECK(mt_ckpt_load_weights(r, &lp->model, ps, lp->ckpt_path)); /* the scorer never steps the optimizer */
    lp->views_usable = !getenv("MT_LOGPROBS_FULL_LENGTH") && mt_logprobs_views_usable(&lp->model);
    lp->row = malloc((size_t)(T + 1) * sizeof *lp->row);
    lp->losses = malloc((size_t)T * sizeof *lp->losses);
    if (!lp->row || !lp->losses) {
        st = mt_errorf(MT_ERR_OOM, "logprobs: staging for %d tokens", T + 1);
        goto out;
    }
out:
    if (st != MT_OK) mt_logprobs_close(lp);
    return st;
}

void mt_logprobs_close(mt_logprobs *lp) {
    mt_logprobs_views_close(lp);
    if (lp->have_pipe) mt_pipeline_free(&lp->pipe, &lp->model);
    if (lp->have_model) mt_model_free(&lp->model);
    if (lp->tok) mt_tokenizer_free(lp->tok);
    free(lp->row);
    free(lp->losses);
    lp->have_pipe = lp->have_model = 0;
    lp->tok = NULL;
    lp->row = NULL;
    lp->losses = NULL;
}

/* the pipeline executor's fetch: every micro-batch is the row being scored */
static mt_status fetch_row(void *ctx, int mb, int32_t *tokens) {
    const mt_logprobs *lp = ctx;
    (void)mb;
    memcpy(tokens, lp->row, (size_t)(lp->r->model.seq_length + 1) * sizeof *tokens);
    return MT_OK;
}

mt_status mt_logprobs_score(mt_logprobs *lp, const int32_t *ids, int n_ids, int n_prompt, double *logprobs) {
    mt_status st = MT_OK;
    mt_model *m = &lp->model;
    const int T = lp->r->model.seq_length, V = lp->r->model.vocab;
    if (n_prompt < 1 || n_ids < n_prompt || n_ids > T + 1)
        return mt_errorf(MT_ERR_CONFIG, "logprobs: %d tokens with a prompt of %d: need a prompt of at least one token "
                         "and at most model.seq_length + 1 = %d tokens in all", n_ids, n_prompt, T + 1);
    for (int i = 0; i < n_ids; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return mt_errorf(MT_ERR_DATA, "logprobs: token %d is id %d, outside the model's vocabulary [0, %d)", i,
                             (int)ids[i], V);
    mt_model *view = mt_logprobs_view_for(lp, n_ids, &st);
    if (st != MT_OK) goto out;
    const int Tr = view ? view->pl.T : T; /* the length this sequence runs at */
    lp->last_T = Tr;
    memcpy(lp->row, ids, (size_t)n_ids * sizeof *ids);
    const int32_t pad = lp->tok ? mt_tokenizer_eod(lp->tok) : 0;
    for (int i = n_ids; i <= Tr; i++) lp->row[i] = pad;
    const void *base;
    if (view) {
        m = view;
        MT_CHECK(mt_model_load_micro(m, &m->acts, lp->row));
        MT_CHECK(mt_model_forward(m, &m->acts, mt_model_whole(m)));
        MT_CHECK(mt_model_loss(m, &m->acts, 0.0f));
        base = m->acts.base;
    } else if (lp->have_pipe) {
        MT_CHECK(mt_pipeline_run(&lp->pipe, m, fetch_row, lp, 0.0f, 1));
        base = lp->has_losses ? lp->pipe.slot[lp->head_slot] : NULL;
    } else {
        MT_CHECK(mt_model_load_micro(m, &m->acts, lp->row));
        MT_CHECK(mt_model_forward(m, &m->acts, mt_model_whole(m)));
        MT_CHECK(mt_model_loss(m, &m->acts, 0.0f));
        base = m->acts.base;
    }
    if (!lp->has_losses) goto out;
    /* position i predicts row[i + 1]: the completion's k-th token is predicted at n_prompt - 1 + k */
    MT_CHECK(lp->be->i->copy_d2h(lp->be, lp->losses, (const char *)base + m->al.losses, (size_t)Tr * sizeof(float)));
    for (int k = 0; k < n_ids - n_prompt; k++) logprobs[k] = -(double)lp->losses[n_prompt - 1 + k];
out:
    return st;
}

/* ---- output ---- */

/* a number as JSON, with Python's literals for what JSON lacks (json.loads reads them back) */
static void put_number(FILE *f, double x, int digits) {
    if (isnan(x)) fputs("NaN", f);
    else if (isinf(x)) fputs(x > 0 ? "Infinity" : "-Infinity", f);
    else fprintf(f, "%.*g", digits, x);
}

static void put_ids(FILE *f, const int32_t *ids, int64_t n) {
    fputc('[', f);
    for (int64_t i = 0; i < n; i++) fprintf(f, "%s%d", i ? ", " : "", (int)ids[i]);
    fputc(']', f);
}

static void put_line(FILE *f, const mt_json_string *prompt, const mt_json_string *completion, const mt_token_buf *all,
                     int n_prompt, const double *lps) {
    const int n_c = (int)all->n_ids - n_prompt;
    double sum = 0;
    fputs("{\"prompt\": ", f);
    mt_json_write_string_n(f, prompt->bytes, prompt->n_bytes);
    fputs(", \"completion\": ", f);
    mt_json_write_string_n(f, completion->bytes, completion->n_bytes);
    fputs(", \"prompt_tokens\": ", f);
    put_ids(f, all->ids, n_prompt);
    fputs(", \"tokens\": ", f);
    put_ids(f, all->ids + n_prompt, n_c);
    fputs(", \"logprobs\": [", f);
    for (int k = 0; k < n_c; k++) {
        if (k) fputs(", ", f);
        put_number(f, lps[k], 9); /* fp32 losses: 9 digits give them exactly */
        sum += lps[k];
    }
    fputs("], \"sum\": ", f);
    put_number(f, sum, 17);
    fputs("}\n", f);
}

mt_status mt_logprobs_run_file(mt_logprobs *lp, const char *prompts_path, const char *out_path, FILE *log,
                               mt_logprobs_report *rep) {
    mt_status st = MT_OK;
    const char *keys[2] = {"prompt", "completion"};
    mt_jsonl_reader rd;
    int have_rd = 0;
    mt_token_buf all = {0}, comp = {0};
    double *lps = NULL;
    FILE *out = NULL;
    char tmp[4200];
    const int T = lp->r->model.seq_length;
    const int writer = lp->ps->logger;
    const double t0 = mt_clock_s();
    memset(rep, 0, sizeof *rep);
    (void)log;
    tmp[0] = 0;
    MT_CHECK(mt_jsonl_open(&rd, prompts_path, keys, 2));
    have_rd = 1;
    lps = malloc((size_t)(T + 1) * sizeof *lps);
    if (!lps) {
        st = mt_errorf(MT_ERR_OOM, "logprobs: %d values", T + 1);
        goto out;
    }
    if (writer) {
        snprintf(tmp, sizeof tmp, "%s.tmp", out_path);
        out = fopen(tmp, "w");
        if (!out) {
            st = mt_errorf(MT_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
            tmp[0] = 0;
            goto out;
        }
    }
    for (;;) {
        int eof = 0;
        MT_CHECK(mt_jsonl_next(&rd, &eof));
        if (eof) break;
        const mt_json_string *prompt = mt_jsonl_value(&rd, 0), *completion = mt_jsonl_value(&rd, 1);
        const long long line = (long long)rd.line_number;
        if (!prompt->found || !completion->found) {
            st = mt_errorf(MT_ERR_DATA, "%s:%lld: no \"%s\" string: each line is {\"prompt\": \"...\", \"completion\": "
                           "\"...\"}", rd.path, line, prompt->found ? "completion" : "prompt");
            goto out;
        }
        all.n_ids = 0;
        comp.n_ids = 0;
        MT_CHECK(mt_tokenizer_encode(lp->tok, prompt->bytes, prompt->n_bytes, &all));
        MT_CHECK(mt_tokenizer_encode(lp->tok, completion->bytes, completion->n_bytes, &comp));
        const int64_t n_prompt = all.n_ids, n_comp = comp.n_ids;
        if (n_prompt == 0) {
            st = mt_errorf(MT_ERR_DATA, "%s:%lld: the prompt is empty: the first completion token needs at least one "
                           "token before it", rd.path, line);
            goto out;
        }
        if (n_comp == 0) {
            st = mt_errorf(MT_ERR_DATA, "%s:%lld: the completion is empty: nothing to score", rd.path, line);
            goto out;
        }
        if (n_prompt + n_comp > T + 1) {
            st = mt_errorf(MT_ERR_DATA, "%s:%lld: %lld prompt + %lld completion tokens are more than model.seq_length + "
                           "1 = %d: shorten the line or score with a longer model.seq_length", rd.path, line,
                           (long long)n_prompt, (long long)n_comp, T + 1);
            goto out;
        }
        MT_CHECK(mt_token_buf_reserve(&all, n_comp));
        memcpy(all.ids + all.n_ids, comp.ids, (size_t)n_comp * sizeof *comp.ids);
        all.n_ids += n_comp;
        st = mt_logprobs_score(lp, all.ids, (int)all.n_ids, (int)n_prompt, lps);
        if (st != MT_OK) {
            mt_error_context(st, "%s:%lld", rd.path, line);
            goto out;
        }
        if (out) put_line(out, prompt, completion, &all, (int)n_prompt, lps);
        rep->n_prompts++;
        rep->n_tokens += n_comp;
        if (lp->last_T > rep->longest_T) rep->longest_T = lp->last_T;
    }
    if (rep->n_prompts == 0) {
        st = mt_errorf(MT_ERR_DATA, "%s: no prompts (expected JSON lines {\"prompt\": \"...\", \"completion\": \"...\"})",
                       prompts_path);
        goto out;
    }
    if (out) {
        const int bad = ferror(out);
        const int closed = fclose(out);
        out = NULL;
        if (bad || closed) {
            st = mt_errorf(MT_ERR_IO, "%s: write failed: %s", tmp, strerror(errno ? errno : EIO));
            goto out;
        }
        if (rename(tmp, out_path)) {
            st = mt_errorf(MT_ERR_IO, "%s: cannot rename to %s: %s", tmp, out_path, strerror(errno));
            goto out;
        }
        tmp[0] = 0;
    }
    rep->seconds = mt_clock_s() - t0;
out:
    if (out) fclose(out);
    if (tmp[0]) unlink(tmp);
    if (have_rd) mt_jsonl_close(&rd);
    mt_token_buf_free(&all);
    mt_token_buf_free(&comp);
    free(lps);
    return st;
}

/* ---- comparison ---- */

typedef struct {
    const char *path;
    FILE *f;
    char *line;
    size_t cap;
    int64_t line_number;
    mt_json_parser *parser;
    const mt_json_node *root;
} cmp_file;

static mt_status cmp_open(cmp_file *c, const char *path) {
    memset(c, 0, sizeof *c);
    c->path = path;
    c->f = fopen(path, "r");
    if (!c->f) return mt_errorf(MT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    return mt_json_parser_new(&c->parser, MT_JSONL_PARSER_FLAGS);
}

static void cmp_close(cmp_file *c) {
    if (c->f) fclose(c->f);
    free(c->line);
    if (c->parser) mt_json_parser_free(c->parser);
}

/* the next non-blank line, parsed; *eof at the end */
static mt_status cmp_next(cmp_file *c, int *eof) {
    *eof = 0;
    for (;;) {
        errno = 0;
        const ssize_t n = getline(&c->line, &c->cap, c->f);
        if (n < 0) {
            if (ferror(c->f)) return mt_errorf(MT_ERR_IO, "%s: read failed: %s", c->path, strerror(errno ? errno : EIO));
            *eof = 1;
            return MT_OK;
        }
        c->line_number++;
        size_t len = (size_t)n;
        while (len && (c->line[len - 1] == '\n' || c->line[len - 1] == '\r')) len--;
        size_t k = 0;
        while (k < len && (c->line[k] == ' ' || c->line[k] == '\t')) k++;
        if (k == len) continue;
        mt_status st = mt_json_parser_parse(c->parser, c->line, len, c->path, &c->root);
        if (st != MT_OK) return mt_error_context(st, "%s:%lld", c->path, (long long)c->line_number);
        return MT_OK;
    }
}

/* member `key` as an array of numbers (integers when `integers`); NULL when absent */
static mt_status get_array(const cmp_file *c, const char *key, int integers, int required, const mt_json_node **out) {
    const mt_json_node *a = mt_json_get(c->root, key);
    *out = NULL;
    if (!a) {
        if (required)
            return mt_errorf(MT_ERR_DATA, "%s:%lld: no \"%s\": not a logprobs file (mtrain logprobs or "
                             "test/ref/hf_logprobs.py writes one)", c->path, (long long)c->line_number, key);
        return MT_OK;
    }
    if (a->type != MT_JSON_ARRAY)
        return mt_errorf(MT_ERR_DATA, "%s:%lld: \"%s\" is %s, not an array", c->path, (long long)c->line_number, key,
                         mt_json_type_name(a->type));
    for (size_t i = 0; i < a->n_items; i++)
        if (a->items[i].type != MT_JSON_NUMBER || (integers && !a->items[i].is_integer))
            return mt_errorf(MT_ERR_DATA, "%s:%lld: \"%s\"[%zu] is not %s", c->path, (long long)c->line_number, key, i,
                             integers ? "an integer" : "a number");
    *out = a;
    return MT_OK;
}

/* both lines have the same integer array `key` (when both have it, or when required) */
static mt_status same_ids(const cmp_file *a, const cmp_file *b, const char *key, int required) {
    mt_status st = MT_OK;
    const mt_json_node *x, *y;
    MT_CHECK(get_array(a, key, 1, required, &x));
    MT_CHECK(get_array(b, key, 1, required, &y));
    if (!x || !y) goto out;
    const char *what = !strcmp(key, "tokens") ? "completion tokens" : "prompt tokens";
    if (x->n_items != y->n_items)
        return mt_errorf(MT_ERR_DATA, "%s:%lld has %zu %s, %s:%lld has %zu: the files do not score the same text "
                         "(same prompts file and tokenizer?)", a->path, (long long)a->line_number, x->n_items, what,
                         b->path, (long long)b->line_number, y->n_items);
    for (size_t i = 0; i < x->n_items; i++)
        if (x->items[i].integer != y->items[i].integer)
            return mt_errorf(MT_ERR_DATA, "%s:%lld and %s:%lld: %s differ at index %zu (%lld vs %lld): the files do not "
                             "score the same text (same prompts file and tokenizer?)", a->path, (long long)a->line_number,
                             b->path, (long long)b->line_number, what, i, (long long)x->items[i].integer,
                             (long long)y->items[i].integer);
out:
    return st;
}

static mt_status same_string(const cmp_file *a, const cmp_file *b, const char *key) {
    const mt_json_node *x = mt_json_get(a->root, key), *y = mt_json_get(b->root, key);
    if (!x || !y || x->type != MT_JSON_STRING || y->type != MT_JSON_STRING) return MT_OK;
    if (x->n_str_bytes != y->n_str_bytes || memcmp(x->str, y->str, x->n_str_bytes))
        return mt_errorf(MT_ERR_DATA, "%s:%lld and %s:%lld: the \"%s\" texts differ: compare files made from the same "
                         "prompts file", a->path, (long long)a->line_number, b->path, (long long)b->line_number, key);
    return MT_OK;
}

static double abs_diff(double a, double b) {
    if (isnan(a) || isnan(b)) return INFINITY;
    if (a == b) return 0; /* the same infinity too */
    return fabs(a - b);
}

/* the start of a prompt for a message: control characters as spaces, cut before a character */
static void prompt_excerpt(const mt_json_node *p, char *buf, size_t n_buf) {
    buf[0] = 0;
    if (!p || p->type != MT_JSON_STRING) return;
    size_t n = p->n_str_bytes < n_buf - 1 ? p->n_str_bytes : n_buf - 1;
    if (n < p->n_str_bytes) /* str[n] is the first byte left out: cut at the start of its character */
        while (n > 0 && ((unsigned char)p->str[n] & 0xC0) == 0x80) n--;
    for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)p->str[i] < 0x20 ? ' ' : p->str[i];
    buf[n] = 0;
}

mt_status mt_logprobs_compare(const char *path_a, const char *path_b, mt_logprobs_diff *d) {
    mt_status st = MT_OK;
    cmp_file a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    memset(d, 0, sizeof *d);
    MT_CHECK(cmp_open(&a, path_a));
    MT_CHECK(cmp_open(&b, path_b));
    for (;;) {
        int ea = 0, eb = 0;
        MT_CHECK(cmp_next(&a, &ea));
        MT_CHECK(cmp_next(&b, &eb));
        if (ea || eb) {
            if (ea && eb) break;
            st = mt_errorf(MT_ERR_DATA, "%s ends after %lld line(s) but %s has more: the files do not score the same "
                           "prompts", ea ? path_a : path_b, (long long)d->n_lines, ea ? path_b : path_a);
            goto out;
        }
        d->n_lines++;
        MT_CHECK(same_string(&a, &b, "prompt"));
        MT_CHECK(same_string(&a, &b, "completion"));
        MT_CHECK(same_ids(&a, &b, "prompt_tokens", 0));
        MT_CHECK(same_ids(&a, &b, "tokens", 1));
        const mt_json_node *tok, *la, *lb;
        MT_CHECK(get_array(&a, "tokens", 1, 1, &tok));
        MT_CHECK(get_array(&a, "logprobs", 0, 1, &la));
        MT_CHECK(get_array(&b, "logprobs", 0, 1, &lb));
        if (la->n_items != tok->n_items || lb->n_items != tok->n_items) {
            const cmp_file *w = la->n_items != tok->n_items ? &a : &b;
            st = mt_errorf(MT_ERR_DATA, "%s:%lld: %zu logprobs for %zu tokens", w->path, (long long)w->line_number,
                           (w == &a ? la : lb)->n_items, tok->n_items);
            goto out;
        }
        double sa = 0, sb = 0;
        for (size_t k = 0; k < tok->n_items; k++) {
            const double x = la->items[k].number, y = lb->items[k].number, dd = abs_diff(x, y);
            sa += x;
            sb += y;
            d->n_tokens++;
            if (d->worst_line == 0 || dd > d->max_abs) {
                d->max_abs = dd;
                d->worst_line = d->n_lines;
                d->worst_token = (int)k;
                prompt_excerpt(mt_json_get(a.root, "prompt"), d->worst_prompt, sizeof d->worst_prompt);
            }
        }
        const double ds = abs_diff(sa, sb);
        if (ds > d->max_abs_sum) d->max_abs_sum = ds;
    }
    if (d->n_lines == 0) st = mt_errorf(MT_ERR_DATA, "%s and %s: no lines to compare", path_a, path_b);
out:
    cmp_close(&a);
    cmp_close(&b);
    return st;
}
