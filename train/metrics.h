/* metrics.h — the Megatron-style iteration line and the JSON-lines metrics file. */
#ifndef MT_METRICS_H
#define MT_METRICS_H

#include <stdint.h>
#include <stdio.h>

#include "core/status.h"

typedef struct {
    int64_t iteration, train_iters, consumed_samples;
    int global_batch;
    double ms_per_iter, tokens_per_s, tflops;  /* achieved TFLOP/s per rank */
    double mfu;                                /* fraction of peak, < 0 when peak unknown */
    double lr, lm_loss, grad_norm;
    int64_t skipped, nan_iters;
    double bubble, bubble_formula;             /* pipeline: measured idle share and (p-1)/(m+p-1)
                                                  (interleaved: (p-1)/(vm+p-1)); < 0 without pp */
} mt_iter_metrics;

typedef struct {
    FILE *file;            /* JSON lines, or NULL */
    char path[1024];
    char prefix[80];       /* put before every log line ("[r0 tp0 pp0 dp0] "), "" for one rank */
} mt_metrics_sink;

/* Opens the JSON-lines file at path for writing (truncates it); path NULL or "" = no file. */
mt_status mt_metrics_open(mt_metrics_sink *s, const char *path);
/* Closes the file; MT_ERR_IO naming the path when the final flush / fclose fails (data lost).
 * The sink is closed either way, and closing a closed or never-opened sink is MT_OK. */
mt_status mt_metrics_close(mt_metrics_sink *s);
/* Print the iteration / validation line on `log` (NULL = none; errors there are ignored) and
 * append one JSON line to the sink's file (s NULL or no file = none), flushed at once.
 * A failed write, flush or a stream error on the metrics file (disk full, I/O error) is
 * MT_ERR_IO naming the path, strerror(errno) and the fix; the log line is printed anyway. */
mt_status mt_metrics_log_iter(FILE *log, mt_metrics_sink *s, const mt_iter_metrics *m);
mt_status mt_metrics_log_eval(FILE *log, mt_metrics_sink *s, int64_t iteration, double loss);

#endif
