/* cmd_ranks.c — see cmd_ranks.h. */
#include "cmd/cmd_ranks.h"

#include <stdio.h>

#include "train/backend_select.h"
#include "train/train.h"

int mt_cmd_fail_rank(const char *tool, mt_parallel_state *ps, mt_status st) {
    if (ps->size > 1)
        fprintf(stderr, "%s %s: error: %s\n", ps->prefix, tool, mt_last_error());
    else
        fprintf(stderr, "%s: error: %s\n", tool, mt_last_error());
    mt_pstate_abort(ps);
    mt_pstate_free(ps);
    return st == MT_ERR_PEER ? MT_EXIT_PEER : 1;
}

int mt_cmd_start_ranks(const char *tool, mt_recipe *r, mt_parallel_state *ps, mt_backend *be,
                       char *support_note, size_t support_note_bytes, char *note, size_t note_bytes) {
    mt_status st = mt_pstate_bootstrap(ps, r->parallel.timeout_s);
    if (st != MT_OK) return mt_cmd_fail_rank(tool, ps, st);
    /* the recipe against the world it runs in: a wrong recipe exits MT_EXIT_CONFIG (not restarted) */
    st = mt_recipe_validate(r, ps->size);
    if (st == MT_OK) st = mt_train_check_supported(r, support_note, support_note_bytes);
    if (st != MT_OK) {
        mt_cmd_fail_rank(tool, ps, st);
        return MT_EXIT_CONFIG;
    }
    /* the backend first: where its buffers live decides which communicator can carry them */
    if (st == MT_OK) st = mt_backend_select(r, ps->size, ps->local_rank, ps->local_size, be, note, note_bytes);
    if (st != MT_OK) return mt_cmd_fail_rank(tool, ps, st);
    st = mt_pstate_setup(ps, r, be);
    if (st != MT_OK) {
        mt_backend_destroy(be);
        return mt_cmd_fail_rank(tool, ps, st);
    }
    return 0;
}
