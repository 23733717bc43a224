/* recipe_load.h — for the tests: a shipped recipe (configs/<name>.yaml) with "key=value" overrides,
 * not validated. CHECKs that the file loads and every override applies (test/test.h). */
#ifndef MT_TEST_RECIPE_LOAD_H
#define MT_TEST_RECIPE_LOAD_H

#include <stdio.h>
#include <string.h>

#include "core/recipe/recipe.h"
#include "test/test.h"

static inline void mt_test_recipe_load(mt_recipe *r, const char *name, const char *const *sets) {
    char path[256];
    snprintf(path, sizeof path, "configs/%s.yaml", name);
    mt_recipe_defaults(r);
    mt_status st = mt_recipe_load_file(r, path);
    CHECKF(st == MT_OK, "%s: %s", path, mt_last_error());
    for (int i = 0; sets && sets[i]; i++) {
        char k[128];
        const char *eq = strchr(sets[i], '=');
        snprintf(k, sizeof k, "%.*s", (int)(eq - sets[i]), sets[i]);
        st = mt_recipe_set(r, k, eq + 1, NULL);
        CHECKF(st == MT_OK, "%s: %s", sets[i], mt_last_error());
    }
}

#endif
