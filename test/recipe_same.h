/* recipe_same.h — whether two recipes hold the same values (every section; where each value came
 * from aside): the round-trip checks of test_recipe.c and the recipe fuzzer (test/fuzz). */
#ifndef MT_TEST_RECIPE_SAME_H
#define MT_TEST_RECIPE_SAME_H

#include <string.h>

#include "core/recipe/recipe.h"

static inline int recipe_same_values(const mt_recipe *a, const mt_recipe *b) {
    return !memcmp(&a->model, &b->model, sizeof a->model) &&
           !memcmp(&a->parallel, &b->parallel, sizeof a->parallel) &&
           !memcmp(&a->training, &b->training, sizeof a->training) &&
           !memcmp(&a->optimizer, &b->optimizer, sizeof a->optimizer) &&
           !memcmp(&a->data, &b->data, sizeof a->data) &&
           !memcmp(&a->checkpoint, &b->checkpoint, sizeof a->checkpoint) &&
           !memcmp(&a->logging, &b->logging, sizeof a->logging);
}

#endif
