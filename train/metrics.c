/* metrics.c — formats the iteration and validation lines as Megatron's training_log and
 * evaluate_and_print_results print them (mtrain's own fields after Megatron's), and writes
 * each iteration's numbers as JSON lines, one write(2) per line so a crash loses nothing.
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

/* Megatron's datetime.now().strftime('%Y-%m-%d %H:%M:%S.%f'): local time with microseconds. */
static void timestamp(char *buf, size_t n) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    char sec[24];
    strftime(sec, sizeof sec, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(buf, n, "%s.%06ld", sec, (long)(ts.tv_nsec / 1000));
}

void mt_metrics_format_eta(double seconds, char *buf, size_t n) {
    if (!(seconds >= 0) || !isfinite(seconds)) {
        snprintf(buf, n, "unknown");
        return;
    }
    const long long s = (long long)(seconds + 0.5);
    if (s >= 86400) snprintf(buf, n, "%lldd%02lldh", s / 86400, s % 86400 / 3600);
    else if (s >= 3600) snprintf(buf, n, "%lldh%02lldm", s / 3600, s % 3600 / 60);
    else if (s >= 60) snprintf(buf, n, "%lldm%02llds", s / 60, s % 60);
    else snprintf(buf, n, "%llds", s);
}

mt_iter_metrics mt_metrics_interval_view(const mt_iter_metrics *m) {
    mt_iter_metrics v = *m;
    if (m->interval_iters > 0) {
        v.ms_per_iter = m->interval_ms;
        v.tokens_per_s = m->interval_tokens_per_s;
        v.tflops = m->interval_tflops;
        v.mfu = m->interval_mfu;
    }
    return v;
}

/* The line, in Megatron's training_log order and formats (" [%s]", " iteration {:8d}/{:8d} |",
 * " consumed samples: {:12d} |", " elapsed time per iteration (ms): {:.1f} |", " throughput per
 * GPU (TFLOP/s/GPU): {:.1f} |", " learning rate: {:.6E} |", " global batch size: {:5d} |",
 * " lm loss: {:.6E} |", " loss scale: {:.1f} |", " grad norm: {:.3f} |", " number of skipped
 * iterations: {:3d} |", " number of nan iterations: {:3d} |"), the throughput field only with
 * --log-throughput (as Megatron), no prefix (one rank prints it, as Megatron's print_rank_last);
 * then mtrain's fields on a line of their own, behind the rank prefix. */
static void print_iter_line(FILE *log, const char *prefix, int throughput, const mt_iter_metrics *m) {
    const int iv = m->interval_iters > 0;
    const double ms = iv ? m->interval_ms : m->ms_per_iter;
    const double tflops = iv ? m->interval_tflops : m->tflops;
    const double tok = iv ? m->interval_tokens_per_s : m->tokens_per_s;
    const double mfu_v = iv ? m->interval_mfu : m->mfu;
    const double loss = iv ? m->interval_lm_loss : m->lm_loss;
    const long long skipped = iv ? m->interval_skipped : m->skipped;
    const long long nan_it = iv ? m->interval_nan : m->nan_iters;
    char ts[48], mfu[48] = "", bub[96] = "", eta[32];
    timestamp(ts, sizeof ts);
    if (mfu_v >= 0) snprintf(mfu, sizeof mfu, " MFU: %.1f%% |", 100.0 * mfu_v);
    if (m->bubble >= 0)
        snprintf(bub, sizeof bub, " pipeline bubble: measured %.1f%% (formula %.1f%%) |", 100.0 * m->bubble,
                 100.0 * m->bubble_formula);
    mt_metrics_format_eta(iv ? m->eta_s : (double)(m->train_iters - m->iteration) * m->ms_per_iter * 1e-3, eta,
                          sizeof eta);
    /* in several calls: glibc's printf takes a heap work buffer for a format with many
     * conversions, and the training loop allocates nothing (test_train_alloc) */
    fprintf(log, " [%s] iteration %8lld/%8lld | consumed samples: %12lld |", ts, (long long)m->iteration,
            (long long)m->train_iters, (long long)m->consumed_samples);
    fprintf(log, " elapsed time per iteration (ms): %.1f |", ms);
    if (throughput) fprintf(log, " throughput per GPU (TFLOP/s/GPU): %.1f |", tflops);
    fprintf(log, " learning rate: %.6E | global batch size: %5d | lm loss: %.6E |", m->lr, m->global_batch, loss);
    if (m->n_experts > 0) /* Megatron's track_moe_metrics adds it to total_loss_dict, printed after lm loss */
        fprintf(log, " load_balancing_loss: %.6E |", m->load_balancing_loss);
    fprintf(log, " loss scale: 1.0 |");
    fprintf(log, " grad norm: %.3f | number of skipped iterations: %3lld | number of nan iterations: %3lld |",
            m->grad_norm, skipped, nan_it);
    fprintf(log, "\n%smtrain: iteration %lld | throughput (tokens/s): %.0f |%s%s ETA: %s |\n", prefix,
            (long long)m->iteration, tok, mfu, bub, eta);
    fflush(log);
}

/* A JSON number: %.9g, or null for inf / nan (JSON has no literal for them; a diverged run's
 * grad norm is inf, and the file must stay parseable). */
static const char *jnum(char *buf, size_t n, const char *fmt, double v) {
    if (!isfinite(v)) return "null";
    snprintf(buf, n, fmt, v);
    return buf;
}

/* The log line's extras, into buf (a fixed buffer: the loop allocates nothing): "layout", the
 * gathered "timers" {"name": [min, max], ...} (ms per iteration) and the pipeline's "pp_cost"
 * {"clock", "f_ms": [...], "b_ms": [...]} by virtual stage. Stops before overflowing buf
 * (the record stays valid JSON: each part is written whole or not at all). */
static void record_extras(char *buf, size_t n, const mt_metrics_sink *s, const mt_iter_metrics *m) {
    size_t len = 0;
    char part[2048];
    int k;
#define ADD_PART()                                                            \
    do {                                                                      \
        if (k > 0 && (size_t)k < sizeof part && len + (size_t)k < n) {        \
            memcpy(buf + len, part, (size_t)k + 1);                           \
            len += (size_t)k;                                                 \
        }                                                                     \
    } while (0)
    if (m->interval_iters > 0 && s->has_layout) {
        const mt_metrics_layout *l = &s->layout;
        k = snprintf(part, sizeof part, ",\"layout\":{\"tp\":%d,\"pp\":%d,\"vpp\":%d,\"cp\":%d,\"dp\":%d,\"ep\":%d,"
                     "\"micro_batch\":%d,\"n_micro\":%d,\"global_batch\":%d,\"world\":%d}", l->tp, l->pp, l->vpp, l->cp,
                     l->dp, l->ep, l->micro_batch, l->n_micro, l->global_batch, l->world);
        ADD_PART();
    }
    if (m->n_timers > 0 && m->timer_names && m->timer_ran) {
        int any = 0;
        k = snprintf(part, sizeof part, ",\"timers\":{");
        for (int i = 0; i < m->n_timers && k > 0 && (size_t)k < sizeof part; i++) {
            if (!m->timer_ran[i]) continue;
            k += snprintf(part + k, sizeof part - (size_t)k, "%s\"%s\":[%.4f,%.4f]", any ? "," : "", m->timer_names[i],
                          m->timer_min_ms[i], m->timer_max_ms[i]);
            any = 1;
        }
        if (k > 0 && (size_t)k < sizeof part) k += snprintf(part + k, sizeof part - (size_t)k, "}");
        if (any) ADD_PART();
    }
    if (m->n_vstages > 0 && m->pp_f_ms && m->pp_b_ms) {
        k = snprintf(part, sizeof part, ",\"pp_cost\":{\"clock\":\"%s\",\"f_ms\":[", m->pp_clock ? m->pp_clock : "wall");
        for (int i = 0; i < m->n_vstages && k > 0 && (size_t)k < sizeof part; i++)
            k += snprintf(part + k, sizeof part - (size_t)k, "%s%.4f", i ? "," : "", m->pp_f_ms[i]);
        if (k > 0 && (size_t)k < sizeof part) k += snprintf(part + k, sizeof part - (size_t)k, "],\"b_ms\":[");
        for (int i = 0; i < m->n_vstages && k > 0 && (size_t)k < sizeof part; i++)
            k += snprintf(part + k, sizeof part - (size_t)k, "%s%.4f", i ? "," : "", m->pp_b_ms[i]);
        if (k > 0 && (size_t)k < sizeof part) k += snprintf(part + k, sizeof part - (size_t)k, "]}");
        ADD_PART();
    }
#undef ADD_PART
}

mt_status mt_metrics_log_iter(FILE *log, mt_metrics_sink *s, const mt_iter_metrics *m) {
    if (log) print_iter_line(log, s ? s->prefix : "", s ? s->throughput : 1, m);
    if (s && (s->is_open || s->failed)) {
        char mfu[32], bub[2048] = "", ivl[256] = "", ext[4096] = "", line[8192];
        char b_loss[32], b_lr[32], b_gn[32], b_tok[40], b_ms[40], b_tf[40], b_avg[32];
        size_t nb = 0;
        if (m->bubble >= 0)
            nb = (size_t)snprintf(bub, sizeof bub, ",\"bubble\":%.6f,\"bubble_formula\":%.6f", m->bubble, m->bubble_formula);
        if (m->n_experts > 0 && m->n_experts <= 128 && m->expert_load) { /* MoE: loads (a fixed-size buffer, no allocation) */
            nb += (size_t)snprintf(bub + nb, sizeof bub - nb, ",\"load_balancing_loss\":%.9g,\"dropped_tokens\":%.0f,"
                                   "\"expert_load\":[", m->load_balancing_loss, m->dropped_tokens);
            for (int q = 0; q < m->n_experts && nb < sizeof bub; q++)
                nb += (size_t)snprintf(bub + nb, sizeof bub - nb, "%s%.6f", q ? "," : "", m->expert_load[q]);
            if (nb < sizeof bub) snprintf(bub + nb, sizeof bub - nb, "]");
        }
        record_extras(ext, sizeof ext, s, m);
        if (m->interval_iters > 0)
            snprintf(ivl, sizeof ivl, ",\"interval_iters\":%lld,\"lm_loss_interval_avg\":%s,"
                     "\"ms_per_iter_interval_avg\":%.3f,\"interval_skipped\":%lld,\"interval_nan\":%lld",
                     (long long)m->interval_iters, jnum(b_avg, sizeof b_avg, "%.9g", m->interval_lm_loss),
                     m->interval_ms, (long long)m->interval_skipped, (long long)m->interval_nan);
        const char *jloss = jnum(b_loss, sizeof b_loss, "%.9g", m->lm_loss), *jlr = jnum(b_lr, sizeof b_lr, "%.9g", m->lr),
                   *jgn = jnum(b_gn, sizeof b_gn, "%.9g", m->grad_norm);
        const char *jtok = jnum(b_tok, sizeof b_tok, "%.3f", m->tokens_per_s), *jms = jnum(b_ms, sizeof b_ms, "%.3f", m->ms_per_iter),
                   *jtf = jnum(b_tf, sizeof b_tf, "%.6f", m->tflops);
        const char *jmfu = m->mfu >= 0 ? jnum(mfu, sizeof mfu, "%.6f", m->mfu) : "null";
        const int n = snprintf(line, sizeof line,
                "{\"iteration\":%lld,\"consumed_samples\":%lld,\"lm_loss\":%s,\"lr\":%s,\"grad_norm\":%s,"
                "\"tokens_per_s\":%s,\"ms_per_iter\":%s,\"tflops\":%s,\"mfu\":%s,\"skipped\":%lld,\"nan\":%lld%s%s%s}\n",
                (long long)m->iteration, (long long)m->consumed_samples, jloss, jlr, jgn, jtok, jms, jtf, jmfu,
                (long long)m->skipped, (long long)m->nan_iters, ivl, bub, ext);
        return write_line(s, line, n < (int)sizeof line ? n : -1, m->iteration);
    }
    return MT_OK;
}

mt_status mt_metrics_log_eval_kind(FILE *log, mt_metrics_sink *s, int64_t iteration, mt_eval_kind kind,
                                   double loss) {
    const double ppl = exp(loss < 20 ? loss : 20); /* Megatron: math.exp(min(20, loss)) */
    const char *where = kind == MT_EVAL_TEST ? " on test set" : kind == MT_EVAL_VALID_END ? " on validation set" : "";
    if (log) {
        /* string = f' validation loss at {prefix} | ' + 'lm loss value: {:.6E} | ' + 'lm loss PPL: {:.6E} | ';
         * printed between two lines of '-' * (len(string) + 1) */
        char line[256];
        const int n = snprintf(line, sizeof line, " validation loss at iteration %lld%s | lm loss value: %.6E | "
                               "lm loss PPL: %.6E | ", (long long)iteration, where, loss, ppl);
        char dash[258];
        const int nd = n + 1 < (int)sizeof dash ? n + 1 : (int)sizeof dash - 1;
        memset(dash, '-', (size_t)nd);
        dash[nd] = 0;
        fprintf(log, "%s\n%s\n%s\n", dash, line, dash); /* as Megatron prints it: no rank prefix */
        fflush(log);
    }
    if (s && (s->is_open || s->failed)) {
        char jl[256], b_l[32], b_p[32];
        const char *key = kind == MT_EVAL_TEST ? "test" : "val";
        const int n = snprintf(jl, sizeof jl, "{\"iteration\":%lld,\"%s_loss\":%s,\"%s_ppl\":%s}\n",
                               (long long)iteration, key, jnum(b_l, sizeof b_l, "%.9g", loss), key,
                               jnum(b_p, sizeof b_p, "%.9g", ppl));
        return write_line(s, jl, n < (int)sizeof jl ? n : -1, iteration);
    }
    return MT_OK;
}

mt_status mt_metrics_log_eval(FILE *log, mt_metrics_sink *s, int64_t iteration, double loss) {
    return mt_metrics_log_eval_kind(log, s, iteration, MT_EVAL_VALID, loss);
}
