/* cmd_tokenize.c — `mtrain tokenize`: reads text (stdin or --input), one document per line
 * (or JSON lines with --jsonl), and prints the token ids of each line space-separated on one
 * output line; --decode reads such id lines and prints the text; --summary prints only the
 * totals and throughput; --check-roundtrip verifies decode(encode(x)) == x for every line.
 * Rule kept: returns an exit code, never exits; errors name the file and line. */
#include "cmd/cmd_tokenize.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/data/json_lines.h"
#include "core/data/tokenizer.h"
#include "cmd/tokenizer_args.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: mtrain tokenize (--vocab V --merges M | --tokenizer-json T | --tokenizer-model M.model\n"
            "                       | --tokenizer byte)\n"
            "                       [--input FILE] [--jsonl [--json-key K]] [--decode]\n"
            "                       [--append-eod] [--summary] [--check-roundtrip]\n"
            "  reads text lines (stdin by default) and prints the ids of each line on one line\n"
            "  --vocab FILE           GPT-2 vocab.json / encoder.json (alias --vocab-file)\n"
            "  --merges FILE          GPT-2 merges.txt / vocab.bpe (alias --merge-file)\n"
            "  --tokenizer-json FILE  Hugging Face tokenizer.json (byte-level BPE: GPT-2, Llama-3)\n"
            "  --tokenizer-model FILE a SentencePiece .model (alias of --tokenizer-json)\n"
            "  --tokenizer NAME       gpt2bpe (default with --vocab), hf, byte, GPTSentencePieceTokenizer\n"
            "                         (default with a .model: its ids), Llama2Tokenizer (bos first),\n"
            "                         SentencePieceTokenizer (Megatron's special tokens added)\n"
            "  --input FILE           read FILE instead of stdin\n"
            "  --jsonl                the input is JSON lines; tokenize the --json-key (text)\n"
            "  --decode               the input is id lines; print their text\n"
            "  --append-eod           end each line's ids with the end-of-document id\n"
            "  --summary              print totals and MB/s, tokens/s instead of the ids\n"
            "  --check-roundtrip      check decode(encode(line)) == line; exit 1 on a mismatch\n");
}

/* Parses one line of decimal ids into ids; MT_ERR_DATA naming the line on junk. */
static mt_status parse_ids(const char *line, const char *path, long long line_no,
                           mt_token_buf *ids) {
    const char *p = line;
    ids->n_ids = 0;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == ',' || *p == '\r') p++;
        if (!*p) return MT_OK;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < INT32_MIN || v > INT32_MAX) {
            return mt_errorf(MT_ERR_DATA, "%s:%lld: column %ld: expected a token id", path,
                             line_no, (long)(p - line) + 1);
        }
        mt_status st = mt_token_buf_push(ids, (int32_t)v);
        if (st != MT_OK) return st;
        p = end;
    }
}

typedef struct {
    const char *tokenizer, *input, *json_key, *path;
    mt_tokenizer_files files;
    int jsonl, decode, summary, roundtrip, append_eod;
} tok_args;

typedef struct {
    const tok_args *a;
    mt_tokenizer *tok;
    mt_jsonl_reader reader;
    int reader_open;
    FILE *in;
    char *line;
    size_t n_line_capacity;
    mt_token_buf ids;
    mt_byte_buf text;
    long long n_lines, n_tokens, n_mismatch;
    unsigned long long n_bytes;
} tok_run;

/* The flags into *a; -1 to go on, else the exit code (0 after --help). */
static int parse_args(int argc, char **argv, tok_args *a) {
    for (int i = mt_cmd_first_flag(argc, argv, "tokenize"); i < argc; i++) {
        const char *arg = argv[i], *v;
        int missing = 0;
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            usage(stdout);
            return 0;
        } else if (mt_tokenizer_flag(argc, argv, &i, &a->tokenizer, &a->files, 1, &missing)) {
            /* --tokenizer, --vocab, --merges, --tokenizer-json, --tokenizer-model */
        } else if ((v = mt_flag_value(argc, argv, &i, "--input", &missing))) {
            a->input = v;
        } else if ((v = mt_flag_value(argc, argv, &i, "--json-key", &missing))) {
            a->json_key = v;
        } else if (!strcmp(arg, "--jsonl")) {
            a->jsonl = 1;
        } else if (!strcmp(arg, "--decode")) {
            a->decode = 1;
        } else if (!strcmp(arg, "--summary")) {
            a->summary = 1;
        } else if (!strcmp(arg, "--check-roundtrip")) {
            a->roundtrip = 1;
        } else if (!strcmp(arg, "--append-eod")) {
            a->append_eod = 1;
        } else {
            fprintf(stderr, missing ? "mtrain tokenize: %s needs a value\n"
                                    : "mtrain tokenize: unknown argument '%s'\n", arg);
            usage(stderr);
            return 2;
        }
    }
    a->tokenizer = mt_tokenizer_name_or_default(a->tokenizer, &a->files, NULL);
    if (!a->tokenizer) {
        fprintf(stderr, "mtrain tokenize: give --vocab V --merges M, --tokenizer-json T, "
                        "--tokenizer-model M.model or --tokenizer byte\n");
        usage(stderr);
        return 2;
    }
    if (a->decode && (a->jsonl || a->roundtrip)) {
        fprintf(stderr, "mtrain tokenize: --decode reads id lines; it does not combine with "
                        "--jsonl or --check-roundtrip\n");
        return 2;
    }
    a->path = a->input ? a->input : "<stdin>";
    return -1;
}

/* The tokenizer and the input: JSON lines, a file, or stdin. */
static mt_status open_run(tok_run *t) {
    const tok_args *a = t->a;
    mt_status st = mt_tokenizer_open(&t->tok, a->tokenizer, &a->files);
    if (st != MT_OK) return st;
    if (a->jsonl) {
        const char *keys[1] = {a->json_key};
        st = mt_jsonl_open(&t->reader, a->input ? a->input : "-", keys, 1);
        if (st != MT_OK) return st;
        t->reader_open = 1;
    } else if (a->input) {
        t->in = fopen(a->input, "rb");
        if (!t->in) return mt_errorf(MT_ERR_IO, "%s: cannot open: %s", a->input, strerror(errno));
    } else {
        t->in = stdin;
    }
    return MT_OK;
}

/* The next line's bytes in *s, *n (without its newline); *eof at the end of the input. */
static mt_status next_line(tok_run *t, const char **s, size_t *n, int *eof) {
    if (t->a->jsonl) {
        mt_status st = mt_jsonl_next(&t->reader, eof);
        if (st != MT_OK || *eof) return st;
        const mt_json_string *v = mt_jsonl_value(&t->reader, 0);
        if (!v->found)
            return mt_errorf(MT_ERR_DATA, "%s:%lld: no string key \"%s\"", t->reader.path,
                             (long long)t->reader.line_number, t->a->json_key);
        *s = v->bytes ? v->bytes : "";
        *n = v->n_bytes;
        return MT_OK;
    }
    errno = 0;
    ssize_t got = getline(&t->line, &t->n_line_capacity, t->in);
    if (got < 0) {
        if (ferror(t->in)) return mt_errorf(MT_ERR_IO, "%s: read failed: %s", t->a->path, strerror(errno));
        *eof = 1;
        return MT_OK;
    }
    *n = (size_t)got;
    if (*n && t->line[*n - 1] == '\n') (*n)--;
    t->line[*n] = 0;
    *s = t->line;
    return MT_OK;
}

/* --decode: one line of ids, printed as text. */
static mt_status decode_line(tok_run *t, const char *s) {
    mt_status st = parse_ids(s, t->a->path, t->n_lines, &t->ids);
    if (st != MT_OK) return st;
    t->text.n_bytes = 0;
    st = mt_tokenizer_decode(t->tok, t->ids.ids, t->ids.n_ids, &t->text);
    if (st != MT_OK) {
        mt_error_context(st, "%s:%lld: ", t->a->path, t->n_lines);
        return st;
    }
    if (t->text.n_bytes) fwrite(t->text.bytes, 1, t->text.n_bytes, stdout);
    fputc('\n', stdout);
    return MT_OK;
}

/* One line encoded: its ids printed, or counted and checked against their decoding. */
static mt_status encode_line(tok_run *t, const char *s, size_t n) {
    const tok_args *a = t->a;
    t->ids.n_ids = 0;
    mt_status st = mt_tokenizer_encode(t->tok, s, n, &t->ids);
    if (st == MT_OK && a->append_eod) st = mt_token_buf_push(&t->ids, mt_tokenizer_eod(t->tok));
    if (st != MT_OK) return st;
    t->n_tokens += t->ids.n_ids;
    if (a->roundtrip) {
        t->text.n_bytes = 0;
        st = mt_tokenizer_decode(t->tok, t->ids.ids, t->ids.n_ids - (a->append_eod ? 1 : 0), &t->text);
        if (st != MT_OK) return st;
        if (t->text.n_bytes != n || memcmp(t->text.bytes ? t->text.bytes : "", s, n) != 0) {
            if (t->n_mismatch == 0) {
                fprintf(stderr, "mtrain tokenize: %s:%lld: decode(encode(line)) differs from "
                                "the line\n", a->path, t->n_lines);
            }
            t->n_mismatch++;
        }
    }
    if (!a->summary && !a->roundtrip) {
        for (int64_t k = 0; k < t->ids.n_ids; k++) {
            printf(k ? " %d" : "%d", t->ids.ids[k]);
        }
        fputc('\n', stdout);
    }
    return MT_OK;
}

/* Every line of the input, then the totals (--summary, --check-roundtrip). */
static mt_status run(tok_run *t) {
    const tok_args *a = t->a;
    double t0 = mt_clock_s();
    for (;;) {
        const char *s = NULL;
        size_t n = 0;
        int eof = 0;
        mt_status st = next_line(t, &s, &n, &eof);
        if (st != MT_OK) return st;
        if (eof) break;
        t->n_lines++;
        t->n_bytes += n;
        st = a->decode ? decode_line(t, s) : encode_line(t, s, n);
        if (st != MT_OK) return st;
    }
    double secs = mt_clock_s() - t0;
    if (secs < 1e-9) secs = 1e-9;
    if (a->summary || a->roundtrip) {
        printf("tokenize: %lld lines, %llu bytes, %lld tokens (tokenizer %s, vocabulary %d) in "
               "%.3f s: %.2f MB/s, %.0f tokens/s\n", t->n_lines, t->n_bytes, t->n_tokens, a->tokenizer,
               mt_tokenizer_vocab_size(t->tok), secs, (double)t->n_bytes / 1e6 / secs,
               (double)t->n_tokens / secs);
    }
    if (a->roundtrip) {
        printf("tokenize: round trip: %lld of %lld lines differ\n", t->n_mismatch, t->n_lines);
    }
    if (fflush(stdout) != 0) return mt_errorf(MT_ERR_IO, "stdout: write failed: %s", strerror(errno));
    return MT_OK;
}

int mt_cmd_tokenize(int argc, char **argv) {
    tok_args a = {.json_key = "text"};
    const int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    tok_run t = {.a = &a};
    mt_status st = open_run(&t);
    if (st == MT_OK) st = run(&t);
    if (st != MT_OK) fprintf(stderr, "mtrain tokenize: %s: %s\n", mt_status_name(st), mt_last_error());
    if (t.reader_open) mt_jsonl_close(&t.reader);
    if (t.in && t.in != stdin) fclose(t.in);
    free(t.line);
    mt_token_buf_free(&t.ids);
    mt_byte_buf_free(&t.text);
    mt_tokenizer_free(t.tok);
    return st != MT_OK ? 1 : t.n_mismatch ? 1 : 0;
}
