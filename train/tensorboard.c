/* tensorboard.c — the TensorBoard logging policy: which scalars, under which tags, at which
 * steps, replicating Megatron-LM's training_log / evaluate_and_print_results
 * (megatron/training/training.py) with --tensorboard-dir. Every tag X it writes at the iteration
 * also goes out as "X vs samples" at the consumed-samples count, as Megatron does (timing tags
 * and mtrain's own excepted, as there). Each scalar is one Event record (what SummaryWriter's
 * add_scalar writes), float32 as TensorBoard stores simple_value. Every write and flush is
 * checked: a full disk is an MT_ERR_IO naming the file, never silently lost events. Rule:
 * nothing is allocated after open (the stream's buffer is taken by the version record). */
#include "train/tensorboard.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/ckpt/ckpt_files.h"
#include "core/tfevents.h"

static double wall_time(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static mt_status write_error(const mt_tensorboard *tb, const char *what, int err) {
    return mt_errorf(MT_ERR_IO,
                     "%s: %s the TensorBoard events file failed: %s; free space on that filesystem or write the "
                     "events elsewhere (logging.tensorboard_dir in the recipe, or --tensorboard-dir DIR)",
                     tb->path, what, err ? strerror(err) : "the stream's error flag is set");
}

/* Frames an encoded Event as a TFRecord and appends it to the (buffered) file. */
static mt_status write_event(mt_tensorboard *tb, const uint8_t *ev, size_t n) {
    uint8_t rec[512];
    const size_t n_rec = n ? mt_tfevents_record(rec, sizeof rec, ev, n) : 0;
    if (!n_rec) return mt_errorf(MT_ERR_IO, "%s: a TensorBoard event did not fit its %zu-byte buffer", tb->path, sizeof rec);
    errno = 0;
    if (fwrite(rec, 1, n_rec, tb->file) != n_rec || ferror(tb->file)) return write_error(tb, "writing to", errno);
    return MT_OK;
}

static mt_status scalar(mt_tensorboard *tb, const char *tag, double value, int64_t step) {
    uint8_t ev[480];
    return write_event(tb, ev, mt_tfevents_scalar_event(ev, sizeof ev, wall_time(), step, tag, (float)value));
}

/* tag at the iteration and "tag vs samples" at the consumed-samples count */
static mt_status scalar2(mt_tensorboard *tb, const char *tag, double value, int64_t it, int64_t samples) {
    char vs[160];
    snprintf(vs, sizeof vs, "%s vs samples", tag);
    mt_status st = scalar(tb, tag, value, it);
    return st != MT_OK ? st : scalar(tb, vs, value, samples);
}

static mt_status flush(mt_tensorboard *tb) {
    errno = 0;
    if (fflush(tb->file) != 0 || ferror(tb->file)) return write_error(tb, "flushing", errno);
    return MT_OK;
}

mt_status mt_tensorboard_open(mt_tensorboard *tb, const mt_logging_cfg *cfg, int world_size, double mem_bytes) {
    static long long counter = 0; /* SummaryWriter's per-process file counter, from 0 */
    memset(tb, 0, sizeof *tb);
    tb->cfg = cfg;
    tb->world_size = world_size;
    tb->mem_bytes = mem_bytes;
    if (!cfg->tensorboard_dir[0]) return MT_OK;
    if (mt_mkdirs(cfg->tensorboard_dir) != MT_OK)
        return mt_error_context(MT_ERR_IO, "creating the TensorBoard folder %s (logging.tensorboard_dir / "
                                "--tensorboard-dir: choose a writable place): ", cfg->tensorboard_dir);
    char host[256] = "localhost";
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = 0;
    for (char *c = host; *c; c++)
        if (*c == '/') *c = '_';
    const double now = wall_time();
    snprintf(tb->path, sizeof tb->path, "%s/events.out.tfevents.%010lld.%s.%ld.%lld", cfg->tensorboard_dir,
             (long long)now, host, (long)getpid(), counter++);
    tb->file = fopen(tb->path, "wbx"); /* never truncates an existing file */
    if (!tb->file)
        return mt_errorf(MT_ERR_IO, "%s: cannot create the TensorBoard events file: %s (logging.tensorboard_dir / "
                         "--tensorboard-dir: choose a writable folder)", tb->path, strerror(errno));
    uint8_t ev[64];
    mt_status st = write_event(tb, ev, mt_tfevents_version_event(ev, sizeof ev, now));
    if (st == MT_OK) st = flush(tb);
    return st;
}

mt_status mt_tensorboard_log_step(mt_tensorboard *tb, const mt_tb_step *s) {
    mt_status st = MT_OK;
    if (!tb || !tb->file) return MT_OK;
    const mt_logging_cfg *c = tb->cfg;
    if (s->iteration % (c->tensorboard_interval > 0 ? c->tensorboard_interval : 1) != 0) return MT_OK;
    const int64_t it = s->iteration, n = s->consumed_samples;
    /* 'learning-rate': Megatron's default, off with --no-log-learnig-rate-to-tensorboard */
    if (c->tensorboard_learning_rate) MT_CHECK(scalar2(tb, "learning-rate", s->lr, it, n));
    /* 'batch-size': unconditional in current Megatron (older ones: --log-batch-size-to-tensorboard) */
    MT_CHECK(scalar2(tb, "batch-size", s->global_batch, it, n));
    /* the loss dict's keys ('lm loss'); Megatron's dict is empty for a skipped iteration */
    if (!s->skipped) MT_CHECK(scalar2(tb, "lm loss", s->lm_loss, it, n));
    /* 'loss-scale': on by default (--no-log-loss-scale-to-tensorboard); 1 without fp16 loss scaling */
    if (c->tensorboard_loss_scale) MT_CHECK(scalar2(tb, "loss-scale", 1.0, it, n));
    /* 'world-size': --log-world-size-to-tensorboard */
    if (c->tensorboard_world_size) MT_CHECK(scalar2(tb, "world-size", tb->world_size, it, n));
    /* 'grad-norm': whenever the optimizer computed one (mtrain always does) */
    MT_CHECK(scalar2(tb, "grad-norm", s->grad_norm, it, n));
    /* ('num-zeros' needs --log-num-zeros-in-grad, 'params-norm' --log-params-norm: neither is
     * computed by mtrain, so neither is written) */
    /* 'mem-*': --log-memory-to-tensorboard; Megatron reads torch.cuda.memory_stats(); mtrain allocates
     * once per class before the loop, so reserved = allocated = max allocated */
    if (c->tensorboard_memory) {
        MT_CHECK(scalar(tb, "mem-reserved-bytes", tb->mem_bytes, it));
        MT_CHECK(scalar(tb, "mem-allocated-bytes", tb->mem_bytes, it));
        MT_CHECK(scalar(tb, "mem-max-allocated-bytes", tb->mem_bytes, it));
    }
out:
    return st;
}

mt_status mt_tensorboard_log_timing(mt_tensorboard *tb, const mt_iter_metrics *m, int first) {
    mt_status st = MT_OK;
    if (!tb || !tb->file) return MT_OK;
    const mt_logging_cfg *c = tb->cfg;
    const int64_t it = m->iteration;
    /* 'iteration-time' (seconds, the log window's mean): --log-timers-to-tensorboard, not at the
     * first iteration (Megatron: it holds the start-up cost) */
    if (c->tensorboard_timers && !first) MT_CHECK(scalar(tb, "iteration-time", m->ms_per_iter * 1e-3, it));
    /* 'throughput' (TFLOP/s per GPU): --log-throughput with --log-timers-to-tensorboard */
    if (c->tensorboard_timers && c->log_throughput) MT_CHECK(scalar(tb, "throughput", m->tflops, it));
    /* mtrain's own, under names Megatron does not use */
    MT_CHECK(scalar(tb, "mtrain/tokens-per-second", m->tokens_per_s, it));
    if (m->mfu >= 0) MT_CHECK(scalar(tb, "mtrain/mfu", m->mfu, it));
    if (m->bubble >= 0) MT_CHECK(scalar(tb, "mtrain/pipeline-bubble", m->bubble, it));
    MT_CHECK(flush(tb));
out:
    return st;
}

mt_status mt_tensorboard_log_eval(mt_tensorboard *tb, int64_t iteration, int64_t consumed_samples, double loss) {
    mt_status st = MT_OK;
    if (!tb || !tb->file) return MT_OK;
    /* evaluate_and_print_results: '<key> validation' always, '<key> validation ppl' with
     * --log-validation-ppl-to-tensorboard, ppl = exp(min(20, loss)) */
    MT_CHECK(scalar2(tb, "lm loss validation", loss, iteration, consumed_samples));
    if (tb->cfg->tensorboard_validation_ppl)
        MT_CHECK(scalar2(tb, "lm loss validation ppl", exp(loss < 20 ? loss : 20), iteration, consumed_samples));
    MT_CHECK(flush(tb));
out:
    return st;
}

mt_status mt_tensorboard_close(mt_tensorboard *tb) {
    if (!tb || !tb->file) return MT_OK;
    FILE *f = tb->file;
    tb->file = NULL;
    const int had_error = ferror(f);
    errno = 0;
    if (fclose(f) != 0) return write_error(tb, "closing", errno);
    if (had_error) return write_error(tb, "an earlier write to", 0);
    return MT_OK;
}
