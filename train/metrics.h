/* metrics.h — the Megatron-style iteration line and the JSON-lines metrics file. */
#ifndef MT_METRICS_H
#define MT_METRICS_H

#include <stdint.h>
#include <stdio.h>

#include "core/status.h"

/* One iteration's numbers (the JSONL record, written every iteration) and, when interval_iters
 * > 0, the log line's: Megatron's training_log prints averages over the logging interval (the
 * loss over its non-skipped iterations, the time over all of them) and per-interval skipped and
 * nan counts, reset after each line. */
typedef struct {
    int64_t iteration, train_iters, consumed_samples;
    int global_batch;
    double ms_per_iter, tokens_per_s, tflops;  /* this iteration's; tflops: achieved TFLOP/s per rank */
    double mfu;                                /* fraction of peak, < 0 when peak unknown */
    double lr, lm_loss, grad_norm;             /* this iteration's own */
    int64_t skipped, nan_iters;                /* totals so far (the JSONL's "skipped", "nan") */
    double bubble, bubble_formula;             /* pipeline: measured idle share and (p-1)/(m+p-1)
                                                  (interleaved: (p-1)/(vm+p-1)); < 0 without pp */
    /* the logging interval that ends at this iteration; interval_iters 0 = none (the line then
     * prints this iteration's own figures, with skipped and nan_iters as the counts) */
    int64_t interval_iters, interval_skipped, interval_nan;
    double interval_lm_loss;                   /* mean over the interval's non-skipped iterations (0 if none) */
    double interval_ms, interval_tokens_per_s, interval_tflops, interval_mfu; /* over the interval */
    double eta_s;                              /* (train_iters - iteration) * interval_ms, seconds */
    /* mixture of experts (n_experts > 0): Megatron's load_balancing_loss (the aux loss without its
       coefficient, mean over MoE layers and micro-batches), each expert's share of the routed
       assignments (expert_load, n_experts values) and the assignments dropped over capacity */
    int n_experts;
    double load_balancing_loss;
    const double *expert_load;
    double dropped_tokens;
    /* at log lines, for `mtrain plan --compare`: the gathered timers (n_timers > 0: per
     * iteration ms, min and max over the ranks that ran each; ran[i] = 0: left out) and the
     * pipeline's F / B cost per micro-batch of each virtual stage (n_vstages = p v > 0; index
     * c p + s; pp_clock "cpu" or "wall") */
    int n_timers;
    const char *const *timer_names;
    const double *timer_min_ms, *timer_max_ms;
    const int *timer_ran;
    int n_vstages;
    const double *pp_f_ms, *pp_b_ms;
    const char *pp_clock;
} mt_iter_metrics;

/* The run's layout, written into the records of log lines ("layout"), so a reader can check
 * that a recipe describes the run (mtrain plan --compare). */
typedef struct {
    int tp, pp, vpp, cp, dp, ep, micro_batch, n_micro, global_batch, world;
} mt_metrics_layout;

/* Which evaluation a validation line reports (Megatron's prefixes): "iteration N" during
 * training, "iteration N on validation set" / "iteration N on test set" at its end. */
typedef enum { MT_EVAL_VALID = 0, MT_EVAL_VALID_END, MT_EVAL_TEST } mt_eval_kind;

typedef struct {
    int is_open;           /* fd is the JSON-lines file (locked); 0 = no file */
    int fd;
    int regular;           /* a regular file: can be cut back to its last whole line */
    int failed;            /* a write failed: the file was cut back and closed */
    int64_t size;          /* bytes of whole lines written */
    char path[1024];
    char prefix[80];       /* put before mtrain's own log lines ("[r0 tp0 pp0 dp0] "), "" for one rank;
                              never before Megatron's iteration and validation lines */
    int throughput;        /* Megatron's --log-throughput: the line's 'throughput per GPU' field */
    int has_layout;        /* layout is set: log-line records carry it */
    mt_metrics_layout layout;
} mt_metrics_sink;

/* Opens the JSON-lines file at path for writing; path NULL or "" = no file. The file is opened
 * without truncating it, locked (fcntl write lock on the whole file, held until close), and only
 * then emptied: a file another live process holds locked (another mtrain run writing the same
 * metrics) is refused with MT_ERR_IO naming the file and that process's pid, and left untouched.
 * Only the rank that logs (ps->logger) opens the sink, so only it takes the lock. */
mt_status mt_metrics_open(mt_metrics_sink *s, const char *path);
/* Closes the file (and drops the lock); MT_ERR_IO naming the path when close fails. The sink is
 * closed either way; closing a closed, failed or never-opened (zeroed) sink is MT_OK. */
mt_status mt_metrics_close(mt_metrics_sink *s);
/* Print the iteration / validation line on `log` (NULL = none; errors there are ignored) and
 * append one JSON line to the sink's file (s NULL or no file = none) with write(2) at once.
 * The training loop calls mt_metrics_log_iter every iteration, with `log` only on the iterations
 * that print a line. The line is Megatron's training_log line field for field and nothing else, with
 * no rank prefix (timestamp with microseconds, iteration, consumed samples, elapsed time per
 * iteration (ms), throughput per GPU (TFLOP/s/GPU) when s->throughput, learning rate, global batch
 * size, lm loss, loss scale, grad norm, number of skipped / nan iterations); mtrain's own figures
 * (throughput (tokens/s), MFU, pipeline bubble, ETA) follow on a line of their own,
 * "<prefix>mtrain: iteration N | throughput (tokens/s): ... |". A failed write (disk full, file-size limit, I/O error) is MT_ERR_IO naming the
 * path, the iteration, strerror(errno) and the fix; the file is then cut back to its last whole
 * line (regular files; ftruncate) and closed, so it never ends in a fragment, and every later
 * call is MT_ERR_IO too. The log line is printed anyway. */
mt_status mt_metrics_log_iter(FILE *log, mt_metrics_sink *s, const mt_iter_metrics *m);
/* Megatron's evaluate_and_print_results: " validation loss at <prefix> | lm loss value: X |
 * lm loss PPL: Y | " between two lines of len+1 dashes. JSONL: {"iteration","val_loss",
 * "val_ppl"} for the validation set, {"iteration","test_loss","test_ppl"} for the test set. */
mt_status mt_metrics_log_eval_kind(FILE *log, mt_metrics_sink *s, int64_t iteration, mt_eval_kind kind,
                                   double loss);
/* mt_metrics_log_eval_kind(..., MT_EVAL_VALID, loss) */
mt_status mt_metrics_log_eval(FILE *log, mt_metrics_sink *s, int64_t iteration, double loss);
/* A copy of m whose ms_per_iter, tokens_per_s, tflops and mfu are the interval's (TensorBoard's
 * timing scalars are written with the log line, over its interval, as Megatron's). */
mt_iter_metrics mt_metrics_interval_view(const mt_iter_metrics *m);
/* "1d02h", "1h02m", "12m05s", "7s": a duration for the ETA field, into buf. */
void mt_metrics_format_eta(double seconds, char *buf, size_t n);

#endif
