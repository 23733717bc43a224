/* profile.h — the profiler (Megatron's --profile with --profile-step-start / --profile-step-end; Megatron
 * runs nsys or the torch profiler, mtrain writes its own trace): over iterations profile_start ..
 * profile_end every rank records one event per timed phase (train/timers.c feeds them: forward /
 * backward per micro-batch and model chunk, batch fetches, pipeline send/recv groups, gradient and
 * parameter collectives, the optimizer, the whole forward-backward) into a buffer allocated before the
 * loop; after profile_end (or when the loop ends first) the events go to rank 0 over the world
 * communicator (a header, then one message per rank) and rank 0 writes ONE Chrome Trace Event Format
 * file (JSON object, "traceEvents" of ph "X" complete events, ts/dur in microseconds; loads in
 * Perfetto and chrome://tracing) to logging.profile_path through a temporary name, fsync and rename.
 * Tracks: pid = rank (named "rank R [tpX pp.. dp..]"), tid by kind: 1 step (forward-backward,
 * optimizer), 2 compute (forward-compute, backward-compute, batch-generator), 3 pipeline p2p,
 * 4 collectives. Timestamps: CLOCK_MONOTONIC, one clock for all ranks of a machine, shifted so the
 * earliest event of the job is at 0; ranks on other nodes have their own node's clock (no sync).
 * Events past the buffer are counted as dropped (reported in the file and on stderr).
 * Rule: nothing is allocated after mt_profile_init (writing uses open/write on a preallocated buffer). */
#ifndef MT_PROFILE_H
#define MT_PROFILE_H

#include <stdint.h>
#include <stdio.h>

#include "core/backend.h"
#include "core/recipe/recipe.h"
#include "core/timing.h"
#include "parallel/parallel_state.h"

typedef struct {
    double t0_ms, t1_ms;            /* CLOCK_MONOTONIC */
    int32_t kind, mb, chunk, iteration; /* mt_timer_id; micro-batch and chunk, -1 if none */
    int32_t pad[2];
} mt_prof_event;                    /* 40 bytes: 10 f32 elements on the wire */

typedef struct {
    int on;                         /* logging.profile */
    int64_t start, end;             /* iterations, inclusive */
    int recording;                  /* the current iteration is profiled */
    int done;                       /* the trace was written */
    int seen;                       /* some profiled iteration ran */
    int64_t last;                   /* the last one that did */
    mt_prof_event *ev;              /* (cap) host */
    int64_t cap, n, dropped;
    void *dev;                      /* (cap events) backend staging for the transfers */
    void *hdr_dev;                  /* (8) f32 backend: a rank's [n, dropped, first ts] */
    int64_t *counts;                /* (world) rank 0: events per rank */
    char *out;                      /* (out_cap) JSON staging */
    size_t out_cap, out_len;
    int fd;
    const mt_parallel_state *ps;
    mt_backend *be;
    char path[MT_PATH_MAX], tmp[MT_PATH_MAX + 16];
} mt_profiler;

/* With logging.profile off: nothing allocated, every other call is a no-op. events_per_iter: an upper
 * estimate of one iteration's events on this rank (the buffer holds it x the profiled iterations). */
mt_status mt_profile_init(mt_profiler *p, const mt_recipe *r, const mt_parallel_state *ps, mt_backend *be,
                          int64_t events_per_iter);
void mt_profile_free(mt_profiler *p);
/* Iteration `it` begins: recording = it in [start, end] and not yet written. */
static inline void mt_profile_iteration(mt_profiler *p, int64_t it) {
    p->recording = p->on && !p->done && it >= p->start && it <= p->end;
    p->seen |= p->recording;
    if (p->recording) p->last = it;
}
static inline void mt_profile_add(mt_profiler *p, int kind, double t0, double t1, int mb, int chunk, int64_t it) {
    if (p->n >= p->cap) {
        p->dropped++;
        return;
    }
    p->ev[p->n++] = (mt_prof_event){.t0_ms = t0, .t1_ms = t1, .kind = kind, .mb = mb, .chunk = chunk,
                                    .iteration = (int32_t)it};
}
/* After iteration `it` (collective over the world): gathers and writes the trace when it == end, or
 * when `last` (the loop is over) and some profiled iteration ran. The logging rank prints one line on
 * `log` naming the file. */
mt_status mt_profile_flush(mt_profiler *p, int64_t it, int last, FILE *log, const char *prefix);

#endif
