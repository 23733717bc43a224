/* cmd_preprocess.c — flag parsing, progress and summary for `mtrain preprocess` (the work is
 * mt_preprocess_run in core/data/preprocess.c). Megatron's tools/preprocess_data.py spellings
 * are accepted too (--tokenizer-type, --vocab-file, --merge-file, --tokenizer-model,
 * space-separated --json-keys). Rule kept: returns an exit code, never exits. */
#include "cmd/cmd_preprocess.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/data/indexed.h"
#include "core/data/preprocess.h"
#include "core/data/tmpfiles.h"
#include "cmd/tokenizer_args.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: mtrain preprocess --input FILE.jsonl|- --output-prefix PREFIX [options]\n"
            "  writes PREFIX_<key>_document.{bin,idx} (Megatron indexed dataset), one document\n"
            "  per input line\n"
            "  --tokenizer NAME       byte (default), gpt2bpe (Megatron's GPT2BPETokenizer; the\n"
            "                         default when --vocab is given), hf (with --tokenizer-json)\n"
            "  --vocab FILE           GPT-2 vocabulary: vocab.json / encoder.json (--vocab-file)\n"
            "  --merges FILE          GPT-2 merges: merges.txt / vocab.bpe (--merge-file)\n"
            "  --tokenizer-json FILE  a Hugging Face tokenizer.json (byte-level BPE)\n"
            "  --json-keys K[,K...]   keys to take from each line (default: text)\n"
            "  --append-eod           end each non-empty document with the eod token\n"
            "  --workers N            encoder threads (default 1); output identical for any N\n"
            "  --on-error stop|skip   malformed lines: stop at the first (default) or skip and\n"
            "                         count them\n"
            "  --quiet                no progress lines\n");
}

typedef struct {
    int is_tty;
    int printed;
    int quiet;
} progress_state;

static void on_progress(const mt_preprocess_stats *s, int final, void *user) {
    progress_state *ps = user;
    if (ps->quiet) return;
    if (final) {
        if (ps->printed && ps->is_tty) fputc('\n', stderr);
        return;
    }
    double secs = s->seconds > 1e-9 ? s->seconds : 1e-9;
    fprintf(stderr, "%spreprocess: %lld docs, %.0f docs/s, %.1f MB/s, %.1f MB read%s",
            ps->is_tty ? "\r" : "", (long long)s->n_documents, (double)s->n_documents / secs,
            (double)s->n_input_bytes / 1e6 / secs, (double)s->n_input_bytes / 1e6,
            ps->is_tty ? "\033[K" : "\n");
    fflush(stderr);
    ps->printed = 1;
}

/* Splits a comma list into opt->json_keys (pointing into `buf`, which it owns). */
static int add_keys(mt_preprocess_options *opt, char *list) {
    for (char *save = NULL, *k = strtok_r(list, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
        if (opt->n_json_keys >= MT_PREPROCESS_MAX_KEYS) {
            fprintf(stderr, "mtrain preprocess: at most %d --json-keys\n",
                    MT_PREPROCESS_MAX_KEYS);
            return 0;
        }
        opt->json_keys[opt->n_json_keys++] = k;
    }
    return 1;
}

int mt_cmd_preprocess(int argc, char **argv) {
    mt_preprocess_options opt;
    memset(&opt, 0, sizeof opt);
    opt.tokenizer = NULL;
    opt.n_workers = 1;
    progress_state ps = {isatty(2), 0, 0};
    char *key_lists[MT_PREPROCESS_MAX_KEYS];
    int n_key_lists = 0, rc = 2;

    for (int i = mt_cmd_first_flag(argc, argv, "preprocess"); i < argc; i++) {
        const char *a = argv[i], *v;
        int missing = 0;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            rc = 0;
            goto out;
        } else if ((v = mt_flag_value(argc, argv, &i, "--input", &missing))) {
            opt.input = v;
        } else if ((v = mt_flag_value(argc, argv, &i, "--output-prefix", &missing))) {
            opt.output_prefix = v;
        } else if (mt_tokenizer_flag(argc, argv, &i, &opt.tokenizer, &opt.tokenizer_files, 1,
                                     &missing)) {
            /* --tokenizer, --vocab, --merges, --tokenizer-json (Megatron spellings too) */
        } else if ((v = mt_flag_value(argc, argv, &i, "--json-keys", &missing))) {
            /* One comma list, or Megatron's space-separated words up to the next flag. */
            for (;;) {
                if (n_key_lists >= MT_PREPROCESS_MAX_KEYS || !(key_lists[n_key_lists] = strdup(v))) {
                    fprintf(stderr, "mtrain preprocess: too many --json-keys\n");
                    goto out;
                }
                if (!add_keys(&opt, key_lists[n_key_lists++])) goto out;
                if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0 && !strchr(a, '=')) {
                    v = argv[++i];
                } else {
                    break;
                }
            }
        } else if ((v = mt_flag_value(argc, argv, &i, "--workers", &missing))) {
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || n < 1 || n > 4096) {
                fprintf(stderr, "mtrain preprocess: --workers %s: expected a count >= 1\n", v);
                goto out;
            }
            opt.n_workers = (int)n;
        } else if ((v = mt_flag_value(argc, argv, &i, "--on-error", &missing))) {
            if (strcmp(v, "skip") == 0) {
                opt.skip_bad_lines = 1;
            } else if (strcmp(v, "stop") == 0) {
                opt.skip_bad_lines = 0;
            } else {
                fprintf(stderr, "mtrain preprocess: --on-error %s: expected skip or stop\n", v);
                goto out;
            }
        } else if (strcmp(a, "--append-eod") == 0) {
            opt.append_eod = 1;
        } else if (strcmp(a, "--quiet") == 0) {
            ps.quiet = 1;
        } else {
            if (missing) {
                fprintf(stderr, "mtrain preprocess: %s needs a value\n", a);
            } else {
                fprintf(stderr, "mtrain preprocess: unknown argument '%s'\n", a);
            }
            usage(stderr);
            goto out;
        }
    }
    if (!opt.input || !opt.output_prefix) {
        fprintf(stderr, "mtrain preprocess: %s is required\n",
                !opt.input ? "--input" : "--output-prefix");
        usage(stderr);
        goto out;
    }
    opt.tokenizer = mt_tokenizer_name_or_default(opt.tokenizer, &opt.tokenizer_files, "byte");
    opt.progress = on_progress;
    opt.progress_user = &ps;

    mt_preprocess_stats s;
    /* Ctrl-C, SIGTERM, SIGHUP: the temporaries and locks go, then we die by the signal. */
    mt_tmpfiles_signals_install();
    mt_status st = mt_preprocess_run(&opt, &s);
    mt_tmpfiles_signals_restore();
    if (st != MT_OK) {
        if (ps.printed && ps.is_tty) fputc('\n', stderr);
        fprintf(stderr, "mtrain preprocess: %s: %s\n", mt_status_name(st), mt_last_error());
        if (s.n_skipped_malformed + s.n_skipped_missing > 0) {
            fprintf(stderr, "mtrain preprocess: %lld lines had been skipped before that\n",
                    (long long)(s.n_skipped_malformed + s.n_skipped_missing));
        }
        fprintf(stderr, "mtrain preprocess: no output written\n");
        rc = 1;
        goto out;
    }
    double secs = s.seconds > 1e-6 ? s.seconds : 1e-6;
    int n_keys = opt.n_json_keys > 0 ? opt.n_json_keys : 1;
    for (int k = 0; k < n_keys; k++) {
        char name[4096];
        if (mt_preprocess_output_name(opt.output_prefix, opt.n_json_keys ? opt.json_keys[k] : "text",
                                      name, sizeof name) == MT_OK) {
            printf("preprocess: wrote %s.{bin,idx}\n", name);
        }
    }
    printf("preprocess: %lld documents, %lld tokens (%s, tokenizer %s%s), %.2f MB read in %.2f s "
           "(%.0f docs/s, %.1f MB/s)\n",
           (long long)s.n_documents, (long long)s.n_tokens, mt_indexed_dtype_name(s.dtype_code),
           opt.tokenizer, opt.append_eod ? ", eod appended" : "", (double)s.n_input_bytes / 1e6,
           s.seconds, (double)s.n_documents / secs, (double)s.n_input_bytes / 1e6 / secs);
    if (s.n_empty > 0) {
        printf("preprocess: %lld empty documents (no tokens: kept as documents without a "
               "sequence, as Megatron does)\n", (long long)s.n_empty);
    }
    long long n_skipped = (long long)(s.n_skipped_malformed + s.n_skipped_missing);
    if (n_skipped > 0) {
        printf("preprocess: skipped %lld lines (%lld malformed, %lld without the key); first: %s\n",
               n_skipped, (long long)s.n_skipped_malformed, (long long)s.n_skipped_missing,
               s.first_skip);
    } else {
        printf("preprocess: skipped 0 lines\n");
    }
    fflush(stdout);
    rc = 0;
out:
    for (int k = 0; k < n_key_lists; k++) free(key_lists[k]);
    return rc;
}
