/* status.h — status codes and the error message every failing call leaves behind.
 * Rule: library code (core/, parallel/, cuda/) never exits; it returns an mt_status and
 * sets a message naming the file / key / rank / tensor at fault and the fix. Only cmd/ exits. */
#ifndef MT_STATUS_H
#define MT_STATUS_H

typedef enum {
    MT_OK = 0,
    MT_ERR_CONFIG,      /* bad recipe, flag or layout */
    MT_ERR_IO,          /* a file could not be read / written */
    MT_ERR_DATA,        /* a file was read but its contents are wrong (corrupt, truncated) */
    MT_ERR_OOM,         /* allocation failed */
    MT_ERR_CUDA,        /* CUDA runtime / cuBLASLt error, or no GPU */
    MT_ERR_NCCL,
    MT_ERR_PMIX,
    MT_ERR_PEER,        /* another rank died or timed out */
    MT_ERR_UNSUPPORTED, /* valid request this build / backend cannot do yet */
    MT_ERR_INTERNAL     /* a bug in mtrain */
} mt_status;

/* The exit status of a command whose command line or recipe is wrong (an unknown or refused flag, a
 * value out of range, an impossible layout, a feature this build cannot run): every attempt would
 * fail the same way, so `mtrain launch --max-restarts` does not restart it. Other failures exit 1,
 * or MT_EXIT_PEER. */
#define MT_EXIT_CONFIG 2
/* The exit status of a rank that stops because another rank failed first (MT_ERR_PEER: a fence or
 * collective lost a peer): a consequence, which `mtrain launch` looks past for the root cause. */
#define MT_EXIT_PEER 3

/* Sets the thread's error message (printf-style) and returns st, so callers can write
 * `return mt_errorf(MT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));` */
mt_status mt_errorf(mt_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prepends context to the current message ("while loading X: " + old message); returns st. */
mt_status mt_error_context(mt_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *mt_last_error(void);
void mt_clear_error(void);
const char *mt_status_name(mt_status st);

/* NCCL-style propagation: needs `mt_status st` in scope and an `out:` label. */
#define MT_CHECK(call)                        \
    do {                                      \
        mt_status mt_check_st_ = (call);      \
        if (mt_check_st_ != MT_OK) {          \
            st = mt_check_st_;                \
            goto out;                         \
        }                                     \
    } while (0)

#endif
