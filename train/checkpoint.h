/* checkpoint.h — saving and loading the training state of one rank (collective over the job for
 * saves): weights and the optimizer's fp32 state of this rank's shards as pieces of global tensors
 * (core/ckpt/ckpt_layout.h), written in parallel to one safetensors file per rank, described by
 * rank 0's manifest, published atomically (core/ckpt/ckpt_files.h); loaded into any layout by
 * reading the pieces each local tensor needs, after checking shapes, sizes and checksums.
 * Files: checkpoint_save.c, checkpoint_load.c. */
#ifndef MT_CHECKPOINT_H
#define MT_CHECKPOINT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "core/ckpt/ckpt_layout.h"
#include "core/ckpt/manifest.h"
#include "core/data/tokenizer.h"
#include "core/recipe/recipe.h"
#include "parallel/parallel_state.h"
#include "train/model.h"

/* The loop's state a save records and a load restores. */
typedef struct {
    int64_t iteration;          /* iterations done */
    int64_t consumed_samples;
    int64_t optimizer_steps;    /* Adam updates done (its bias corrections) */
    int64_t skipped_iterations;
    char rerun_state[MT_RERUN_STATE_MAX]; /* the rerun state machine's, in a save it asked for (train/rerun.h); "" = none */
} mt_ckpt_state;

/* What a run keeps between saves (allocated at the first save, freed by mt_ckpt_saver_free). */
typedef struct {
    mt_ckpt_piece *pieces;
    size_t n_pieces;
    void *snapshot;             /* host copy of this rank's pieces, in file order */
    float *expert_bias;         /* (model.layers, E) host copy of the router's expert bias (NULL without) */
    uint64_t snapshot_bytes;
    void *xfer;                 /* backend scratch for the per-save exchange of rank records */
    size_t xfer_bytes;
    /* the save in flight (between mt_ckpt_save_begin and the poll that finishes it) */
    int pending, async, thread_live, rank;
    pthread_t thread;           /* the writer of this rank's file (async) */
    atomic_int written;         /* the writer is done (its record below is final) */
    int32_t me[32];             /* this rank's record for the exchange (checkpoint_save.c) */
    char tmp[4300], err[512];
    const mt_recipe *r;
    const mt_model *m;
    mt_ckpt_state cs;
    double t_begin;
    /* the last save, for logs and benchmarks */
    double seconds, snapshot_seconds;
    double stall_seconds;       /* what the training loop waited: snapshot, exchanges, and with a synchronous
                                   save the writing too */
    uint64_t job_bytes;         /* all ranks' files */
    int lock_fd_plus1;          /* rank 0: the save folder's lock (checkpoint_dir.c), fd + 1; 0 = not held */
} mt_ckpt_saver;

/* Saves iteration cs->iteration to r->checkpoint.dir: snapshot, every rank writes and fsyncs its
 * file into iter_N.tmp/, rank 0 writes the manifest, renames the folder to iter_N/, replaces the
 * tracker, then deletes saves beyond checkpoint.keep. Collective over the world: every rank
 * returns the same status (a rank's failure is reported by all). The previous save is untouched
 * until the new one is complete. log: the logging rank's stream (NULL = quiet). */
mt_status mt_ckpt_save(mt_ckpt_saver *s, const mt_recipe *r, const mt_model *m, const mt_parallel_state *ps,
                       const mt_ckpt_state *cs, FILE *log);
/* The same in two halves, so the writing can overlap training (checkpoint.async_save): begin
 * snapshots this rank's state (the stall), prepares the folder and starts writing (on a thread
 * when async); poll, called by every rank at the same points, finishes the save (exchange,
 * manifest, publish) once every rank's file is written — at once with wait — and sets *done.
 * A begin while a save is in flight first finishes that one. */
mt_status mt_ckpt_save_begin(mt_ckpt_saver *s, const mt_recipe *r, const mt_model *m, const mt_parallel_state *ps,
                             const mt_ckpt_state *cs, int async, FILE *log);
mt_status mt_ckpt_save_poll(mt_ckpt_saver *s, const mt_parallel_state *ps, int wait, FILE *log, int *done);
/* Computes this rank's pieces and allocates (and touches) the snapshot before training starts, so
 * that the first save does not pay for it; optional (the first save does it otherwise). */
mt_status mt_ckpt_saver_prepare(mt_ckpt_saver *s, const mt_model *m, const mt_parallel_state *ps);
/* Before the first iteration (collective; checkpoint_dir.c): rank 0 makes sure checkpoint.dir is a
 * folder it can write in, takes its lock for the whole run (a second run saving there is refused,
 * naming the holder's pid and host), removes the remnants of interrupted saves; then the free
 * space must hold one save (every rank's snapshot: call mt_ckpt_saver_prepare first). Every rank
 * returns the same verdict; the message names checkpoint.dir and the fix. */
mt_status mt_ckpt_dir_open(mt_ckpt_saver *s, const mt_recipe *r, const mt_parallel_state *ps, mt_backend *be,
                           FILE *log);
/* Frees the tables and releases the folder's lock; a save still in flight is waited for but not published. */
void mt_ckpt_saver_free(mt_ckpt_saver *s, mt_backend *be);

/* Where a load comes from: r->checkpoint.load (a checkpoint folder with a tracker, or one save's
 * folder), or after an automatic restart (mt_restart_count > 0) r->checkpoint.dir. Fills path
 * with the save's folder; *found = 0 when there is nothing to load (no load asked, or a
 * checkpoint folder without any save yet: Megatron starts from scratch then, and so do we, with a
 * note in `note`). Errors: the folder does not exist, the asked iteration is not there. */
mt_status mt_ckpt_resolve(const mt_recipe *r, char *path, size_t n_bytes, int *found, char *note, size_t note_bytes);

/* Which attempt of the job this is: MT_RESTART_COUNT (mtrain launch --max-restarts, as torchrun's
 * TORCHELASTIC_RESTART_COUNT), else SLURM_RESTART_COUNT (a requeued Slurm job: sbatch --requeue,
 * scontrol requeue, a node failure); 0 for the first attempt. *var: the variable that said so. */
int mt_restart_count(const char **var);

/* For the commands that read a save with the recipe's tokenizer (generate, logprobs): the save's
 * manifest must name the recipe's data.tokenizer (ids of another tokenizer mean nonsense), and
 * its recipe the same model.norm, norm_eps, activation, position, rope_theta and bias; tool
 * ("mtrain generate") and verb ("generate") go into the messages; log (NULL = quiet) gets one line
 * describing the save. *iteration = the save's iteration. */
mt_status mt_ckpt_check_tokenizer(const char *ckpt_path, const mt_recipe *r, const char *tool, const char *verb,
                                  FILE *log, int64_t *iteration);
/* Opens the recipe's tokenizer (data.tokenizer, data.vocab, data.merges); MT_ERR_CONFIG when it has
 * more ids than model.vocab. */
mt_status mt_recipe_tokenizer_open(const mt_recipe *r, mt_tokenizer **tok);

/* Loads the save in folder `path` into this rank's model (any layout: the pieces are read in
 * global coordinates) and fills cs (zeros under checkpoint.finetune; optimizer_steps 0 under
 * no_load_optim). Errors name the file and tensor: a model that does not match, missing,
 * truncated or corrupt files, a damaged manifest. Not collective. */
mt_status mt_ckpt_load(const mt_recipe *r, mt_model *m, const mt_parallel_state *ps, const char *path,
                       mt_ckpt_state *cs, FILE *log);

#endif
