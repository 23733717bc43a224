/* output_lock.h — one writer per dataset name: `mtrain preprocess` holds an exclusive flock on
 * "NAME.lock" (NAME = PREFIX_<key>_document) from before its first write until its outputs are
 * published, with its pid written in the file, so a second run on the same --output-prefix is
 * refused with the holder's pid instead of mixing its tokens into the first run's files.
 * The lock file is removed by its holder before release; a file left by a killed run is not a
 * lock (flock dies with its owner) and is reused. Acquire re-checks that the locked file is still
 * the one at NAME.lock (a holder may have removed it meanwhile), so removal is race-free. */
#ifndef MT_OUTPUT_LOCK_H
#define MT_OUTPUT_LOCK_H

#include "core/status.h"

typedef struct {
    int fd;            /* -1 when not held */
    char path[4200];   /* NAME.lock */
} mt_output_lock;

/* Takes the lock of dataset NAME without waiting. MT_ERR_IO naming --output-prefix `prefix`,
 * NAME and the holder's pid when another process holds it (or the folder is not writable). */
mt_status mt_output_lock_acquire(mt_output_lock *l, const char *prefix, const char *name);
/* Removes NAME.lock and releases it. Safe on a lock never acquired (fd = -1 or zeroed by
 * mt_output_lock_init). */
void mt_output_lock_release(mt_output_lock *l);
void mt_output_lock_init(mt_output_lock *l);

#endif
