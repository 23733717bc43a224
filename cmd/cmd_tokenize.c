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
            "usage: mtrain tokenize (--vocab V --merges M | --tokenizer-json T | --tokenizer byte)\n"
            "                       [--input FILE] [--jsonl [--json-key K]] [--decode]\n"
            "                       [--append-eod] [--summary] [--check-roundtrip]\n"
            "  reads text lines (stdin by default) and prints the ids of each line on one line\n"
            "  --vocab FILE           GPT-2 vocab.json / encoder.json (alias --vocab-file)\n"
            "  --merges FILE          GPT-2 merges.txt / vocab.bpe (alias --merge-file)\n"
            "  --tokenizer-json FILE  Hugging Face tokenizer.json (byte-level BPE: GPT-2, Llama-3)\n"
            "  --tokenizer NAME       gpt2bpe (default with --vocab), hf, byte\n"
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

int mt_cmd_tokenize(int argc, char **argv) {
    const char *tokenizer = NULL, *input = NULL, *json_key = "text";
    mt_tokenizer_files files = {0};
    int jsonl = 0, decode = 0, summary = 0, roundtrip = 0, append_eod = 0, rc = 2;
    int i = 0;
    if (i < argc && argv[i][0] != '-' && strcmp(argv[i], "tokenize") != 0) i++;
    if (i < argc && strcmp(argv[i], "tokenize") == 0) i++;
    for (; i < argc; i++) {
        const char *a = argv[i], *v;
        int missing = 0;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (mt_tokenizer_flag(argc, argv, &i, &tokenizer, &files, 0, &missing)) {
            /* --tokenizer, --vocab, --merges, --tokenizer-json (no --tokenizer-model here) */
        } else if ((v = mt_flag_value(argc, argv, &i, "--input", &missing))) {
            input = v;
        } else if ((v = mt_flag_value(argc, argv, &i, "--json-key", &missing))) {
            json_key = v;
        } else if (!strcmp(a, "--jsonl")) {
            jsonl = 1;
        } else if (!strcmp(a, "--decode")) {
            decode = 1;
        } else if (!strcmp(a, "--summary")) {
            summary = 1;
        } else if (!strcmp(a, "--check-roundtrip")) {
            roundtrip = 1;
        } else if (!strcmp(a, "--append-eod")) {
            append_eod = 1;
        } else {
            fprintf(stderr, missing ? "mtrain tokenize: %s needs a value\n"
                                    : "mtrain tokenize: unknown argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    tokenizer = mt_tokenizer_name_or_default(tokenizer, &files, NULL);
    if (!tokenizer) {
        fprintf(stderr, "mtrain tokenize: give --vocab V --merges M, --tokenizer-json T or "
                        "--tokenizer byte\n");
        usage(stderr);
        return 2;
    }
    if (decode && (jsonl || roundtrip)) {
        fprintf(stderr, "mtrain tokenize: --decode reads id lines; it does not combine with "
                        "--jsonl or --check-roundtrip\n");
        return 2;
    }

    mt_tokenizer *tok = NULL;
    mt_jsonl_reader reader;
    int reader_open = 0;
    FILE *in = NULL;
    char *line = NULL;
    size_t n_line_capacity = 0;
    mt_token_buf ids = {0};
    mt_byte_buf text = {0};
    const char *path = input ? input : "<stdin>";
    long long n_lines = 0, n_tokens = 0, n_mismatch = 0;
    unsigned long long n_bytes = 0;
    rc = 1;

    mt_status st = mt_tokenizer_open(&tok, tokenizer, &files);
    if (st != MT_OK) goto fail;
    if (jsonl) {
        const char *keys[1] = {json_key};
        st = mt_jsonl_open(&reader, input ? input : "-", keys, 1);
        if (st != MT_OK) goto fail;
        reader_open = 1;
    } else if (input) {
        in = fopen(input, "rb");
        if (!in) {
            st = mt_errorf(MT_ERR_IO, "%s: cannot open: %s", input, strerror(errno));
            goto fail;
        }
    } else {
        in = stdin;
    }
    double t0 = mt_clock_s();
    for (;;) {
        const char *s;
        size_t n;
        if (jsonl) {
            int eof = 0;
            st = mt_jsonl_next(&reader, &eof);
            if (st != MT_OK) goto fail;
            if (eof) break;
            const mt_json_string *v = mt_jsonl_value(&reader, 0);
            if (!v->found) {
                st = mt_errorf(MT_ERR_DATA, "%s:%lld: no string key \"%s\"", reader.path,
                               (long long)reader.line_number, json_key);
                goto fail;
            }
            s = v->bytes ? v->bytes : "";
            n = v->n_bytes;
        } else {
            errno = 0;
            ssize_t got = getline(&line, &n_line_capacity, in);
            if (got < 0) {
                if (ferror(in)) {
                    st = mt_errorf(MT_ERR_IO, "%s: read failed: %s", path, strerror(errno));
                    goto fail;
                }
                break;
            }
            n = (size_t)got;
            if (n && line[n - 1] == '\n') n--;
            line[n] = 0;
            s = line;
        }
        n_lines++;
        n_bytes += n;
        if (decode) {
            st = parse_ids(s, path, n_lines, &ids);
            if (st != MT_OK) goto fail;
            text.n_bytes = 0;
            st = mt_tokenizer_decode(tok, ids.ids, ids.n_ids, &text);
            if (st != MT_OK) {
                mt_error_context(st, "%s:%lld: ", path, n_lines);
                goto fail;
            }
            if (text.n_bytes) fwrite(text.bytes, 1, text.n_bytes, stdout);
            fputc('\n', stdout);
            continue;
        }
        ids.n_ids = 0;
        st = mt_tokenizer_encode(tok, s, n, &ids);
        if (st == MT_OK && append_eod) st = mt_token_buf_push(&ids, mt_tokenizer_eod(tok));
        if (st != MT_OK) goto fail;
        n_tokens += ids.n_ids;
        if (roundtrip) {
            text.n_bytes = 0;
            st = mt_tokenizer_decode(tok, ids.ids, ids.n_ids - (append_eod ? 1 : 0), &text);
            if (st != MT_OK) goto fail;
            if (text.n_bytes != n || memcmp(text.bytes ? text.bytes : "", s, n) != 0) {
                if (n_mismatch == 0) {
                    fprintf(stderr, "mtrain tokenize: %s:%lld: decode(encode(line)) differs from "
                                    "the line\n", path, n_lines);
                }
                n_mismatch++;
            }
        }
        if (!summary && !roundtrip) {
            for (int64_t k = 0; k < ids.n_ids; k++) {
                printf(k ? " %d" : "%d", ids.ids[k]);
            }
            fputc('\n', stdout);
        }
    }
    double secs = mt_clock_s() - t0;
    if (secs < 1e-9) secs = 1e-9;
    if (summary || roundtrip) {
        printf("tokenize: %lld lines, %llu bytes, %lld tokens (tokenizer %s, vocabulary %d) in "
               "%.3f s: %.2f MB/s, %.0f tokens/s\n", n_lines, n_bytes, n_tokens, tokenizer,
               mt_tokenizer_vocab_size(tok), secs, (double)n_bytes / 1e6 / secs,
               (double)n_tokens / secs);
    }
    if (roundtrip) {
        printf("tokenize: round trip: %lld of %lld lines differ\n", n_mismatch, n_lines);
    }
    if (fflush(stdout) != 0) {
        st = mt_errorf(MT_ERR_IO, "stdout: write failed: %s", strerror(errno));
        goto fail;
    }
    rc = n_mismatch ? 1 : 0;
    goto done;
fail:
    fprintf(stderr, "mtrain tokenize: %s: %s\n", mt_status_name(st), mt_last_error());
    rc = 1;
done:
    if (reader_open) mt_jsonl_close(&reader);
    if (in && in != stdin) fclose(in);
    free(line);
    mt_token_buf_free(&ids);
    mt_byte_buf_free(&text);
    mt_tokenizer_free(tok);
    return rc;
}
