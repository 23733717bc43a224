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

mt_status mt_metrics_open(mt_metrics_sink *s, const char *path);
void mt_metrics_close(mt_metrics_sink *s);
void mt_metrics_log_iter(FILE *log, mt_metrics_sink *s, const mt_iter_metrics *m);
void mt_metrics_log_eval(FILE *log, mt_metrics_sink *s, int64_t iteration, double loss);

#endif
