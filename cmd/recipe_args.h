/* recipe_args.h — the recipe of a command: its --config file (optional for training: the
 * defaults, so Megatron's flags alone define a run), then the --set overrides and Megatron flags
 * of argv; every argument left over is reported in one message with the nearest known flags.
 * Shared by train / check, plan, generate, logprobs and import. */
#ifndef MT_CMD_RECIPE_ARGS_H
#define MT_CMD_RECIPE_ARGS_H

#include <stddef.h>

#include "core/recipe/recipe.h"

/* Fills *r from config (NULL: the defaults) and argv[0, *argc) (consumed in place). On failure
 * prints "TOOL: error: ..." on stderr. Returns the exit code: 0, 1 (the file or an override is
 * wrong), 2 (unknown arguments). */
int mt_cmd_load_recipe(const char *tool, const char *config, int *argc, char **argv, mt_recipe *r);
/* The same without printing: every problem of the file or the command line into report (refused
 * flags, values, Megatron rules and unknown arguments together). *file_ok: the --config file
 * loaded (so the recipe is worth validating for more problems). Returns the exit code. */
int mt_cmd_recipe_problems(const char *config, int *argc, char **argv, mt_recipe *r, char *report, size_t n_report,
                           int *file_ok);

#endif
