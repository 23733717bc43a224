/* metrics.c — formats the iteration and validation lines as Megatron prints them, and
 * writes the same numbers as JSON lines (flushed per line so a crash loses nothing). Every
 * write, flush and close of the JSON file is checked: a full disk is an MT_ERR_IO naming the
 * file, never silently lost metrics. The stdout lines are best effort (errors ignored). */
#include "train/metrics.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <time.h>

mt_status mt_metrics_open(mt_metrics_sink *s, const char *path) {
    memset(s, 0, sizeof *s);
    if (!path || !path[0]) return MT_OK;
    s->file = fopen(path, "w");
    if (!s->file) return mt_errorf(MT_ERR_IO, "%s: cannot open metrics file for writing: %s (logging.metrics / --metrics)",
                                   path, strerror(errno));
    snprintf(s->path, sizeof s->path, "%s", path);
    return MT_OK;
}

/* The error for a failed write / flush / close of the metrics file; errno as the call left it. */
static mt_status write_error(const mt_metrics_sink *s, const char *what, int err) {
    return mt_errorf(MT_ERR_IO,
                     "%s: %s the metrics file failed: %s; free space on that filesystem or write the metrics "
                     "elsewhere (logging.metrics in the recipe, or --metrics PATH)",
                     s->path[0] ? s->path : "(metrics file)", what, err ? strerror(err) : "the stream's error flag is set");
}

mt_status mt_metrics_close(mt_metrics_sink *s) {
    if (!s || !s->file) return MT_OK;
    FILE *f = s->file;
    s->file = NULL;
    const int had_error = ferror(f);
    errno = 0;
    if (fclose(f) != 0) return write_error(s, "closing", errno);
    if (had_error) return write_error(s, "an earlier write to", 0);
    return MT_OK;
}

/* Checks the outcome of one JSON line: `wrote` < 0 (fprintf failed), fflush and ferror. */
static mt_status check_line(mt_metrics_sink *s, int wrote) {
    if (wrote < 0) return write_error(s, "writing to", errno);
    errno = 0;
    if (fflush(s->file) != 0) return write_error(s, "flushing", errno);
    if (ferror(s->file)) return write_error(s, "writing to", errno);
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
        char ts[32], mfu[48] = "", bub[96] = "";
        timestamp(ts, sizeof ts);
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
        fprintf(log, " lm loss: %.6E | grad norm: %.3f | number of skipped iterations: %3lld | number of nan iterations: %3lld |%s\n",
                m->lm_loss, m->grad_norm, (long long)m->skipped, (long long)m->nan_iters, bub);
        fflush(log);
    }
    if (s && s->file) {
        char mfu[32] = "null", bub[96] = "";
        if (m->mfu >= 0) snprintf(mfu, sizeof mfu, "%.6f", m->mfu);
        if (m->bubble >= 0)
            snprintf(bub, sizeof bub, ",\"bubble\":%.6f,\"bubble_formula\":%.6f", m->bubble, m->bubble_formula);
        errno = 0;
        const int wrote = fprintf(s->file,
                "{\"iteration\":%lld,\"consumed_samples\":%lld,\"lm_loss\":%.9g,\"lr\":%.9g,\"grad_norm\":%.9g,"
                "\"tokens_per_s\":%.3f,\"ms_per_iter\":%.3f,\"tflops\":%.6f,\"mfu\":%s,\"skipped\":%lld,\"nan\":%lld%s}\n",
                (long long)m->iteration, (long long)m->consumed_samples, m->lm_loss, m->lr, m->grad_norm,
                m->tokens_per_s, m->ms_per_iter, m->tflops, mfu, (long long)m->skipped, (long long)m->nan_iters, bub);
        return check_line(s, wrote);
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
    if (s && s->file) {
        errno = 0;
        const int wrote = fprintf(s->file, "{\"iteration\":%lld,\"val_loss\":%.9g,\"val_ppl\":%.9g}\n",
                                  (long long)iteration, loss, ppl);
        return check_line(s, wrote);
    }
    return MT_OK;
}
