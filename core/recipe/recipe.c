/* recipe.c — the recipe's values: defaults, parsing and formatting one value by the key
 * table, origins ("file:line" / flag) and nearest-key suggestions, `--set key=value` and
 * Megatron-style flags, and the derived quantities (padded vocab, head dim, micro-batches).
 * YAML in and out is in recipe_yaml.c, validation in recipe_validate.c, the table in recipe_keys.c.
 * Rules: everything is driven by the key table; every error message is
 * "<where>: <key>: <problem>; <fix>" where <where> is "file:line" or the flag as typed;
 * no exit(); every libyaml object is freed on every path. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/recipe/recipe_internal.h"

_Static_assert(sizeof(mt_arch) == sizeof(int) && sizeof(mt_norm) == sizeof(int) &&
                   sizeof(mt_act) == sizeof(int) && sizeof(mt_pos) == sizeof(int) &&
                   sizeof(mt_decay) == sizeof(int) && sizeof(mt_recompute) == sizeof(int) &&
                   sizeof(mt_recompute_method) == sizeof(int) &&
                   sizeof(mt_precision) == sizeof(int) && sizeof(mt_backend_kind) == sizeof(int) &&
                   sizeof(mt_tokenizer_kind) == sizeof(int),
               "recipe enums are stored through int pointers");

const char mt_recipe_derived[] = "derived";
static const char k_set_flag[] = "--set";

#define MSG_VAL_MAX 80 /* longest value echoed back in a message */

/* ---------- small helpers ---------- */

/* Copies s into buf for a message: control bytes become '?', long values are cut with "...". */
const char *mt_recipe_echo(const char *s, char *buf, size_t n_bytes) {
    size_t n = 0, cap = n_bytes < MSG_VAL_MAX ? n_bytes : MSG_VAL_MAX;
    for (; s[n] && n + 4 < cap; n++) buf[n] = (unsigned char)s[n] < 0x20 || s[n] == 0x7f ? '?' : s[n];
    if (s[n]) { memcpy(buf + n, "...", 3); n += 3; }
    buf[n] = 0;
    return buf;
}

static void *field(mt_recipe *r, int k) { return (char *)r + mt_recipe_keys[k].offset; }
static const void *cfield(const mt_recipe *r, int k) { return (const char *)r + mt_recipe_keys[k].offset; }

static int streq_ci(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return 0;
    return *a == *b;
}

/* Only digits, sign, '.', 'e'/'E': refuses hex, inf, nan, "1_000" and stray words. */
static int plain_number_chars(const char *s) {
    if (!*s) return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s) && !strchr("+-.eE", *s)) return 0;
    return 1;
}

/* 0 ok, 1 not a number, 2 out of range (finite double required). */
int mt_recipe_parse_double(const char *s, double *out) {
    if (!plain_number_chars(s)) return 1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end) return 1;
    if (errno == ERANGE && fabs(v) > 1.0) return 2;
    if (!isfinite(v)) return 2;
    if (errno == ERANGE) v = 0.0; /* underflow: a tiny number is 0 */
    *out = v;
    return 0;
}

/* 0 ok, 1 not an integer, 2 outside int64. Accepts integral exponent forms ("300e9"). */
static int parse_int64(const char *s, int64_t *out) {
    if (!plain_number_chars(s)) return 1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end != s && !*end) {
        if (errno == ERANGE) return 2;
        *out = v;
        return 0;
    }
    double d;
    int rc = mt_recipe_parse_double(s, &d);
    if (rc) return rc;
    if (d != floor(d)) return 1;
    if (d >= 9223372036854775807.0 || d < -9223372036854775807.0) return 2;
    *out = (int64_t)d;
    return 0;
}

void mt_recipe_fmt_num(char *buf, size_t n_bytes, double v, int integral) {
    if (integral && fabs(v) < 1e18) snprintf(buf, n_bytes, "%.0f", v);
    else snprintf(buf, n_bytes, "%g", v);
}

/* Shortest "%.Ng" that reads back as the same float. */
static void fmt_float(char *buf, size_t n_bytes, float v) {
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, n_bytes, "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v) return;
    }
}

static void enum_list(const mt_recipe_key *key, char *buf, size_t n_bytes) {
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; key->enum_names[i] && n < n_bytes; i++)
        n += (size_t)snprintf(buf + n, n_bytes - n, "%s%s", i ? ", " : "", key->enum_names[i]);
}

static int range_problem(const mt_recipe_key *key, double v, char *err, size_t n_err) {
    int integral = key->type != MT_KEY_FLOAT;
    char lo[32], hi[32], got[32];
    mt_recipe_fmt_num(lo, sizeof lo, key->min, integral);
    mt_recipe_fmt_num(hi, sizeof hi, key->max, integral);
    mt_recipe_fmt_num(got, sizeof got, v, integral);
    int below = (key->flags & MT_KF_MIN_EXCL) ? !(v > key->min) : !(v >= key->min);
    int above = (key->flags & MT_KF_MAX_EXCL) ? !(v < key->max) : !(v <= key->max);
    if (!below && !above) return 0;
    const int excl = below ? (key->flags & MT_KF_MIN_EXCL) != 0 : (key->flags & MT_KF_MAX_EXCL) != 0;
    snprintf(err, n_err, "out of range: %s is %s %s%s; use a value in %s%s, %s%s", got,
             below ? (excl ? "not above" : "below the minimum") : (excl ? "not below" : "above the maximum"),
             below ? lo : hi, excl ? " (excluded)" : "",
             (key->flags & MT_KF_MIN_EXCL) ? "(" : "[", lo, hi, (key->flags & MT_KF_MAX_EXCL) ? ")" : "]");
    return 1;
}

/* Decodes one UTF-8 sequence at s: returns its length (0 when invalid: bad lead or
 * continuation byte, overlong form, surrogate, > U+10FFFF) and the code point. */
int mt_recipe_utf8_next(const unsigned char *s, uint32_t *cp) {
    unsigned c = s[0];
    int n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (!n) return 0;
    uint32_t v = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    static const uint32_t min_of[5] = { 0, 0, 0x80, 0x800, 0x10000 };
    if (v < min_of[n] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return n;
}

static int utf8_ok(const char *s) {
    uint32_t cp;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        int n = mt_recipe_utf8_next(p, &cp);
        if (!n) return 0;
        p += n;
    }
    return 1;
}

/* ---------- values ---------- */

mt_status mt_recipe_parse_value(mt_recipe *r, int k, const char *text, char *err, size_t n_err) {
    const mt_recipe_key *key = &mt_recipe_keys[k];
    char e[MSG_VAL_MAX + 8];
    mt_recipe_echo(text, e, sizeof e);
    if ((key->flags & MT_KF_AUTO) && streq_ci(text, "auto")) text = "0";
    switch (key->type) {
    case MT_KEY_INT:
    case MT_KEY_INT64: {
        int64_t v = 0;
        int rc = parse_int64(text, &v);
        if (rc == 1) {
            snprintf(err, n_err, "expected an integer, got '%s'; write a whole number such as 8%s", e,
                     (key->flags & MT_KF_AUTO) ? " (or auto)" : "");
            return MT_ERR_CONFIG;
        }
        if (rc == 2) {
            snprintf(err, n_err, "out of range: '%s' does not fit a 64-bit integer; use a value "
                     "from %.0f to %.0f", e, key->min, key->max);
            return MT_ERR_CONFIG;
        }
        if (range_problem(key, (double)v, err, n_err)) return MT_ERR_CONFIG;
        if (key->type == MT_KEY_INT) *(int *)field(r, k) = (int)v;
        else *(int64_t *)field(r, k) = v;
        return MT_OK;
    }
    case MT_KEY_UINT64: {
        const char *p = text[0] == '+' ? text + 1 : text;
        int digits = *p != 0;
        for (const char *q = p; *q; q++) digits &= isdigit((unsigned char)*q) != 0;
        if (!digits) {
            snprintf(err, n_err, "expected a non-negative integer, got '%s'; write e.g. 1234", e);
            return MT_ERR_CONFIG;
        }
        errno = 0;
        unsigned long long v = strtoull(p, NULL, 10);
        if (errno == ERANGE) {
            snprintf(err, n_err, "out of range: '%s' does not fit 64 bits; use a value up to %llu",
                     e, (unsigned long long)UINT64_MAX);
            return MT_ERR_CONFIG;
        }
        *(uint64_t *)field(r, k) = (uint64_t)v;
        return MT_OK;
    }
    case MT_KEY_FLOAT: {
        double d = 0;
        int rc = mt_recipe_parse_double(text, &d);
        if (rc == 1) {
            snprintf(err, n_err, "expected a number, got '%s'; write e.g. 3e-4 or 0.1", e);
            return MT_ERR_CONFIG;
        }
        if (rc == 2) {
            snprintf(err, n_err, "out of range: '%s' is not a finite number; use a value from %g "
                     "to %g", e, key->min, key->max);
            return MT_ERR_CONFIG;
        }
        /* the range is checked on the value as written (1e308 is 1e308, not the float it would clamp
         * to), then on the float it becomes (a value that rounds onto an excluded bound) */
        if (range_problem(key, d, err, n_err)) return MT_ERR_CONFIG;
        if (fabs(d) > 3.0e38) d = d < 0 ? -3.0e38 : 3.0e38; /* keep the float conversion defined */
        float f = (float)d;
        if (range_problem(key, (double)f, err, n_err)) return MT_ERR_CONFIG;
        *(float *)field(r, k) = f;
        return MT_OK;
    }
    case MT_KEY_BOOL: {
        static const char *const yes[] = { "true", "yes", "on", "1", NULL };
        static const char *const no[] = { "false", "no", "off", "0", NULL };
        for (int i = 0; yes[i]; i++)
            if (streq_ci(text, yes[i])) { *(int *)field(r, k) = 1; return MT_OK; }
        for (int i = 0; no[i]; i++)
            if (streq_ci(text, no[i])) { *(int *)field(r, k) = 0; return MT_OK; }
        snprintf(err, n_err, "expected true or false, got '%s'; write true or false (yes/no, 1/0 "
                 "also work)", e);
        return MT_ERR_CONFIG;
    }
    case MT_KEY_ENUM: {
        for (int i = 0; key->enum_names[i]; i++)
            if (streq_ci(text, key->enum_names[i])) { *(int *)field(r, k) = i; return MT_OK; }
        char allowed[256];
        enum_list(key, allowed, sizeof allowed);
        snprintf(err, n_err, "unknown value '%s'; allowed: %s", e, allowed);
        return MT_ERR_CONFIG;
    }
    case MT_KEY_STRING: {
        size_t n = strlen(text);
        if (n + 1 > key->n_bytes) {
            snprintf(err, n_err, "value is %zu bytes, longer than the %zu allowed; use a shorter "
                     "path (e.g. a symlink)", n, key->n_bytes - 1);
            return MT_ERR_CONFIG;
        }
        if (!utf8_ok(text)) {
            snprintf(err, n_err, "'%s' is not valid UTF-8; recipes are UTF-8 text (rename the file or "
                     "link it under a UTF-8 name)", e);
            return MT_ERR_CONFIG;
        }
        memset(field(r, k), 0, key->n_bytes);
        memcpy(field(r, k), text, n);
        return MT_OK;
    }
    }
    snprintf(err, n_err, "internal: bad key type");
    return MT_ERR_INTERNAL;
}

void mt_recipe_format_value(const mt_recipe *r, int k, char *buf, size_t n_bytes) {
    const mt_recipe_key *key = &mt_recipe_keys[k];
    const void *p = cfield(r, k);
    switch (key->type) {
    case MT_KEY_INT: snprintf(buf, n_bytes, "%d", *(const int *)p); return;
    case MT_KEY_INT64: snprintf(buf, n_bytes, "%" PRId64, *(const int64_t *)p); return;
    case MT_KEY_UINT64: snprintf(buf, n_bytes, "%" PRIu64, *(const uint64_t *)p); return;
    case MT_KEY_FLOAT: fmt_float(buf, n_bytes, *(const float *)p); return;
    case MT_KEY_BOOL: snprintf(buf, n_bytes, "%s", *(const int *)p ? "true" : "false"); return;
    case MT_KEY_ENUM: {
        int v = *(const int *)p, n = 0;
        while (key->enum_names[n]) n++;
        if (v >= 0 && v < n) snprintf(buf, n_bytes, "%s", key->enum_names[v]);
        else snprintf(buf, n_bytes, "%d", v);
        return;
    }
    case MT_KEY_STRING: snprintf(buf, n_bytes, "%.*s", (int)key->n_bytes, (const char *)p); return;
    }
    if (n_bytes) buf[0] = 0;
}

double mt_recipe_numeric(const mt_recipe *r, int k) {
    const void *p = cfield(r, k);
    switch (mt_recipe_keys[k].type) {
    case MT_KEY_INT:
    case MT_KEY_BOOL:
    case MT_KEY_ENUM: return *(const int *)p;
    case MT_KEY_INT64: return (double)*(const int64_t *)p;
    case MT_KEY_UINT64: return (double)*(const uint64_t *)p;
    case MT_KEY_FLOAT: return *(const float *)p;
    case MT_KEY_STRING: return 0;
    }
    return 0;
}

/* ---------- keys, origins, suggestions ---------- */

int mt_recipe_key_index(const char *name) {
    for (int k = 0; k < mt_recipe_n_keys; k++)
        if (strcmp(mt_recipe_keys[k].name, name) == 0) return k;
    return -1;
}

int mt_recipe_key_count(void) { return mt_recipe_n_keys; }
int mt_recipe_key_find(const char *name) { return name ? mt_recipe_key_index(name) : -1; }
const char *mt_recipe_key_name(int id) {
    return id >= 0 && id < mt_recipe_n_keys ? mt_recipe_keys[id].name : NULL;
}
int mt_recipe_key_changes_function(int id) {
    return id >= 0 && id < mt_recipe_n_keys && (mt_recipe_keys[id].flags & MT_KF_FUNCTION) != 0;
}

int mt_recipe_key_is_set(const mt_recipe *r, int id) {
    if (id < 0 || id >= mt_recipe_n_keys) return 0;
    return r->origin.line[id] > 0 ||
           (r->origin.flag[id] != NULL && r->origin.flag[id] != mt_recipe_derived);
}

static const mt_recipe_alias *alias_of_flag(const char *flag) {
    for (int i = 0; i < mt_recipe_n_aliases; i++)
        if (mt_recipe_aliases[i].flag == flag || strcmp(mt_recipe_aliases[i].flag, flag) == 0)
            return &mt_recipe_aliases[i];
    return NULL;
}

const char *mt_recipe_where_id(const mt_recipe *r, int k, char *buf, size_t n_bytes) {
    const char *flag = r->origin.flag[k];
    char val[MT_BLEND_MAX], e[MSG_VAL_MAX + 8];
    if (r->origin.line[k] > 0) {
        snprintf(buf, n_bytes, "%s:%d", r->origin.file[0] ? r->origin.file : "<recipe>", r->origin.line[k]);
    } else if (flag == mt_recipe_derived) {
        snprintf(buf, n_bytes, "%s%sderived", r->origin.file, r->origin.file[0] ? ": " : "");
    } else if (flag) {
        mt_recipe_format_value(r, k, val, sizeof val);
        const mt_recipe_alias *a = alias_of_flag(flag);
        if (strcmp(flag, k_set_flag) == 0) snprintf(buf, n_bytes, "--set %s=%s", mt_recipe_keys[k].name, mt_recipe_echo(val, e, sizeof e));
        else if (a && a->fixed) snprintf(buf, n_bytes, "%s", flag);
        else snprintf(buf, n_bytes, "%s %s", flag, mt_recipe_echo(val, e, sizeof e));
    } else {
        snprintf(buf, n_bytes, "%s%sdefault", r->origin.file, r->origin.file[0] ? ": " : "");
    }
    return buf;
}

const char *mt_recipe_where(const mt_recipe *r, const char *key, char *buf, size_t n_bytes) {
    int k = mt_recipe_key_find(key);
    if (k < 0) {
        snprintf(buf, n_bytes, "%s", r->origin.file[0] ? r->origin.file : "recipe");
        return buf;
    }
    return mt_recipe_where_id(r, k, buf, n_bytes);
}

static size_t edit_distance(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    if (na > 127 || nb > 127) return (size_t)-1;
    size_t prev[128], cur[128];
    for (size_t j = 0; j <= nb; j++) prev[j] = j;
    for (size_t i = 1; i <= na; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, (nb + 1) * sizeof prev[0]);
    }
    return prev[nb];
}

const char *mt_recipe_leaf(const char *name) {
    const char *d = strrchr(name, '.');
    return d ? d + 1 : name;
}

int mt_recipe_is_prefix(const char *name) {
    size_t n = strlen(name);
    for (int k = 0; k < mt_recipe_n_keys; k++)
        if (strncmp(mt_recipe_keys[k].name, name, n) == 0 && mt_recipe_keys[k].name[n] == '.') return 1;
    return 0;
}

/* Candidates: every key, and every section prefix ("model", "model.moe"). */
static const char *nearest(const char *name, int sections_only) {
    static const char *const sections[] = { "model", "parallel", "training", "optimizer", "data",
                                            "checkpoint", "logging", "model.moe", NULL };
    const char *best = NULL;
    size_t best_d = (size_t)-1, n = strlen(name);
    for (int i = 0; sections[i]; i++) {
        size_t d = edit_distance(name, sections[i]);
        if (d < best_d) { best_d = d; best = sections[i]; }
    }
    if (!sections_only)
        for (int k = 0; k < mt_recipe_n_keys; k++) {
            size_t d = edit_distance(name, mt_recipe_keys[k].name);
            if (d < best_d) { best_d = d; best = mt_recipe_keys[k].name; }
        }
    if (best && best_d <= 2 && best_d < n) return best;
    /* same last component in another section: training.lr -> optimizer.lr, hidden -> model.hidden */
    for (int k = 0; k < mt_recipe_n_keys; k++)
        if (strcmp(mt_recipe_leaf(mt_recipe_keys[k].name), mt_recipe_leaf(name)) == 0) return mt_recipe_keys[k].name;
    if (best && best_d <= n / 3) return best;
    return NULL;
}

const char *mt_recipe_nearest_key(const char *name) { return nearest(name, 0); }

/* "unknown key 'x'; did you mean 'y'?" or "...; see docs/recipe.md for the keys" */
void mt_recipe_unknown_problem(const char *what, const char *name, int sections_only, char *buf, size_t n_bytes) {
    char e[MSG_VAL_MAX + 8];
    const char *near = nearest(name, sections_only);
    if (near)
        snprintf(buf, n_bytes, "unknown %s '%s'; did you mean '%s'?", what, mt_recipe_echo(name, e, sizeof e), near);
    else
        snprintf(buf, n_bytes, "unknown %s '%s'; see docs/recipe.md for the known keys%s", what,
                 mt_recipe_echo(name, e, sizeof e),
                 sections_only ? " (sections: model, parallel, training, optimizer, data, checkpoint, logging)" : "");
}

/* ---------- defaults ---------- */

void mt_recipe_defaults(mt_recipe *r) {
    char err[256];
    memset(r, 0, sizeof *r);
    for (int k = 0; k < mt_recipe_n_keys; k++)
        (void)mt_recipe_parse_value(r, k, mt_recipe_keys[k].def, err, sizeof err); /* table checked by test_recipe */
}

/* ---------- --set and flags ---------- */

/* Sets key k from text for flag (static string); where_text is the flag as typed. */
static mt_status set_from_flag(mt_recipe *r, int k, const char *text, const char *flag, const char *where_text) {
    char problem[512];
    if (mt_recipe_parse_value(r, k, text, problem, sizeof problem) != MT_OK)
        return mt_errorf(MT_ERR_CONFIG, "%s: %s: %s", where_text, mt_recipe_keys[k].name, problem);
    r->origin.line[k] = 0;
    r->origin.flag[k] = flag;
    return MT_OK;
}

mt_status mt_recipe_set(mt_recipe *r, const char *key, const char *value, const char *flag) {
    char where[512], e1[MSG_VAL_MAX + 8], e2[MSG_VAL_MAX + 8], problem[512];
    if (!flag) flag = k_set_flag;
    if (!key) key = "";
    int is_set = strcmp(flag, k_set_flag) == 0;
    mt_recipe_echo(key, e1, sizeof e1);
    if (is_set) snprintf(where, sizeof where, "--set %s=%s", e1, value ? mt_recipe_echo(value, e2, sizeof e2) : "");
    else snprintf(where, sizeof where, "%s%s%s", flag, value ? " " : "", value ? mt_recipe_echo(value, e2, sizeof e2) : "");
    int k = mt_recipe_key_index(key);
    if (k < 0) {
        if (mt_recipe_is_prefix(key))
            snprintf(problem, sizeof problem, "'%s' is a section, not a key; name a key in it, e.g. "
                     "--set %s.<key>=value (see docs/recipe.md)", e1, e1);
        else
            mt_recipe_unknown_problem("key", key, 0, problem, sizeof problem);
        return mt_errorf(MT_ERR_CONFIG, "%s: %s", where, problem);
    }
    if (!value)
        return mt_errorf(MT_ERR_CONFIG, "%s: %s: no value; write --set %s=value", where, key, key);
    return set_from_flag(r, k, value, flag, where);
}

static const mt_recipe_alias *match_alias(const char *arg, const char **eq_value) {
    for (int i = 0; i < mt_recipe_n_aliases; i++) {
        const char *f = mt_recipe_aliases[i].flag;
        size_t n = strlen(f);
        if (strncmp(arg, f, n) != 0) continue;
        if (arg[n] == 0) { *eq_value = NULL; return &mt_recipe_aliases[i]; }
        if (arg[n] == '=') { *eq_value = arg + n + 1; return &mt_recipe_aliases[i]; }
    }
    return NULL;
}

/* "--set k=v" / "--set=k=v" / "--set k v": splits into key and value (key copied into kbuf). */
static mt_status apply_set(mt_recipe *r, int argc, char **argv, int *i) {
    const char *a = argv[*i], *kv;
    char kbuf[256];
    if (a[5] == '=') kv = a + 6;
    else if (*i + 1 < argc) kv = argv[++*i];
    else kv = NULL;
    if (!kv) return mt_errorf(MT_ERR_CONFIG, "--set: needs key=value; write e.g. --set model.hidden=256");
    const char *eq = strchr(kv, '=');
    const char *value;
    size_t nk;
    if (eq) {
        nk = (size_t)(eq - kv);
        value = eq + 1;
    } else {
        nk = strlen(kv);
        if (*i + 1 >= argc)
            return mt_recipe_set(r, kv, NULL, k_set_flag);
        value = argv[++*i];
    }
    if (nk >= sizeof kbuf) nk = sizeof kbuf - 1;
    memcpy(kbuf, kv, nk);
    kbuf[nk] = 0;
    return mt_recipe_set(r, kbuf, value, k_set_flag);
}

static mt_status apply_aliases(mt_recipe *r, int *argc, char **argv, mt_recipe_problems *P);

mt_status mt_recipe_apply_args(mt_recipe *r, int *argc, char **argv) {
    void *meg = NULL;
    mt_recipe_problems *P = calloc(1, sizeof *P);
    if (!P) return mt_errorf(MT_ERR_OOM, "out of memory parsing the command line");
    /* every stage goes on past a problem, so that the report holds them all */
    mt_status st = mt_recipe_take_megatron(r, argc, argv, &meg, P);
    if (st == MT_OK) st = apply_aliases(r, argc, argv, P);
    if (st == MT_OK) st = mt_recipe_finish_megatron(r, meg, P);
    if (st == MT_OK) st = mt_recipe_problem_report(P);
    free(meg);
    free(P);
    return st;
}

static mt_status apply_aliases(mt_recipe *r, int *argc, char **argv, mt_recipe_problems *P) {
    int n = *argc, n_keep = 0;
    mt_status st = MT_OK;
    char **keep = malloc(((size_t)(n > 0 ? n : 0) + 1) * sizeof *keep);
    char *joined = NULL;
    if (!keep) return mt_errorf(MT_ERR_OOM, "out of memory parsing the command line");
    for (int i = 0; i < n; i++) {
        const char *a = argv[i], *eqv = NULL;
        const mt_recipe_alias *al;
        if (!a) {
            keep[n_keep++] = argv[i];
            continue;
        }
        if (!strcmp(a, "--")) {
            while (i < n) keep[n_keep++] = argv[i++];
            break;
        }
        if (!strncmp(a, "--set", 5) && (a[5] == 0 || a[5] == '=')) {
            mt_recipe_problem_status(P, apply_set(r, n, argv, &i));
        } else if ((al = match_alias(a, &eqv)) != NULL) {
            int k = mt_recipe_key_index(al->key);
            char where[512], e[MSG_VAL_MAX + 8];
            if (k < 0) { st = mt_errorf(MT_ERR_INTERNAL, "%s: alias of unknown key %s", al->flag, al->key); goto out; }
            if (al->fixed) {
                if (eqv) {
                    mt_recipe_problem_status(P, mt_errorf(MT_ERR_CONFIG, "%s: %s: this switch takes no value; "
                                                          "write %s alone (or --set %s=...)", a, al->key, al->flag,
                                                          al->key));
                    continue;
                }
                mt_recipe_problem_status(P, set_from_flag(r, k, al->fixed, al->flag, al->flag));
                continue;
            }
            const char *value = eqv;
            if (!value && !strcmp(al->flag, "--data-path")) {
                /* Megatron: --data-path takes every following word: --data-path 0.3 A 0.7 B */
                size_t total = 1;
                int j = i + 1;
                for (; j < n && argv[j] && strncmp(argv[j], "--", 2) != 0; j++) total += strlen(argv[j]) + 1;
                if (j > i + 1) {
                    joined = calloc(total, 1);
                    if (!joined) { st = mt_errorf(MT_ERR_OOM, "out of memory parsing --data-path"); goto out; }
                    for (int q = i + 1; q < j; q++) {
                        if (q > i + 1) strcat(joined, " ");
                        strcat(joined, argv[q]);
                    }
                    value = joined;
                    i = j - 1;
                }
            } else if (!value && i + 1 < n) {
                value = argv[++i];
            }
            if (!value) {
                mt_recipe_problem_status(P, mt_errorf(MT_ERR_CONFIG, "%s: %s: needs a value; write %s VALUE or "
                                                      "%s=VALUE", al->flag, al->key, al->flag, al->flag));
                continue;
            }
            snprintf(where, sizeof where, "%s %s", al->flag, mt_recipe_echo(value, e, sizeof e));
            mt_recipe_problem_status(P, set_from_flag(r, k, value, al->flag, where));
            free(joined);
            joined = NULL;
        } else {
            keep[n_keep++] = argv[i];
        }
    }
    for (int i = 0; i < n_keep; i++) argv[i] = keep[i];
    if (n_keep < n) argv[n_keep] = NULL;
    *argc = n_keep;
out:
    free(joined);
    free(keep);
    return st;
}

const char *mt_recipe_value_text(const mt_recipe *r, const char *key, char *buf, size_t n_bytes) {
    const int k = mt_recipe_key_index(key);
    if (n_bytes == 0) return buf;
    buf[0] = 0;
    if (k >= 0) mt_recipe_format_value(r, k, buf, n_bytes);
    return buf;
}

/* ---------- derived quantities ---------- */

int mt_recipe_padded_vocab(const mt_recipe *r) {
    int64_t tp = r->parallel.tensor > 0 ? r->parallel.tensor : 1, m = 128 * tp, v = r->model.vocab;
    if (v <= 0) return 0;
    int64_t p = (v + m - 1) / m * m;
    return p > INT_MAX ? INT_MAX : (int)p;
}

mt_status mt_recipe_check_sp_split(const mt_recipe *r) {
    /* under context parallelism a rank holds seq_length / cp positions of each sequence, so the
       rule is seq_length % (tp * cp) == 0 (seq_length % (2 cp) is validated separately) */
    const int tp = r->parallel.tensor, cp = r->parallel.context > 1 ? r->parallel.context : 1;
    const int T = r->model.seq_length, mult = tp * cp;
    if (!r->parallel.sequence_parallel || tp <= 1 || T % mult == 0) return MT_OK;
    char where[1300], sp_where[1300], cps[96] = "";
    mt_recipe_where(r, "model.seq_length", where, sizeof where);
    mt_recipe_where(r, "parallel.sequence_parallel", sp_where, sizeof sp_where);
    if (cp > 1) snprintf(cps, sizeof cps, " x parallel.context = %d", cp);
    return mt_errorf(MT_ERR_CONFIG,
                     "%s: model.seq_length: %d is not divisible by parallel.tensor = %d%s, as sequence "
                     "parallelism (parallel.sequence_parallel: true, %s) needs: each tp rank holds "
                     "seq_length / %s positions of the residual stream; use a seq_length multiple of %d "
                     "(e.g. %d), a tp that divides %d, or set sequence_parallel: false",
                     where, T, tp, cps, sp_where, cp > 1 ? "(tp * cp)" : "tp", mult, (T / mult + 1) * mult,
                     cp > 1 ? T / cp : T);
}

int mt_recipe_head_dim(const mt_recipe *r) {
    if (r->model.head_dim > 0) return r->model.head_dim;
    return r->model.heads > 0 ? r->model.hidden / r->model.heads : 0;
}

