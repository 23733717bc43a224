/* fuzz_recipe.c — libFuzzer harness for the recipe: YAML loading, --set / Megatron flags,
 * validation, and the write_yaml round trip as an oracle.
 *   input "#args\n" + lines: each line is one argv word for mt_recipe_apply_args;
 *   any other input: a YAML recipe for mt_recipe_load_string.
 * Then mt_recipe_validate with the world size the layout implies (see fuzz_world). Properties checked:
 * no crash / leak / UB (under ASan+UBSan), every error leaves a message (YAML errors start
 * with the file name), and a recipe that validated writes out (mt_recipe_write_yaml),
 * loads back to the same values and validates again.
 * Built three ways: test/fuzz/run-fuzzer.sh (clang -fsanitize=fuzzer), with
 * -DMT_FUZZ_REPLAY_MAIN as a plain program that replays files (any compiler), and
 * #included by test/unit/test_recipe_fuzz_replay.c, which replays test/fuzz/corpus/ in CI. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/recipe/recipe.h"
#include "test/recipe_same.h"
#include "test/fuzz/fuzz_file.h"

#define FUZZ_MAX_ARGS 64

/* The world size the recipe's own layout implies (1 when it would be absurd), so most
 * inputs get past the world-size check; every 7th input length tries a small other world. */
static int fuzz_world(const mt_recipe *r, size_t n_bytes) {
    if (n_bytes % 7 == 3) return 1 + (int)(n_bytes % 13);
    int64_t w = (int64_t)r->parallel.tensor * r->parallel.pipeline * r->parallel.context *
                (r->parallel.data > 0 ? r->parallel.data : 1);
    return w >= 1 && w <= (1 << 20) ? (int)w : 1;
}

/* Returns 0 when every property holds; otherwise prints why and returns 1. */
static int fuzz_recipe_one(const uint8_t *data, size_t n_bytes) {
    static mt_recipe r, back; /* large: keep them off the stack */
    mt_status st;
    int is_args = n_bytes >= 6 && !memcmp(data, "#args\n", 6);
    mt_recipe_defaults(&r);
    mt_clear_error();
    if (is_args) {
        char *buf = malloc(n_bytes - 6 + 1), *argv[FUZZ_MAX_ARGS + 1];
        int argc = 0;
        if (!buf) return 0;
        memcpy(buf, data + 6, n_bytes - 6);
        buf[n_bytes - 6] = 0;
        for (char *s = buf; argc < FUZZ_MAX_ARGS;) {
            argv[argc++] = s;
            char *nl = strchr(s, '\n');
            if (!nl) break;
            *nl = 0;
            s = nl + 1;
        }
        argv[argc] = NULL;
        int argc0 = argc;
        st = mt_recipe_apply_args(&r, &argc, argv);
        free(buf);
        if (st == MT_OK && argc > argc0) {
            fprintf(stderr, "fuzz: apply_args grew argc %d -> %d\n", argc0, argc);
            return 1;
        }
    } else {
        st = mt_recipe_load_string(&r, (const char *)data, n_bytes, "fuzz.yaml");
        if (st != MT_OK && strncmp(mt_last_error(), "fuzz.yaml", 9) != 0) {
            fprintf(stderr, "fuzz: load error without the file name: %s\n", mt_last_error());
            return 1;
        }
    }
    if (st != MT_OK) {
        if (!mt_last_error()[0] || !strcmp(mt_last_error(), "(no message)")) {
            fprintf(stderr, "fuzz: status %s without a message\n", mt_status_name(st));
            return 1;
        }
        return 0;
    }
    int world = fuzz_world(&r, n_bytes);
    st = mt_recipe_validate(&r, world);
    if (st != MT_OK) {
        if (!is_args && strncmp(mt_last_error(), "fuzz.yaml", 9) != 0) {
            fprintf(stderr, "fuzz: validation error without the file name: %s\n", mt_last_error());
            return 1;
        }
        return 0;
    }
    /* oracle: write, load back, validate again: the same values */
    char *text = NULL;
    size_t n_text = 0;
    FILE *f = open_memstream(&text, &n_text);
    if (!f) return 0;
    mt_recipe_write_yaml(f, &r);
    fclose(f);
    mt_recipe_defaults(&back);
    st = mt_recipe_load_string(&back, text, n_text, "written.yaml");
    int bad = 0;
    if (st != MT_OK) {
        fprintf(stderr, "fuzz: written recipe does not load: %s\n--- written:\n%s\n", mt_last_error(), text);
        bad = 1;
    } else if (!recipe_same_values(&r, &back)) {
        fprintf(stderr, "fuzz: written recipe loads to other values\n--- written:\n%s\n", text);
        bad = 1;
    } else if ((st = mt_recipe_validate(&back, world)) != MT_OK) {
        fprintf(stderr, "fuzz: written recipe does not validate: %s\n--- written:\n%s\n", mt_last_error(), text);
        bad = 1;
    } else if (!recipe_same_values(&r, &back)) {
        fprintf(stderr, "fuzz: written recipe validates to other values\n--- written:\n%s\n", text);
        bad = 1;
    } else if ((st = mt_recipe_validate(&r, world)) != MT_OK || !recipe_same_values(&r, &back)) {
        fprintf(stderr, "fuzz: validating twice changes the recipe: %s\n", st ? mt_last_error() : "");
        bad = 1;
    }
    free(text);
    return bad;
}

/* libFuzzer's entry; with -DMT_FUZZ_REPLAY_MAIN a plain replay driver: fuzz_recipe FILE... (e.g. a
 * crash-* file from libFuzzer) */
FUZZ_ENTRY_POINTS(fuzz_recipe_one)
