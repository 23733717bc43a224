/* recipe_internal.h — the recipe key table and the helpers shared by recipe.c (loading,
 * --set, flags, writing), recipe_keys.c (the table itself) and recipe_validate.c.
 * Rule: the key table is the single source of truth; loading, overrides, defaults, the
 * reference doc and write_yaml are all driven by it. Not part of the public interface. */
#ifndef MT_RECIPE_INTERNAL_H
#define MT_RECIPE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/recipe/recipe.h"

typedef enum {
    MT_KEY_INT = 0, /* int */
    MT_KEY_INT64,   /* int64_t */
    MT_KEY_UINT64,  /* uint64_t */
    MT_KEY_FLOAT,   /* float */
    MT_KEY_BOOL,    /* int, 0 or 1 */
    MT_KEY_ENUM,    /* an int-sized C enum; names in enum_names */
    MT_KEY_STRING   /* char[n_bytes] */
} mt_key_type;

enum {
    MT_KF_AUTO = 1u << 0,      /* the word `auto` is accepted and means 0 */
    MT_KF_BLEND = 1u << 1,     /* data.path: also a YAML list [w1, p1, ...] or [{weight, path}] */
    MT_KF_ARCH = 1u << 2,      /* default depends on model.arch (resolved in validate) */
    MT_KF_REQUIRED = 1u << 3,  /* default 0 means "not set"; validate refuses it */
    MT_KF_MIN_EXCL = 1u << 4,  /* value must be > min (floats) */
    MT_KF_MAX_EXCL = 1u << 5,  /* value must be < max (floats) */
    MT_KF_FUNCTION = 1u << 6   /* part of what a model of a given shape computes (mt_recipe_key_changes_function) */
};

typedef struct {
    const char *name;              /* "section.key" or "section.sub.key" */
    mt_key_type type;
    size_t offset;                 /* into mt_recipe */
    size_t n_bytes;                /* strings: capacity including the NUL */
    const char *def;               /* default as text, parsed like a value from the file */
    double min, max;               /* numeric range (inclusive unless MT_KF_*_EXCL) */
    const char *unit;              /* "" when none */
    const char *help;              /* one line */
    const char *const *enum_names; /* MT_KEY_ENUM: NULL-terminated, index = enum value */
    unsigned flags;                /* MT_KF_* */
    const char *doc_default;       /* reference text for the default when not `def` */
} mt_recipe_key;

typedef struct {
    const char *flag;  /* "--tensor-model-parallel-size" */
    const char *key;   /* "parallel.tensor" */
    const char *fixed; /* value for switches without an argument ("true", "bf16"), else NULL */
} mt_recipe_alias;

extern const mt_recipe_key mt_recipe_keys[];
extern const int mt_recipe_n_keys;
extern const mt_recipe_alias mt_recipe_aliases[];
extern const int mt_recipe_n_aliases;

/* Marker stored in origin.flag[] for a value that validate derived (auto, arch defaults):
 * such a value counts as "not set" and is derived again by the next validate. */
extern const char mt_recipe_derived[];

/* Parses text into key k of r (no origin bookkeeping). On failure writes
 * "problem; fix" into err and returns MT_ERR_CONFIG. */
mt_status mt_recipe_parse_value(mt_recipe *r, int k, const char *text, char *err, size_t n_err);
/* Formats the current value of key k as YAML scalar text (strings unquoted). */
void mt_recipe_format_value(const mt_recipe *r, int k, char *buf, size_t n_bytes);
/* Numeric value of key k as a double (ints, floats, bools, enums). */
double mt_recipe_numeric(const mt_recipe *r, int k);
/* Where key k's value came from: "file:line", "--set key=value", "--flag value", "default",
 * "derived". Writes into buf and returns it. */
const char *mt_recipe_where_id(const mt_recipe *r, int k, char *buf, size_t n_bytes);
/* Key id or -1; the nearest known key by edit distance (or one with the same last
 * component), or NULL when nothing is close. */
int mt_recipe_key_index(const char *name);
const char *mt_recipe_nearest_key(const char *name);
/* "unknown <what> 'name'; did you mean 'x'?" (sections_only: suggest sections, and keys
 * whose last component matches) */
void mt_recipe_unknown_problem(const char *what, const char *name, int sections_only, char *buf, size_t n_bytes);
int mt_recipe_is_prefix(const char *name);      /* "model", "model.moe": a section of some key */
const char *mt_recipe_leaf(const char *name);   /* last dotted component */
/* A value echoed into a message: control bytes -> '?', cut to ~80 bytes with "...". */
const char *mt_recipe_echo(const char *s, char *buf, size_t n_bytes);
/* recipe_problems.c: the problems of one command line, gathered into one report.
 * problem_add: one line (or several, one per line of text); problem_status: st's message when
 * st is not MT_OK; problem_report: MT_OK when none, else one error holding them all. */
typedef struct {
    char text[8192];
    size_t used;
    int n, n_dropped;
    mt_status st;
} mt_recipe_problems;
void mt_recipe_problem_add(mt_recipe_problems *p, const char *text);
void mt_recipe_problem_status(mt_recipe_problems *p, mt_status st);
mt_status mt_recipe_problem_report(const mt_recipe_problems *p);
/* recipe_megatron.c: takes Megatron's non-alias flags out of argv before the aliases are applied
 * (*state: what was seen; refused flags and missing values go to *P), then applies their rules
 * and notes once the aliases are in, each broken rule to *P (finish frees nothing; free(state)
 * after). Only MT_ERR_OOM is returned; every other problem is in *P. */
mt_status mt_recipe_take_megatron(mt_recipe *r, int *argc, char **argv, void **state, mt_recipe_problems *P);
mt_status mt_recipe_finish_megatron(mt_recipe *r, void *state, mt_recipe_problems *P);
/* Decimal number without hex/inf/nan/underscores: 0 ok, 1 not a number, 2 out of range. */
int mt_recipe_parse_double(const char *s, double *out);
/* One UTF-8 sequence: its length (0 = invalid) and code point. */
int mt_recipe_utf8_next(const unsigned char *s, uint32_t *cp);
void mt_recipe_fmt_num(char *buf, size_t n_bytes, double v, int integral);

#endif
