/* cmd_ranks.h — the start and the error exit shared by the commands that run as ranks of a job
 * (training and `mtrain logprobs`): bootstrap, recipe validation for the world size, the
 * supported-feature check, the backend, the process groups; on an error the message with the
 * rank's prefix, the communicators aborted so no peer waits, and the exit code. */
#ifndef MT_CMD_RANKS_H
#define MT_CMD_RANKS_H

#include <stddef.h>

#include "core/backend.h"
#include "core/recipe/recipe.h"
#include "parallel/parallel_state.h"

/* Prints "[prefix] TOOL: error: <last error>" on stderr, aborts and frees ps; returns the exit
 * code: MT_EXIT_PEER when a peer failed (MT_ERR_PEER), 1 otherwise. */
int mt_cmd_fail_rank(const char *tool, mt_parallel_state *ps, mt_status st);

/* Bootstraps ps, validates r for its world size, checks that the trainer supports r (a note in
 * support_note), creates the backend in *be (a note in note; the two may be the same buffer,
 * the backend's note then replaces the other) and sets up the process groups on it. Returns 0,
 * or the exit code of mt_cmd_fail_rank (be destroyed). */
int mt_cmd_start_ranks(const char *tool, mt_recipe *r, mt_parallel_state *ps, mt_backend *be,
                       char *support_note, size_t support_note_bytes, char *note, size_t note_bytes);

#endif
