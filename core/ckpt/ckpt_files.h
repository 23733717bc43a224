/* ckpt_files.h — the checkpoint folder on disk, Megatron's layout:
 *   DIR/latest_checkpointed_iteration.txt   the tracker: the iteration of the newest complete save
 *   DIR/iter_0000500/                       one save: manifest.json + rank_NNNNN.safetensors
 *   DIR/iter_0000500.tmp/                   a save in progress (never loaded; removed by the next save)
 * and the file-system steps that make a save atomic: fsync of files and folders, rename, the
 * tracker replaced last by rename of a fsynced temporary file.
 * Rule: nothing here leaves a partial file under a name a loader reads. */
#ifndef MT_CKPT_FILES_H
#define MT_CKPT_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#define MT_CKPT_PATH_MAX 4200

/* DIR/iter_%07d (suffix appended, e.g. ".tmp"). */
void mt_ckpt_iter_path(const char *root, int64_t iteration, const char *suffix, char *buf, size_t n_bytes);
/* The tracker's iteration. MT_ERR_IO when DIR has no tracker (message says so), MT_ERR_DATA when
 * it does not hold a number. */
mt_status mt_ckpt_read_tracker(const char *root, int64_t *iteration);
/* Replaces the tracker atomically (temporary file, fsync, rename, fsync of DIR). */
mt_status mt_ckpt_write_tracker(const char *root, int64_t iteration, int do_fsync);
/* fsync of a folder (a rename inside it becomes durable). */
mt_status mt_fsync_dir(const char *dir);
/* Removes a folder of plain files (a save: no subfolders), then the folder. Missing is OK. */
mt_status mt_remove_flat_dir(const char *dir);
/* mkdir -p */
mt_status mt_mkdirs(const char *dir);
/* Complete saves in DIR (iter_NNNNNNN folders holding a manifest.json), ascending: up to max
 * iterations into its (may be NULL); the count is returned (-1 when DIR cannot be read). */
int mt_ckpt_list_saves(const char *root, int64_t *its, int max);
/* Removes save N: renamed to iter_N.del first (a kill during the removal leaves that name, which
 * mt_ckpt_sweep_remnants removes, never iter_N/ without its manifest), then removed. */
mt_status mt_ckpt_remove_save(const char *root, int64_t iteration);
/* checkpoint.keep: removes the complete saves beyond the newest `keep` (mt_ckpt_remove_save), never
 * iteration `protect`. */
mt_status mt_ckpt_apply_keep(const char *root, int keep, int64_t protect);
/* Removes what interrupted saves and removals left, for a caller that knows nothing else writes
 * in DIR (it holds the save folder's lock and no save of its own is in flight): iter_N.tmp and
 * iter_N.del folders, and folders under a final name iter_N/ without a manifest for N below
 * `below` (the tracker's iteration). iter_N.old is kept: a replace cut short may leave the only
 * copy of save N there. *n_removed counts them. */
mt_status mt_ckpt_sweep_remnants(const char *root, int64_t below, int *n_removed);
/* Whether `dir` is itself one save (holds manifest.json). */
int mt_ckpt_is_save_dir(const char *dir);

#endif
