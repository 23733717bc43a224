/* recipe_args.c — see recipe_args.h. */
#include "cmd/recipe_args.h"

#include <stdio.h>

int mt_cmd_load_recipe(const char *tool, const char *config, int *argc, char **argv, mt_recipe *r) {
    mt_recipe_defaults(r);
    mt_status st = config ? mt_recipe_load_file(r, config) : MT_OK;
    if (st == MT_OK) st = mt_recipe_apply_args(r, argc, argv);
    if (st != MT_OK) {
        fprintf(stderr, "%s: error: %s\n", tool, mt_last_error());
        return 1;
    }
    if (mt_recipe_unknown_args(*argc, argv) != MT_OK) {
        fprintf(stderr, "%s: error: %s\n", tool, mt_last_error());
        return 2;
    }
    return 0;
}
