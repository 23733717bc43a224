/* metrics.c — formats the iteration and validation lines as Megatron prints them, and
 * writes the same numbers as JSON lines, one write(2) per line so a crash loses nothing.
 * The JSON file is opened without O_TRUNC, locked with an fcntl write lock (so a second run
 * given the same path is refused, with the holder's pid, before it truncates anything) and
 * then emptied. Every write is checked: a full disk or a file-size limit is an MT_ERR_IO
 * naming the file and errno's text, and the file is cut back to its last whole line, never
 * left ending in a fragment. The stdout lines are best effort (errors ignored). */
#include "train/metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FIX "free space on that filesystem (or raise the file-size limit, ulimit -f) or write the metrics " \
            "elsewhere (logging.metrics in the recipe, or --metrics PATH), then resume from the last "   \
            "checkpoint (--load)"

/* Takes the whole-file write lock; MT_OK also when the file system has no locks (a warning). */
static mt_status lock_file(const mt_metrics_sink *s) {
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (fcntl(s->fd, F_SETLK, &fl) == 0) return MT_OK;
    const int err = errno;
    if (err == EAGAIN || err == EACCES) {
        struct flock q = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
        char who[64] = "another process";
        if (fcntl(s->fd, F_GETLK, &q) == 0 && q.l_type != F_UNLCK && q.l_pid > 0)
            snprintf(who, sizeof who, "process %ld", (long)q.l_pid);
        return mt_errorf(MT_ERR_IO,
                         "%s: another mtrain run (%s) is writing this metrics file (it holds its lock); "
                         "two runs must not share one metrics file: wait for that run to end, or give this "
                         "one its own file (logging.metrics in the recipe, or --metrics PATH)",
                         s->path, who);
    }
    if (s->regular)
        fprintf(stderr, "mtrain: warning: %s: cannot lock the metrics file (%s); nothing stops a second run "
                        "from writing it too\n", s->path, strerror(err));
    return MT_OK;
}

mt_status mt_metrics_open(mt_metrics_sink *s, const char *path) {
    memset(s, 0, sizeof *s);
    s->fd = -1;
    if (!path || !path[0]) return MT_OK;
    snprintf(s->path, sizeof s->path, "%s", path);
    /* no O_TRUNC: the file is emptied only once this run holds its lock */
    s->fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (s->fd < 0)
        return mt_errorf(MT_ERR_IO, "%s: cannot open metrics file for writing: %s (logging.metrics / --metrics)",
                         path, strerror(errno));
    struct stat sb;
    s->regular = fstat(s->fd, &sb) == 0 && S_ISREG(sb.st_mode);
    mt_status st = lock_file(s);
    if (st == MT_OK && s->regular && ftruncate(s->fd, 0) != 0)
        st = mt_errorf(MT_ERR_IO, "%s: cannot empty the metrics file: %s (logging.metrics / --metrics)", path,
                       strerror(errno));
    if (st != MT_OK) {
        close(s->fd);
        s->fd = -1;
        return st;
    }
    s->is_open = 1;
    return MT_OK;
}

mt_status mt_metrics_close(mt_metrics_sink *s) {
    if (!s || !s->is_open) return MT_OK;
    s->is_open = 0;
    const int fd = s->fd;
    s->fd = -1;
    if (close(fd) != 0)
        return mt_errorf(MT_ERR_IO, "%s: closing the metrics file failed: %s; its last lines may be lost; " FIX,
                         s->path, strerror(errno));
    return MT_OK;
}

/* Writes one whole line. On a failure the file is cut back to its last whole line (regular
 * files), closed (its lock dropped) and the sink marked failed. */
static mt_status write_line(mt_metrics_sink *s, const char *line, int n, int64_t iteration) {
    if (s->failed)
        return mt_errorf(MT_ERR_IO, "%s: an earlier write to the metrics file failed; nothing more is written "
                         "to it; " FIX, s->path);
    if (n <= 0) return mt_errorf(MT_ERR_INTERNAL, "%s: a metrics line did not format", s->path);
    size_t done = 0;
    while (done < (size_t)n) {
        const ssize_t w = write(s->fd, line + done, (size_t)n - done);
        if (w > 0) { done += (size_t)w; continue; }
        if (w < 0 && errno == EINTR) continue;
        const int err = w < 0 ? errno : ENOSPC; /* write returning 0 for a non-empty buffer: no room */
        char cut[320] = "";
        if (done > 0 && s->regular && ftruncate(s->fd, (off_t)s->size) != 0)
            snprintf(cut, sizeof cut, " (cutting the file back to its last whole line failed too: %s; its last "
                     "line is a fragment)", strerror(errno));
        s->failed = 1;
        s->is_open = 0;
        close(s->fd);
        s->fd = -1;
        return mt_errorf(MT_ERR_IO,
                         "%s: writing the metrics file failed at iteration %lld: %s; training stopped, the file "
                         "keeps the whole lines written before%s; " FIX,
                         s->path, (long long)iteration, strerror(err), cut);
    }
    s->size += n;
    return MT_OK;
}

static void timestamp(char *buf, size_t n) {
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm);
}

mt_status mt_metrics_log_iter(FILE *log, mt_metrics_sink *s, const mt_iter_metrics *m) {
    if (log) {
        char ts[32], mfu[48] = "", bub[96] = "", moe[64] = "";
        timestamp(ts, sizeof ts);
        if (m->n_experts > 0) snprintf(moe, sizeof moe, " load_balancing_loss: %.6E |", m->load_balancing_loss);
        if (m->mfu >= 0) snprintf(mfu, sizeof mfu, " MFU: %.1f%% |", 100.0 * m->mfu);
        if (m->bubble >= 0)
            snprintf(bub, sizeof bub, " pipeline bubble: measured %.1f%% (formula %.1f%%) |", 100.0 * m->bubble,
                     100.0 * m->bubble_formula);
        /* in three calls: glibc's printf takes a heap work buffer for a format with this many
         * conversions, and the training loop allocates nothing (test_train_alloc) */
        fprintf(log, "%s[%s] iteration %8lld/%8lld | consumed samples: %12lld | elapsed time per iteration (ms): %.1f |",
                s ? s->prefix : "", ts, (long long)m->iteration, (long long)m->train_iters,
                (long long)m->consumed_samples, m->ms_per_iter);
        fprintf(log, " throughput (tokens/s): %.0f | TFLOP/s per rank: %.3f |%s learning rate: %.6E | global batch size: %5d |",
                m->tokens_per_s, m->tflops, mfu, m->lr, m->global_batch);
        fprintf(log, " lm loss: %.6E |%s grad norm: %.3f | number of skipped iterations: %3lld | number of nan iterations: %3lld |%s\n",
                m->lm_loss, moe, m->grad_norm, (long long)m->skipped, (long long)m->nan_iters, bub);
        fflush(log);
    }
    if (s && (s->is_open || s->failed)) {
        char mfu[32] = "null", bub[2048] = "", line[4096];
        if (m->mfu >= 0) snprintf(mfu, sizeof mfu, "%.6f", m->mfu);
        size_t nb = 0;
        if (m->bubble >= 0)
            nb = (size_t)snprintf(bub, sizeof bub, ",\"bubble\":%.6f,\"bubble_formula\":%.6f", m->bubble, m->bubble_formula);
        if (m->n_experts > 0 && m->n_experts <= 128 && m->expert_load) { /* MoE: loads (a fixed-size buffer, no allocation) */
            nb += (size_t)snprintf(bub + nb, sizeof bub - nb, ",\"load_balancing_loss\":%.9g,\"dropped_tokens\":%.0f,"
                                   "\"expert_load\":[", m->load_balancing_loss, m->dropped_tokens);
            for (int e = 0; e < m->n_experts && nb < sizeof bub; e++)
                nb += (size_t)snprintf(bub + nb, sizeof bub - nb, "%s%.6f", e ? "," : "", m->expert_load[e]);
            if (nb < sizeof bub) snprintf(bub + nb, sizeof bub - nb, "]");
        }
        const int n = snprintf(line, sizeof line,
                "{\"iteration\":%lld,\"consumed_samples\":%lld,\"lm_loss\":%.9g,\"lr\":%.9g,\"grad_norm\":%.9g,"
                "\"tokens_per_s\":%.3f,\"ms_per_iter\":%.3f,\"tflops\":%.6f,\"mfu\":%s,\"skipped\":%lld,\"nan\":%lld%s}\n",
                (long long)m->iteration, (long long)m->consumed_samples, m->lm_loss, m->lr, m->grad_norm,
                m->tokens_per_s, m->ms_per_iter, m->tflops, mfu, (long long)m->skipped, (long long)m->nan_iters, bub);
        return write_line(s, line, n < (int)sizeof line ? n : -1, m->iteration);
    }
    return MT_OK;
}

mt_status mt_metrics_log_eval(FILE *log, mt_metrics_sink *s, int64_t iteration, double loss) {
    const double ppl = exp(loss < 20 ? loss : 20);
    if (log) {
        char line[256];
        int n = snprintf(line, sizeof line, "validation loss at iteration %lld | lm loss value: %.6E | lm loss PPL: %.6E | ",
                         (long long)iteration, loss, ppl);
        const char *px = s ? s->prefix : "";
        fprintf(log, "%s%.*s\n%s%s\n%s%.*s\n", px, n, "-------------------------------------------------------------------------"
                "---------------------------------------------------------------------------------------------------",
                px, line, px, n, "---------------------------------------------------------------------------------------------"
                "-------------------------------------------------------------------------------");
        fflush(log);
    }
    if (s && (s->is_open || s->failed)) {
        char jl[256];
        const int n = snprintf(jl, sizeof jl, "{\"iteration\":%lld,\"val_loss\":%.9g,\"val_ppl\":%.9g}\n",
                               (long long)iteration, loss, ppl);
        return write_line(s, jl, n < (int)sizeof jl ? n : -1, iteration);
    }
    return MT_OK;
}
