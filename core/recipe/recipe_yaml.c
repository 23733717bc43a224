/* recipe_yaml.c — YAML in and out: mt_recipe_load_string/_file (libyaml document API,
 * nested sections, dotted keys, blend lists for data.path, duplicate detection),
 * mt_recipe_write_yaml (every key, reloads to the same struct) and mt_recipe_print_reference
 * (the markdown table in docs/recipe.md).
 * Rules: messages are "<file>:<line>: <key>: <problem>; <fix>"; the parser and every
 * document are freed on every path; nothing here exits. Limits (recipe.h): a file over
 * MT_RECIPE_MAX_BYTES is refused before it is read, and an event-level pass (check_shape)
 * stops at MT_RECIPE_MAX_DEPTH levels or MT_RECIPE_MAX_NODES nodes before libyaml builds the
 * document (whose cost grows with the square of the nesting depth). */
#include <errno.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "core/recipe/recipe_internal.h"

#define MSG_VAL_MAX 80
#define MT_CHECK_RET(call)                                \
    do {                                                  \
        mt_status check_ret_st_ = (call);                 \
        if (check_ret_st_ != MT_OK) return check_ret_st_; \
    } while (0)

static const char *type_name(const mt_recipe_key *key) {
    switch (key->type) {
    case MT_KEY_INT: return "int";
    case MT_KEY_INT64: return "int64";
    case MT_KEY_UINT64: return "uint64";
    case MT_KEY_FLOAT: return "float";
    case MT_KEY_BOOL: return "bool";
    case MT_KEY_ENUM: return "enum";
    case MT_KEY_STRING: return "string";
    }
    return "?";
}

/* ---------- YAML ---------- */

typedef struct {
    mt_recipe *r;
    const char *file;
    yaml_document_t *doc;
    int seen[MT_RECIPE_MAX_KEYS];    /* line of the first setting in this document */
    char sect_name[16][32];          /* sections (mappings) seen in this document */
    int sect_line[16];
    int n_sect;
} load_ctx;

static int node_line(const yaml_node_t *n) { return (int)n->start_mark.line + 1; }

static int is_null_scalar(const yaml_node_t *n) {
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return 0;
    const char *s = (const char *)n->data.scalar.value;
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

static const char *node_kind(const yaml_node_t *n) {
    return n->type == YAML_SEQUENCE_NODE ? "a list" : n->type == YAML_MAPPING_NODE ? "a mapping" : "a value";
}

static mt_status cfg_err(const load_ctx *c, int line, const char *key, const char *problem) {
    return mt_errorf(MT_ERR_CONFIG, "%s:%d: %s: %s", c->file, line, key, problem);
}

/* Builds the blend "w1 p1 w2 p2" from [w1, p1, ...], [p] or [{weight: w, path: p}, ...]. */
static mt_status load_blend(load_ctx *c, int k, const yaml_node_t *seq, int line) {
    const char *key = mt_recipe_keys[k].name;
    char blend[MT_BLEND_MAX], problem[512], e[MSG_VAL_MAX + 8];
    size_t used = 0;
    yaml_node_item_t *it = seq->data.sequence.items.start, *end = seq->data.sequence.items.top;
    int n = (int)(end - it), n_maps = 0;
    for (yaml_node_item_t *i = it; i < end; i++) n_maps += yaml_document_get_node(c->doc, *i)->type == YAML_MAPPING_NODE;
    if (n == 0) return cfg_err(c, line, key, "empty list; give a prefix or weight, path pairs");
    if (n_maps && n_maps != n)
        return cfg_err(c, line, key, "mixes {weight, path} entries with plain items; use one form");
    if (!n_maps && n > 1 && n % 2)
        return cfg_err(c, line, key, "a blend is a list of weight, path pairs (an even number of "
                       "items); write [0.3, prefixA, 0.7, prefixB]");
    int n_pairs = n_maps ? n : (n == 1 ? 1 : n / 2);
    for (int p = 0; p < n_pairs; p++) {
        const yaml_node_t *w = NULL, *path = NULL;
        if (n_maps) {
            const yaml_node_t *m = yaml_document_get_node(c->doc, it[p]);
            for (yaml_node_pair_t *q = m->data.mapping.pairs.start; q < m->data.mapping.pairs.top; q++) {
                const yaml_node_t *kn = yaml_document_get_node(c->doc, q->key);
                const yaml_node_t *vn = yaml_document_get_node(c->doc, q->value);
                const char *name = kn->type == YAML_SCALAR_NODE ? (const char *)kn->data.scalar.value : "";
                if (!strcmp(name, "weight") && !w) w = vn;
                else if (!strcmp(name, "path") && !path) path = vn;
                else {
                    snprintf(problem, sizeof problem, "unexpected key '%s' in a blend entry; write "
                             "{weight: 0.5, path: prefix}", mt_recipe_echo(name, e, sizeof e));
                    return cfg_err(c, node_line(kn), key, problem);
                }
            }
            if (!w || !path)
                return cfg_err(c, node_line(m), key, "a blend entry needs both weight and path; "
                               "write {weight: 0.5, path: prefix}");
        } else if (n == 1) {
            path = yaml_document_get_node(c->doc, it[0]);
        } else {
            w = yaml_document_get_node(c->doc, it[2 * p]);
            path = yaml_document_get_node(c->doc, it[2 * p + 1]);
        }
        if ((w && w->type != YAML_SCALAR_NODE) || path->type != YAML_SCALAR_NODE)
            return cfg_err(c, node_line(path), key, "blend items must be plain values; write "
                           "[0.3, prefixA, 0.7, prefixB]");
        const char *ps = (const char *)path->data.scalar.value;
        if (w) {
            const char *ws = (const char *)w->data.scalar.value;
            double wv;
            if (mt_recipe_parse_double(ws, &wv) || wv < 0) {
                snprintf(problem, sizeof problem, "blend weight '%s' is not a non-negative number; "
                         "write [0.3, prefixA, 0.7, prefixB]", mt_recipe_echo(ws, e, sizeof e));
                return cfg_err(c, node_line(w), key, problem);
            }
            size_t nw = strlen(ws);
            if (used + nw + 2 >= sizeof blend) goto too_long;
            memcpy(blend + used, ws, nw);
            used += nw;
            blend[used++] = ' ';
        }
        size_t np = strlen(ps);
        if (!np || strpbrk(ps, " \t\r\n") || np != path->data.scalar.length) {
            snprintf(problem, sizeof problem, "blend path '%s' is empty or has spaces; rename the "
                     "dataset (or link it) to a path without spaces", mt_recipe_echo(ps, e, sizeof e));
            return cfg_err(c, node_line(path), key, problem);
        }
        if (used + np + 2 >= sizeof blend) goto too_long;
        memcpy(blend + used, ps, np);
        used += np;
        blend[used++] = ' ';
    }
    blend[used ? used - 1 : 0] = 0;
    if (mt_recipe_parse_value(c->r, k, blend, problem, sizeof problem) != MT_OK)
        return cfg_err(c, line, key, problem);
    return MT_OK;
too_long:
    snprintf(problem, sizeof problem, "the blend is longer than %d bytes; use shorter paths", MT_BLEND_MAX - 1);
    return cfg_err(c, line, key, problem);
}

static mt_status load_key(load_ctx *c, int k, const yaml_node_t *vn, int line) {
    const mt_recipe_key *key = &mt_recipe_keys[k];
    char problem[512];
    if (c->seen[k]) {
        snprintf(problem, sizeof problem, "duplicate key (first set at line %d); keep one of them", c->seen[k]);
        return cfg_err(c, line, key->name, problem);
    }
    c->seen[k] = line;
    if (vn->type == YAML_SEQUENCE_NODE && (key->flags & MT_KF_BLEND)) {
        MT_CHECK_RET(load_blend(c, k, vn, line));
    } else if (vn->type != YAML_SCALAR_NODE) {
        snprintf(problem, sizeof problem, "expected a single value, got %s; write `%s: value`",
                 node_kind(vn), mt_recipe_leaf(key->name));
        return cfg_err(c, line, key->name, problem);
    } else {
        const char *text = (const char *)vn->data.scalar.value;
        if (strlen(text) != vn->data.scalar.length)
            return cfg_err(c, line, key->name, "the value contains a NUL byte; remove it");
        if (is_null_scalar(vn)) {
            if (key->type != MT_KEY_STRING) {
                char def[64];
                snprintf(def, sizeof def, "%s", key->def);
                snprintf(problem, sizeof problem, "no value; give one, or delete the line to keep "
                         "the default (%s)", def[0] ? def : "\"\"");
                return cfg_err(c, line, key->name, problem);
            }
            text = "";
        }
        if (mt_recipe_parse_value(c->r, k, text, problem, sizeof problem) != MT_OK)
            return cfg_err(c, line, key->name, problem);
    }
    c->r->origin.line[k] = line;
    c->r->origin.flag[k] = NULL;
    return MT_OK;
}

static mt_status load_mapping(load_ctx *c, const yaml_node_t *map, const char *prefix, int depth) {
    char name[256], problem[512], e[MSG_VAL_MAX + 8];
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        const yaml_node_t *kn = yaml_document_get_node(c->doc, p->key);
        const yaml_node_t *vn = yaml_document_get_node(c->doc, p->value);
        int line = node_line(kn);
        if (kn->type != YAML_SCALAR_NODE) {
            snprintf(problem, sizeof problem, "a key must be a plain name, got %s; write `name: value`", node_kind(kn));
            return cfg_err(c, line, prefix[0] ? prefix : "recipe", problem);
        }
        const char *kt = (const char *)kn->data.scalar.value;
        int fits = snprintf(name, sizeof name, "%s%s%s", prefix, prefix[0] ? "." : "", kt) < (int)sizeof name &&
                   strlen(kt) == kn->data.scalar.length;
        int k = fits ? mt_recipe_key_index(name) : -1;
        if (k < 0 && fits && !strcmp(name, "logging.tensorboard")) /* renamed: recipes and saves of older builds */
            k = mt_recipe_key_index("logging.tensorboard_dir");
        if (k >= 0) {
            MT_CHECK_RET(load_key(c, k, vn, line));
        } else if (fits && mt_recipe_is_prefix(name)) {
            if (vn->type == YAML_MAPPING_NODE || is_null_scalar(vn)) {
                for (int s = 0; s < c->n_sect; s++)
                    if (!strcmp(c->sect_name[s], name)) {
                        snprintf(problem, sizeof problem, "duplicate section (first at line %d); merge "
                                 "the two into one", c->sect_line[s]);
                        return cfg_err(c, line, name, problem);
                    }
                if (c->n_sect < 16 && strlen(name) < sizeof c->sect_name[0]) {
                    memcpy(c->sect_name[c->n_sect], name, strlen(name) + 1);
                    c->sect_line[c->n_sect++] = line;
                }
                if (vn->type == YAML_MAPPING_NODE) {
                    if (depth >= 4) return cfg_err(c, line, name, "nested too deeply; see docs/recipe.md");
                    MT_CHECK_RET(load_mapping(c, vn, name, depth + 1));
                }
            } else {
                snprintf(problem, sizeof problem, "is a section: expected its keys under it (e.g. "
                         "`%s:` then indented `key: value` lines), got %s", mt_recipe_leaf(name),
                         vn->type == YAML_SCALAR_NODE ? "a value" : node_kind(vn));
                return cfg_err(c, line, name, problem);
            }
        } else {
            const char *shown = fits ? name : mt_recipe_echo(kt, e, sizeof e);
            if (!prefix[0] && !strchr(shown, '.')) mt_recipe_unknown_problem("section", shown, 1, problem, sizeof problem);
            else mt_recipe_unknown_problem("key", shown, 0, problem, sizeof problem);
            return cfg_err(c, line, shown, problem);
        }
    }
    return MT_OK;
}

static mt_status yaml_syntax_error(const yaml_parser_t *p, const char *file) {
    if (p->error == YAML_MEMORY_ERROR) return mt_errorf(MT_ERR_OOM, "%s: out of memory while parsing YAML", file);
    size_t line = p->problem_mark.line + 1, col = p->problem_mark.column + 1;
    if (p->error == YAML_READER_ERROR)
        return mt_errorf(MT_ERR_CONFIG, "%s: YAML: %s (byte %zu); save the file as UTF-8 text",
                         file, p->problem ? p->problem : "unreadable input", p->problem_offset);
    return mt_errorf(MT_ERR_CONFIG, "%s:%zu: YAML syntax error: %s%s%s (column %zu); check the "
                     "indentation, the ':' after each key and the quotes", file, line,
                     p->problem ? p->problem : "invalid YAML", p->context ? " " : "",
                     p->context ? p->context : "", col);
}

static mt_status too_big(const char *file, size_t n_bytes) {
    return mt_errorf(MT_ERR_CONFIG, "%s: recipe: %zu bytes, more than the limit of %zu bytes (%zu MiB); a recipe "
                     "is a few KiB of YAML: is this the right file?", file, n_bytes, MT_RECIPE_MAX_BYTES,
                     MT_RECIPE_MAX_BYTES >> 20);
}

/* One pass over the parser's events, before the document is built: refuses nesting deeper
 * than MT_RECIPE_MAX_DEPTH and more than MT_RECIPE_MAX_NODES nodes at the event that crosses
 * the limit, so the cost is bounded whatever the input. Syntax errors are reported as the
 * loader would report them. */
static mt_status check_shape(const char *yaml, size_t n_bytes, const char *file) {
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) return mt_errorf(MT_ERR_OOM, "%s: cannot initialise libyaml", file);
    yaml_parser_set_input_string(&p, (const unsigned char *)yaml, n_bytes);
    mt_status st = MT_OK;
    long depth = 0, nodes = 0;
    for (int done = 0; !done && st == MT_OK;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) { st = yaml_syntax_error(&p, file); break; }
        const int line = (int)ev.start_mark.line + 1;
        switch (ev.type) {
        case YAML_STREAM_END_EVENT: done = 1; break;
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (++depth > MT_RECIPE_MAX_DEPTH)
                st = mt_errorf(MT_ERR_CONFIG, "%s:%d: recipe: mappings and lists nested more than %d levels deep "
                               "(the limit); a recipe needs 4 at most (the top level, a section, model.moe or a "
                               "blend of {weight, path} entries): is this the right file?", file, line,
                               MT_RECIPE_MAX_DEPTH);
            /* fall through - a collection is a node too */
        case YAML_SCALAR_EVENT:
        case YAML_ALIAS_EVENT:
            if (st == MT_OK && ++nodes > MT_RECIPE_MAX_NODES)
                st = mt_errorf(MT_ERR_CONFIG, "%s:%d: recipe: more than %d keys and values (the limit); a recipe "
                               "has a few hundred: is this the right file?", file, line, MT_RECIPE_MAX_NODES);
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT: depth--; break;
        default: break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    return st;
}

mt_status mt_recipe_load_string(mt_recipe *r, const char *yaml, size_t n_bytes, const char *name) {
    mt_status st = MT_OK;
    yaml_parser_t parser;
    yaml_document_t doc, extra;
    int have_doc = 0, have_extra = 0;
    load_ctx *c = NULL;
    if (!name) name = "<string>";
    if (!yaml && n_bytes) return mt_errorf(MT_ERR_INTERNAL, "%s: mt_recipe_load_string: NULL text", name);
    if (n_bytes > MT_RECIPE_MAX_BYTES) return too_big(name, n_bytes);
    MT_CHECK_RET(check_shape(yaml ? yaml : "", n_bytes, name));
    if (!yaml_parser_initialize(&parser)) return mt_errorf(MT_ERR_OOM, "%s: cannot initialise libyaml", name);
    yaml_parser_set_input_string(&parser, (const unsigned char *)(yaml ? yaml : ""), n_bytes);
    if (name != r->origin.file) snprintf(r->origin.file, sizeof r->origin.file, "%s", name);
    if (!yaml_parser_load(&parser, &doc)) { st = yaml_syntax_error(&parser, r->origin.file); goto out; }
    have_doc = 1;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root) {
        /* a second document is a mistake (a stray '---'); the parser must also reach the end */
        if (!yaml_parser_load(&parser, &extra)) { st = yaml_syntax_error(&parser, r->origin.file); goto out; }
        have_extra = 1;
        yaml_node_t *root2 = yaml_document_get_root_node(&extra);
        if (root2) {
            st = mt_errorf(MT_ERR_CONFIG, "%s:%d: recipe: a second YAML document ('---'); a recipe is "
                           "one document, delete the extra '---'", r->origin.file, node_line(root2));
            goto out;
        }
    }
    if (!root || is_null_scalar(root)) goto out; /* an empty recipe changes nothing */
    if (root->type != YAML_MAPPING_NODE) {
        st = mt_errorf(MT_ERR_CONFIG, "%s:%d: recipe: expected a mapping of sections (model:, "
                       "parallel:, training:, ...), got %s; see configs/gpt-tiny.yaml", r->origin.file,
                       node_line(root), node_kind(root));
        goto out;
    }
    c = calloc(1, sizeof *c);
    if (!c) { st = mt_errorf(MT_ERR_OOM, "%s: out of memory", name); goto out; }
    c->r = r;
    c->file = r->origin.file;
    c->doc = &doc;
    st = load_mapping(c, root, "", 0);
out:
    free(c);
    if (have_extra) yaml_document_delete(&extra);
    if (have_doc) yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return st;
}

mt_status mt_recipe_load_file(mt_recipe *r, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return mt_errorf(MT_ERR_IO, "%s: cannot open the recipe: %s; check the path (configs/ holds "
                             "the shipped recipes)", path, strerror(errno));
    char *buf = NULL;
    size_t n = 0, cap = 0;
    mt_status st = MT_OK;
    struct stat sb; /* a regular file's size is known: refuse a huge one before reading a byte */
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) && (uintmax_t)sb.st_size > MT_RECIPE_MAX_BYTES) {
        st = too_big(path, (size_t)sb.st_size);
        goto out;
    }
    for (;;) {
        if (n > MT_RECIPE_MAX_BYTES) { st = too_big(path, n); goto out; } /* a pipe or device: read no further */
        if (cap - n < 4096) {
            size_t ncap = cap ? 2 * cap : 16384;
            char *nb = realloc(buf, ncap);
            if (!nb) { st = mt_errorf(MT_ERR_OOM, "%s: out of memory reading the recipe", path); goto out; }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) { st = mt_errorf(MT_ERR_IO, "%s: read error: %s", path, strerror(errno)); goto out; }
    st = mt_recipe_load_string(r, buf, n, path);
out:
    free(buf);
    fclose(f);
    return st;
}


/* ---------- writing ---------- */

/* A double-quoted YAML scalar that libyaml reads back byte for byte: printable code points
 * as they are, everything else (controls, NEL, LS/PS, BOM, non-characters) escaped.
 * Strings are valid UTF-8 (mt_recipe_parse_value refuses anything else). */
static void write_yaml_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        uint32_t cp = 0;
        int n = mt_recipe_utf8_next(p, &cp);
        if (!n) { fprintf(f, "\\x%02x", *p++); continue; } /* not reached for parsed values */
        int printable = (cp >= 0x20 && cp <= 0x7E) || (cp >= 0xA0 && cp <= 0xD7FF) ||
                        (cp >= 0xE000 && cp <= 0xFFFD && cp != 0xFEFF) || cp >= 0x10000;
        if (cp == 0x2028 || cp == 0x2029) printable = 0;
        if (cp == '"' || cp == '\\') fprintf(f, "\\%c", (int)cp);
        else if (cp == '\n') fputs("\\n", f);
        else if (cp == '\t') fputs("\\t", f);
        else if (printable) fwrite(p, 1, (size_t)n, f);
        else if (cp < 0x100) fprintf(f, "\\x%02x", (unsigned)cp);
        else if (cp < 0x10000) fprintf(f, "\\u%04x", (unsigned)cp);
        else fprintf(f, "\\U%08x", (unsigned)cp);
        p += n;
    }
    fputc('"', f);
}

/* Splits "a.b.c" into components; returns the count (<= 4). */
static int split_name(const char *name, char parts[4][32]) {
    int n = 0;
    const char *s = name;
    while (n < 4) {
        const char *d = strchr(s, '.');
        size_t len = d ? (size_t)(d - s) : strlen(s);
        snprintf(parts[n], sizeof parts[n], "%.*s", (int)len, s);
        n++;
        if (!d) break;
        s = d + 1;
    }
    return n;
}

void mt_recipe_write_yaml(FILE *f, const mt_recipe *r) {
    char prev[4][32] = { { 0 } }, parts[4][32], val[MT_BLEND_MAX];
    int n_prev = 0;
    fprintf(f, "# mtrain recipe: every key with the value in effect (written by mt_recipe_write_yaml).\n"
               "# Key reference: docs/recipe.md\n");
    for (int k = 0; k < mt_recipe_n_keys; k++) {
        const mt_recipe_key *key = &mt_recipe_keys[k];
        int n = split_name(key->name, parts), same = 0;
        while (same < n - 1 && same < n_prev - 1 && !strcmp(parts[same], prev[same])) same++;
        for (int d = same; d < n - 1; d++) fprintf(f, "%*s%s:\n", 2 * d, "", parts[d]);
        fprintf(f, "%*s%s: ", 2 * (n - 1), "", parts[n - 1]);
        mt_recipe_format_value(r, k, val, sizeof val);
        if (key->type == MT_KEY_STRING) write_yaml_string(f, val);
        else if ((key->flags & MT_KF_AUTO) && !strcmp(val, "0")) fputs("auto", f);
        else fputs(val, f);
        fprintf(f, "  # %s\n", key->help);
        memcpy(prev, parts, sizeof prev);
        n_prev = n;
    }
}

static void md_cell(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '|') fputs("\\|", f);
        else fputc(*s, f);
    }
}

void mt_recipe_print_reference(FILE *f) {
    fprintf(f, "| key | type | default | unit | meaning |\n|---|---|---|---|---|\n");
    for (int k = 0; k < mt_recipe_n_keys; k++) {
        const mt_recipe_key *key = &mt_recipe_keys[k];
        fprintf(f, "| `%s` | ", key->name);
        if (key->type == MT_KEY_ENUM) {
            for (int i = 0; key->enum_names[i]; i++) fprintf(f, "%s`%s`", i ? " \\| " : "", key->enum_names[i]);
        } else {
            fputs(type_name(key), f);
            if (key->type == MT_KEY_INT || key->type == MT_KEY_INT64 || key->type == MT_KEY_FLOAT) {
                char lo[32], hi[32];
                mt_recipe_fmt_num(lo, sizeof lo, key->min, key->type != MT_KEY_FLOAT);
                mt_recipe_fmt_num(hi, sizeof hi, key->max, key->type != MT_KEY_FLOAT);
                fprintf(f, " %s%s, %s%s", (key->flags & MT_KF_MIN_EXCL) ? "(" : "[", lo, hi,
                        (key->flags & MT_KF_MAX_EXCL) ? ")" : "]");
            }
        }
        fputs(" | ", f);
        if (key->doc_default) md_cell(f, key->doc_default);
        else if (key->flags & MT_KF_REQUIRED) fputs("required", f);
        else if (key->type == MT_KEY_STRING) {
            fputs("`\"", f);
            md_cell(f, key->def); /* "<|endoftext|>" */
            fputs("\"`", f);
        }
        else fprintf(f, "`%s`", key->def);
        fprintf(f, " | %s | ", key->unit);
        md_cell(f, key->help);
        fputs(" |\n", f);
    }
    fprintf(f, "\nMegatron-LM style flags (`--flag value` or `--flag=value`; `--set key=value` sets any key):\n\n"
               "| flag | key | value |\n|---|---|---|\n");
    for (int i = 0; i < mt_recipe_n_aliases; i++) {
        const mt_recipe_alias *a = &mt_recipe_aliases[i];
        fprintf(f, "| `%s` | `%s` | %s%s%s |\n", a->flag, a->key, a->fixed ? "`" : "",
                a->fixed ? a->fixed : "argument", a->fixed ? "` (no argument)" : "");
    }
}

