/* data_path.h — what is wrong with a data.path entry that does not open as a dataset: a folder,
 * the .bin or .idx file itself, an --output-prefix instead of the dataset name, a prefix with
 * no files (a .bin without its .idx is mt_indexed_open's to report). Used by blended_dataset.c before mt_indexed_open, so the
 * message says exactly what to write instead. */
#ifndef MT_DATA_PATH_H
#define MT_DATA_PATH_H

#include "core/status.h"

/* MT_OK when PREFIX.idx or PREFIX.bin exists (mt_indexed_open then checks the pair, waiting
 * for an .idx being published); else MT_ERR_CONFIG / MT_ERR_IO naming `prefix` as data.path
 * and the fix. */
mt_status mt_data_path_check(const char *prefix);

#endif
