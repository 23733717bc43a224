/* status.c — the per-thread error message behind mt_errorf / mt_last_error. */
#include "core/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char g_msg[4096];

mt_status mt_errorf(mt_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    return st;
}

mt_status mt_error_context(mt_status st, const char *fmt, ...) {
    char prefix[1024], old[sizeof g_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, g_msg, sizeof old);
    size_t n_prefix = strlen(prefix);
    if (n_prefix >= sizeof g_msg) n_prefix = sizeof g_msg - 1;
    memcpy(g_msg, prefix, n_prefix);
    size_t n_old = strnlen(old, sizeof old - 1);
    if (n_old > sizeof g_msg - 1 - n_prefix) n_old = sizeof g_msg - 1 - n_prefix;
    memcpy(g_msg + n_prefix, old, n_old);
    g_msg[n_prefix + n_old] = 0;
    return st;
}

const char *mt_last_error(void) { return g_msg[0] ? g_msg : "(no message)"; }
void mt_clear_error(void) { g_msg[0] = 0; }

const char *mt_status_name(mt_status st) {
    switch (st) {
    case MT_OK: return "ok";
    case MT_ERR_CONFIG: return "config error";
    case MT_ERR_IO: return "I/O error";
    case MT_ERR_DATA: return "data error";
    case MT_ERR_OOM: return "out of memory";
    case MT_ERR_CUDA: return "CUDA error";
    case MT_ERR_NCCL: return "NCCL error";
    case MT_ERR_PMIX: return "PMIx error";
    case MT_ERR_PEER: return "peer failure";
    case MT_ERR_UNSUPPORTED: return "unsupported";
    case MT_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}
