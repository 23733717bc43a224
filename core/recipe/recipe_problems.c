/* recipe_problems.c — the problems of one command line, gathered so that a user sees them all in
 * one report (refused flags, values that do not parse, Megatron rules, unknown flags, layout),
 * not one round of fixes at a time. Each problem is one line "  <flag or key>: <problem>". */
#include <string.h>

#include "core/recipe/recipe_internal.h"

void mt_recipe_problem_add(mt_recipe_problems *p, const char *text) {
    /* a message may hold several lines (the layout checks give one per problem) */
    while (text && *text) {
        const char *e = strchr(text, '\n');
        const size_t n = e ? (size_t)(e - text) : strlen(text);
        if (n > 0) {
            if (p->used + n + 4 < sizeof p->text) {
                memcpy(p->text + p->used, "\n  ", 3);
                memcpy(p->text + p->used + 3, text, n);
                p->used += n + 3;
                p->text[p->used] = 0;
            } else {
                p->n_dropped++;
            }
            p->n++;
        }
        text = e ? e + 1 : NULL;
    }
}

void mt_recipe_problem_status(mt_recipe_problems *p, mt_status st) {
    if (st == MT_OK) return;
    if (p->st == MT_OK) p->st = st;
    mt_recipe_problem_add(p, mt_last_error());
}

mt_status mt_recipe_problem_report(const mt_recipe_problems *p) {
    if (p->n == 0) return MT_OK;
    return mt_errorf(p->st != MT_OK ? p->st : MT_ERR_CONFIG, "%d problem%s with the command line (every one at "
                     "once; docs/megatron-flags.md says what each Megatron flag does here):%s%s", p->n,
                     p->n == 1 ? "" : "s", p->text, p->n_dropped ? "\n  (more problems not shown)" : "");
}
