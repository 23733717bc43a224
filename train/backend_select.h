/* backend_select.h — choose and create the backend a recipe asks for. */
#ifndef MT_BACKEND_SELECT_H
#define MT_BACKEND_SELECT_H

#include <stddef.h>

#include "core/backend.h"
#include "core/recipe/recipe.h"

/* training.backend cpu | cuda | auto; CPU threads = training.threads or cores / local_ranks.
 * `note` receives a line to print when auto fell back to the CPU ("" otherwise). */
mt_status mt_backend_select(const mt_recipe *r, int local_ranks, mt_backend *be, char *note, size_t note_bytes);

#endif
