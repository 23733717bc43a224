/* backend.c — the few backend helpers that do not belong to any one backend: dtype names and
 * destroying a backend through its table. Rule: no device code here; backends live in
 * cpu_*.c and cuda/. */
#include "core/backend.h"

#include <string.h>

const char *mt_dtype_name(mt_dtype dt) {
    switch (dt) {
    case MT_F32: return "f32";
    case MT_BF16: return "bf16";
    }
    return "unknown-dtype";
}

void mt_backend_destroy(mt_backend *be) {
    if (!be) return;
    if (be->i && be->i->destroy) be->i->destroy(be);
    memset(be, 0, sizeof *be);
}
