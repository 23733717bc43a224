/* tmpfiles.h — temporary files that name their owner, so nothing is left behind by a run that
 * dies: every temporary of core/data is "FINAL.<tag>.<pid>[.<anything>]" (e.g.
 * "data/c_text_document.bin.tmp.4242", "x.mtidx.tmp.4242.7ffd..."), and
 *  - a run that is interrupted by SIGINT / SIGTERM / SIGHUP removes its registered temporaries
 *    in the handler (mt_tmpfiles_signals_install; cmd/cmd_preprocess.c installs it), then dies
 *    by the same signal;
 *  - the next run removes the temporaries of FINAL whose owner pid is gone
 *    (mt_tmpfiles_remove_stale: kill(pid, 0) fails with ESRCH), which covers SIGKILL and
 *    crashes. Only names of exactly that pattern are touched.
 * Rules kept: the handler calls only unlink, signal and raise (async-signal-safe); the paths it
 * removes are copied into a fixed table, so no allocation happens in it. */
#ifndef MT_TMPFILES_H
#define MT_TMPFILES_H

#include <stddef.h>

#include "core/status.h"

/* "FINAL.<tag>.<pid>" into out. */
mt_status mt_tmpfiles_name(const char *final_path, const char *tag, char *out, size_t n_out);

/* Registers a path for removal if a cleanup signal arrives (the table holds 64): a slot, or -1
 * when the table is full or the path too long. mt_tmpfiles_forget drops it (after a rename or
 * a removal). */
int mt_tmpfiles_register(const char *path);
void mt_tmpfiles_forget(int slot);

/* SIGINT / SIGTERM / SIGHUP: remove every registered path, restore the previous action and
 * re-raise. restore puts the previous actions back. */
void mt_tmpfiles_signals_install(void);
void mt_tmpfiles_signals_restore(void);

/* Removes the entries of final_path's folder named "<basename(final_path)>.<tag>.<pid>" or
 * "<basename(final_path)>.<tag>.<pid>.<suffix>" whose pid (all digits) is not alive and is not
 * ours. *n_removed (may be NULL) counts them. Never fails: a folder that cannot be read is
 * skipped. The _in form looks in `dir` at every name "<x>.<tag>.<pid>..." whose x ends in
 * name_suffix (the index caches: x = "<hash>-<kind>.mtidx"). */
void mt_tmpfiles_remove_stale(const char *final_path, const char *tag, int *n_removed);
void mt_tmpfiles_remove_stale_in(const char *dir, const char *name_suffix, const char *tag,
                                 int *n_removed);

#endif
