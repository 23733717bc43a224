/* plan.h — `mtrain plan`: what a layout costs before spending GPU hours. From a validated
 * recipe and a device (plan/plan_gpu.c) it derives parameter counts (total, active, per rank),
 * FLOPs per iteration (Megatron's formula generalised), memory per rank (weights, gradients,
 * optimizer state, activations in flight; Korthikanti et al. 2022 for bf16 mixed precision,
 * the trainer's own layout for fp32), the pipeline bubble, communication volumes per group,
 * time and days to train, and a search over layouts ranked by a documented cost model.
 * The cost model is written down in docs/plan.md; each formula names its source there.
 * Files (plan/, the planner's one home): plan_gpu.c (device table), plan_model.c (counts, FLOPs
 * from core/model/model_flops.c, memory, comm volumes; mt_plan_compute's steps), plan_cost.c (the
 * cost model: time per step), plan_search.c (--search), plan_print.c (table and JSON),
 * plan_device_file.c (measured device profiles as JSON), plan_probe.c (--probe: measures one),
 * schedule_sim.c and schedule_timeline.c (the pipeline schedules timed and drawn), plan_compare.c
 * (--compare: the plan against a finished run), plan_views.c (--timeline / --compare output).
 * Rule: pure functions of (recipe, device, options): no I/O except the print and profile functions, no
 * exit; counts are n_*, sizes in bytes *_bytes (doubles: exact for integers below 2^53). */
#ifndef MT_PLAN_H
#define MT_PLAN_H

#include <stdio.h>

#include "core/recipe/recipe.h"
#include "core/status.h"

/* ---------- devices (plan_gpu.c) ---------- */

/* A measured device profile (what `mtrain plan --probe` records, plan/plan_probe.c; the cost model
 * uses it when `probed` is set). Rates at 1 thread and at `threads` threads (the run's threads per rank interpolate
 * between them); GEMMs over a few shapes (M, N, K: out[M x N] = in[M x K] W[N x K]^T). */
#define MT_PROBE_MAX_GEMM 8
typedef struct {
    int threads;                          /* threads of the "_nt" figures (all cores) */
    int n_gemm;
    double gemm_mnk[MT_PROBE_MAX_GEMM][3];
    double gemm_flops_1t[MT_PROBE_MAX_GEMM], gemm_flops_nt[MT_PROBE_MAX_GEMM]; /* FLOP/s */
    double stream_gbs_1t, stream_gbs_nt;  /* streaming op (a + b -> c), GB/s of bytes moved */
    double op_overhead_s;                 /* one small backend op call (its fixed cost) */
    double attn_flops_1t, attn_flops_nt;  /* attention fwd + bwd, Megatron's FLOPs (3 x 4 s^2 d per head) per s */
    double comm_alpha_s;                  /* 2-rank allreduce of 4 bytes: latency */
    double comm_gbs;                      /* 2-rank allreduce bus bandwidth (2(n-1)/n bytes / time), GB/s */
    double coll_alpha_s;                  /* 2-rank allreduce of 4 bytes right after ~5 ms of the backend's GEMMs on
                                           * both ranks, as a tensor-parallel collective meets it: the latency
                                           * plus the wait for the slower rank (the collectives' alpha; point-to-
                                           * point messages keep comm_alpha_s) */
    /* the same rates per rank while 2 ranks run at once (cores / 2 threads each; 0 = not measured):
     * what each rank of a multi-rank run on this node gets */
    double gemm_flops_2r[MT_PROBE_MAX_GEMM], stream_gbs_2r, attn_flops_2r;
} mt_device_probe;

typedef struct {
    const char *name;          /* "a100-80g": what --gpu takes */
    const char *desc;          /* "NVIDIA A100 SXM4 80GB" */
    double peak_bf16_tflops;   /* dense bf16 tensor-core peak (no sparsity), TFLOP/s */
    double peak_fp32_tflops;   /* plain fp32 (no TF32) peak, TFLOP/s */
    double mem_bytes;          /* device memory as the driver reports it */
    double hbm_gbs;            /* memory bandwidth, GB/s */
    double nvlink_gbs;         /* intra-node link per GPU, one direction, GB/s */
    double net_gbs;            /* inter-node network per GPU (one NIC per GPU), one direction, GB/s */
    int gpus_per_node;
    int is_host;               /* the CPU of this machine (mt_gpu_host), not a GPU */
    int n_sms;                 /* streaming multiprocessors (wave quantisation); 0 = unknown */
    double sustained_frac;     /* measured large-GEMM rate / datasheet peak (the sustained clock); 0 = 1 */
    double hbm_frac;           /* measured achievable memory bandwidth / datasheet hbm_gbs; 0 = 1 */
    int probed;                /* 1: the numbers below come from `mtrain plan --probe` (a device profile) */
    mt_device_probe probe;
    char name_buf[64], desc_buf[160]; /* storage for name / desc of a profile read from a file */
    double peak_fp8_tflops;    /* dense fp8 tensor-core peak, TFLOP/s; 0 = no fp8 (A100, the host) */
    double tile_k0[2];         /* a GEMM output tile's fixed cost (prologue, epilogue) in K-steps of its own
                                * precision: [0] 2-byte, [1] 1-byte (fp8) operands; 0 = not measured (none) */
    double attn_frac;          /* a fused (flash) attention kernel's best published rate / datasheet bf16 peak;
                                * 0 = none published: the GEMMs' sustained_frac */
} mt_gpu_spec;

int mt_gpu_n_specs(void);
const mt_gpu_spec *mt_gpu_spec_at(int i);
/* Case-insensitive name or alias ("h100" = "h100-80g"); NULL when unknown. */
const mt_gpu_spec *mt_gpu_find(const char *name);
/* "a100-40g, a100-80g, ..." for messages. */
const char *mt_gpu_names(void);
/* Bytes/s a streaming pass reaches on g: hbm_gbs x hbm_frac (0 when the bandwidth is unknown). */
double mt_gpu_hbm_bw(const mt_gpu_spec *g);
/* The fraction of the datasheet peak g's large GEMMs sustain: sustained_frac, 1 when unset. */
double mt_gpu_sustained_frac(const mt_gpu_spec *g);
/* This machine as a pseudo device: physical memory, peak_tflops as given (0 = unknown). */
void mt_gpu_host(mt_gpu_spec *out, double peak_tflops);

/* ---------- options of the estimate ---------- */

enum { MT_FP8_DELAYED = 0, MT_FP8_TENSORWISE = 1 };

typedef struct {
    double mfu;          /* model FLOPs utilisation assumed for time and days (default 0.40) */
    double tflops;       /* achieved TFLOP/s per GPU in Megatron's accounting (counts recompute); 0 = not given */
    double step_ms;      /* a measured step time; 0 = not given */
    double gemm_eff;     /* cost model: fixed matmul efficiency ceiling (default 0.70); 0 = the shape model */
    double link_eff;     /* cost model: achieved fraction of link bandwidth (default 0.80) */
    double usable_frac;  /* a layout fits when it needs at most this fraction of device memory (0.90) */
    /* the software being modelled (defaults: mtrain's own): */
    int megatron_activations; /* bf16: activations as Megatron-LM keeps them (Korthikanti et al. 2022: dropout
                               * masks, the attention scores of a non-flash softmax) instead of the buffers
                               * mtrain's trainer allocates (mt_act_layout_build in bf16) */
    int unfused_attention;   /* 1: attention scores materialised (Megatron-LM 2021: its causal softmax reads the
                              * causal half and writes s x s, dropout passes s x s); 0: a flash-style fused
                              * kernel (causal half, no s x s bytes) */
    double dropout;          /* hidden / attention dropout of the modelled run (masks written and read); 0 = none */
    double grad_reduce_bytes;/* bytes per gradient element in the dp reduction; 0 = by mode (4: fp32 main grads,
                              * Megatron with bf16; Megatron fp16 runs reduce in 2) */
    double grad_accum_bytes; /* bytes per local parameter per micro-batch of a separate gradient-accumulation
                              * pass (Megatron-LM 2021, fp16: autograd's add into .grad, read 2 + 2,
                              * write 2 = 6); 0 = the weight-gradient GEMM accumulates in place (mtrain) */
    /* passes of Megatron-LM 2021 on PyTorch 1.8 that mtrain's kernels do not make (docs/plan.md, "Calibration";
     * each 1 = charged, 0 = mtrain's fused kernels): */
    int bias_add_pass;       /* the QKV bias added by its own pass after the GEMM (F.linear on a 3-D input:
                              * matmul, then add_), in every forward */
    int bias_grad_pass;      /* each bias gradient a reduction over the tokens of the output gradient (QKV,
                              * projection, MLP up and down) */
    int attn_copies;         /* the context's permute copy (every forward), the QKV split's backward cat and
                              * the softmax scale applied to dQ and dK by their own passes */
    int norm_bwd_unfused;    /* the norm backward in two kernels that each read x and dy, and the residual
                              * gradient summed by autograd out of place (read 2, write 1) */
    int nograd_fwd_unfused;  /* with full recompute, the first forward runs without autograd, where the
                              * bias-dropout-add is not fused: bias add, dropout and residual add, 3 kernels */
    double xent_logit_bytes; /* bytes per logit of the loss passes; 0 = mtrain's 16 + 2 x dtype */
    double opt_param_bytes;  /* bytes per locally updated parameter of the whole optimizer step (grad copies,
                              * unscale, norm, Adam, param copy); 0 = AdamW's 30 / 28 + 8 (zero, norm) */
    double grad_copy_bytes;  /* bytes per local parameter per step of the dp reduction's buffer copies (flatten,
                              * divide, copy back), unoverlapped; 0 = none (reduced in place) */
    int fp8;                 /* Megatron's --fp8-format (Transformer Engine): the transformer layers' linear GEMMs
                              * in fp8 at the device's fp8 peak; attention, the output layer and the elementwise
                              * passes stay bf16; MFU stays against the bf16 peak (docs/plan.md, "fp8") */
    int fp8_recipe;          /* Megatron's --fp8-recipe: MT_FP8_DELAYED (its default: the scale from past amaxes) or
                              * MT_FP8_TENSORWISE (current scaling: each tensor scanned for its amax right before
                              * its cast, one more read of every cast input; Transformer Engine's
                              * Float8CurrentScalingQuantizer) */
    int p2p_overlap;         /* Megatron's overlap_p2p_comm (--overlap-p2p-communication; Megatron-LM's default with
                              * the interleaved schedule, forced off without it): each pipeline send / receive
                              * posted early and waited for late, behind a model chunk's forward / backward */
    int tp_comm_overlap;     /* Megatron's --tp-comm-overlap (Transformer Engine's userbuffers): the tensor-parallel
                              * all-gathers / reduce-scatters of a layer overlapped with its GEMMs (needs sp);
                              * the overlaps that take SMs slow their GEMM (docs/plan.md, "Overlap") */
} mt_plan_opts;

void mt_plan_opts_defaults(mt_plan_opts *o);

/* ---------- the plan of one layout (plan_model.c) ---------- */

typedef enum {
    MT_PLAN_TRAINER_FP32 = 0, /* fp32 (or the CPU backend): mtrain's own layout, 4+4+8 bytes per parameter */
    MT_PLAN_MIXED_BF16        /* bf16 params, fp32 grads, fp32 master + Adam m, v (Megatron mixed precision) */
} mt_plan_mode;

/* Parameter counts of the whole model (tp = pp = ep = 1, unpadded vocabulary). */
typedef struct {
    double n_params;         /* every parameter once (tied embedding counted once) */
    double n_active;         /* parameters one token uses (MoE: top_k of the experts) */
    double n_embed;          /* input embedding + learned positions + untied output layer */
    double n_expert;         /* expert MLP parameters (0 for a dense model) */
} mt_plan_params;

/* What one rank of one pipeline stage holds. */
typedef struct {
    int stage;               /* 0 = first, pp-1 = last */
    double n_params;         /* real parameters on the rank */
    double n_elems;          /* buffer elements incl. the trainer's alignment padding */
    double n_expert_elems;   /* of n_elems: expert parameters (sharded over edp, not dp) */
    double n_layer_mbs;      /* (layer, micro-batch) activation sets alive at the peak of the schedule */
    double weights_bytes, grads_bytes;
    double optim_bytes;      /* with the recipe's parallel.distributed_optimizer */
    double optim_nodist_bytes, optim_dist_bytes;
    double acts_bytes;       /* activations at the peak, incl. embedding / output layer */
    double total_bytes;
} mt_plan_rank;

/* Communication of one rank in one iteration: bytes it sends (ring algorithms), and time. */
typedef struct {
    double bytes;
    double n_ops;            /* collectives / messages */
    int network;             /* 1: the group spans nodes (network), 0: within a node (NVLink) */
    double exposed_s;        /* cost model: time not hidden behind compute */
} mt_plan_comm;

typedef struct {
    /* layout */
    int n_gpus, tp, pp, vpp, cp, dp, ep, edp;
    int micro_batch, n_micro, global_batch, seq_length;
    int sp, dist_opt, n_layers_stage; /* layers per stage (uneven stages: the most any stage holds) */
    int uneven;              /* uneven pipeline stages: the first / last stage hold n_layers_first / _last, the
                              * middle ones n_layers_mid (parallel.first_stage_layers ..., docs/plan.md) */
    int n_layers_first, n_layers_mid, n_layers_last;
    mt_recompute recompute;
    mt_plan_mode mode;
    mt_gpu_spec gpu;
    double peak_flops;       /* per GPU, FLOP/s, for the mode's dtype (0 = unknown) */
    /* parameters */
    mt_plan_params params;
    double n_params_padded;  /* as allocated on tp = 1: padded vocabulary, no alignment */
    /* FLOPs */
    double tokens_iter;
    double flops_model_iter; /* 3 passes (fwd + 2x bwd): what MFU counts */
    double flops_hw_iter;    /* plus the recipe's recomputation */
    double flops_full_iter;  /* with full recomputation (Megatron's 96 B s l h^2 ...) */
    int64_t iters, tokens;
    /* memory */
    mt_plan_rank first, last;
    int worst_stage;         /* stage index of the larger total */
    double act_layer_bytes[3][2]; /* one micro-batch, one layer, per rank: [recompute][sp] */
    double capacity_bytes, usable_bytes, need_bytes;
    int fits;
    /* pipeline */
    double bubble;           /* fraction of the step: (p-1) / (v m + p - 1) */
    double bubble_ratio;     /* Megatron's bubble time over ideal time: (p-1) / (v m) */
    double speedup;          /* ideal speed-up over one stage: p / (1 + (p-1)/(v m)) */
    /* communication */
    mt_plan_comm tp_comm, pp_comm, dp_comm, ep_comm, cp_comm;
    /* time */
    double step_s_mfu, days_mfu, days_6tp_mfu;       /* at opts.mfu of peak */
    double step_s_tflops, days_tflops, days_ctp_tflops; /* at opts.tflops (if given); c = 8 with full recompute else 6 */
    double mfu_step, hfu_step, days_step;             /* implied by opts.step_ms (if given) */
    /* cost model */
    double gemm_eff, t_compute_s, t_bubble_s, t_dp_s, t_opt_s, t_step_s, mfu_est;
    double t_gemm_s, t_attn_s, t_elem_s;   /* of t_compute_s: GEMMs, attention core, elementwise / norm passes */
    double t_grad_zero_s;                   /* of t_opt_s: zeroing the gradient buffer (the rest: the optimizer's
                                             * passes and the gradient norm's read) */
    double gemm_rate;                       /* FLOP/s the model runs one layer's GEMMs at (fwd + bwd) */
    double t_mb_s;                          /* one micro-batch on the slowest stage, its exposed comm included */
    double t_emb_ar_s;                      /* of t_dp_s: the tied embedding's gradient allreduce (first <-> last
                                             * stage, pp > 1) */
    int threads_rank;                       /* host: threads per rank assumed (cores / ranks on the node) */
    /* overlap (docs/plan.md, "Overlap"): what is switched on, and each term before and after */
    int ovl_grad_reduce, ovl_param_gather, ovl_tp_comm; /* parallel.overlap_grad_reduce, .overlap_param_gather,
                                                         * opts.tp_comm_overlap (0 when it does not apply) */
    double n_buckets;                       /* dp buckets of the worst stage (parallel.ddp_bucket_size) */
    double t_fwd_mb_s, t_bwd_mb_s;          /* one micro-batch's forward / backward (with the recomputed forward)
                                             * on the slowest stage: the windows the dp overlaps hide behind */
    double dp_rs_s, dp_ag_s;                /* the dp reduction (reduce-scatter, or allreduce without the
                                             * distributed optimizer) and the param all-gather, unoverlapped */
    double dp_rs_exposed_s, dp_ag_exposed_s;/* of them, what stays exposed */
    double tp_unoverlapped_s;               /* the tp collectives' time before --tp-comm-overlap */
    int ovl_p2p;                            /* opts.p2p_overlap applied (interleaved schedule) */
    double pp_unoverlapped_s;               /* the pipeline transfers' time before it */
    double tp_gemm_slow_s;                  /* compute added by the overlaps that take SMs from their GEMMs */
    int fp8;                                /* the layers' linear GEMMs planned in fp8 (opts.fp8 on a device with an
                                             * fp8 peak) */
    double peak_fp8_flops;                  /* per GPU, FLOP/s (0 = none) */
    double mfu_fp8_est;                     /* model FLOPs over the fp8 peak: the other convention, for
                                             * comparison with reports that use it */
    double bubble_sim_makespan;             /* uneven stages: the schedule simulator's makespan in units of the
                                             * slowest stage's F + B (m + p - 1 when even) */
    char notes[2048];        /* warnings, one per line */
} mt_plan;

/* Cost model of one GEMM C[M x N] = A[M x K] B[K x N] on a GPU (plan_model.c, docs/plan.md):
 * roofline time max(math, memory) with the output tiled in MT_PLAN_TILE_M x MT_PLAN_TILE_N tiles,
 * tiles spread over the SMs in whole waves, each tile costing K + g->tile_k0 K-steps; peak_flops the dtype's peak (FLOP/s), elem_bytes its
 * size. Seconds; mt_plan_gemm_eff = 2 M N K / (time * peak). A device without SM count or
 * bandwidth (the host) gets no quantisation / memory term. `batch` independent GEMMs share waves. */
#define MT_PLAN_TILE_M 128
#define MT_PLAN_TILE_N 256
double mt_plan_gemm_time(const mt_gpu_spec *g, double peak_flops, double elem_bytes, double batch, double M, double N,
                         double K);
double mt_plan_gemm_eff(const mt_gpu_spec *g, double peak_flops, double elem_bytes, double batch, double M, double N,
                        double K);

/* A device profile as JSON (plan_device_file.c): save writes what `mtrain plan --probe` measured;
 * load reads one into out (a host device with `probed` set); MT_ERR_DATA names the file and key. */
mt_status mt_device_profile_save(const char *path, const mt_gpu_spec *g);
mt_status mt_device_profile_load(const char *path, mt_gpu_spec *out);
/* The host's GEMM rate (FLOP/s) for one out[M x N] = in[M x K] W^T at `threads` threads, from the
 * probe (log-interpolated over the probed shapes' sizes, linear in threads). */
double mt_probe_gemm_rate(const mt_device_probe *pr, double M, double N, double K, int threads);

/* Time left exposed when comm_s of communication overlaps compute_s of compute, both cut into
 * n_chunks equal chunks where chunk i's communication needs chunk i's compute done (or the reverse):
 * the two-stage pipeline's makespan beyond the compute, max(0, comm - compute) + min(comm, compute) /
 * n_chunks. n_chunks <= 0: independent work side by side (no chunk waits), max(0, comm - compute). */
double mt_plan_overlap_exposed(double comm_s, double compute_s, double n_chunks);
/* The data-parallel overlaps under an interleaved schedule with v model chunks (Megatron-Core schedules.py,
 * forward_backward_pipelining_with_interleaving, with align_grad_reduce / align_param_gather, the defaults):
 * each chunk's gradient reduction is launched when its last micro-batch's backward is done, and the chunks
 * finish one by one through the last round of backwards (each chunk `slot_s` of compute); the reductions
 * queue on one link, v equal messages of total_s / v released at slot, 2 slot, ..., v slot. Returns what
 * shows beyond the last release: at least one chunk's reduction (the chunk finished last). */
double mt_plan_chunk_reduce_exposed(double total_s, int v, double slot_s);
/* The mirror for the parameter all-gathers: chunks 0 and 1 are gathered from the step's start, chunk c
 * (c >= 2) is launched when chunk c - 1's first forward starts, and chunk c's first forward waits for its
 * gather; each chunk's first round of forwards takes slot_s. Returns the delay of the round's end. */
double mt_plan_chunk_gather_exposed(double total_s, int v, double slot_s);
/* Transformer Engine's SMs held by an overlap that runs on SMs ("pipeline" and "bulk" methods;
 * "ring_exchange" uses the copy engines), and its splits (transformer_engine/pytorch/module/base.py,
 * initialize_ub defaults: num_sm 16, num_splits 4; ring exchange: num_splits = tp). */
#define MT_PLAN_TE_OVERLAP_SMS 16
#define MT_PLAN_TE_PIPELINE_SPLITS 4

/* Bubble and ideal speed-up of p stages, m micro-batches, v virtual stages per rank. */
double mt_plan_bubble_fraction(int p, int m, int v);
double mt_plan_speedup(int p, int m, int v);
/* Megatron's training-time estimate c*T*P / (n*X) in days (c = 6, or 8 with full recompute;
 * P = active parameters for MoE). */
double mt_plan_days_ctp(double c, double tokens, double n_params, int n_gpus, double flops_per_gpu);

/* Parameter counts of the recipe's model (from its layout, mt_param_layout_build, with the
 * unpadded vocabulary); the layout's error when the recipe's shapes do not build. */
mt_status mt_plan_count_params(const mt_recipe *r, mt_plan_params *out);
/* Training FLOPs of one sequence (3 passes; recompute adds its forward work, the output layer
 * excepted), from mt_model_fwd_flops_per_token as mt_model_flops_per_seq (equal to it for
 * recompute none); 0 when the recipe's layout does not build. */
double mt_plan_flops_per_seq(const mt_recipe *r, mt_recompute rc);

/* Plan's own layout checks beyond mt_recipe_validate (node size, interleaving, and the
 * sequence-parallel split, mt_recipe_check_sp_split). Meant for a
 * recipe validated for n_gpus; safe on any (the interleaving check needs dp and the global
 * batch resolved). MT_ERR_CONFIG with one problem per line. */
mt_status mt_plan_check(const mt_recipe *r, int n_gpus, const mt_gpu_spec *gpu);
/* The plan of the recipe's layout on n_gpus devices. r must be validated for n_gpus. */
mt_status mt_plan_compute(const mt_recipe *r, int n_gpus, const mt_gpu_spec *gpu, const mt_plan_opts *o, mt_plan *p);

/* ---------- search (plan_search.c) ---------- */

#define MT_PLAN_TOP 10

typedef struct {
    mt_plan plan;
    char reason[320];        /* one line: where the step time goes and the memory */
} mt_plan_candidate;

typedef struct {
    int n_gpus;
    mt_gpu_spec gpu;
    long n_tried, n_valid, n_fit;
    mt_plan_candidate top[MT_PLAN_TOP];
    int n_top;
    int have_faster_nofit;
    mt_plan_candidate faster_nofit; /* the fastest layout that does not fit, when faster than #1 */
    long n_faster_nofit;
    int have_smallest;
    mt_plan_candidate smallest;     /* the valid layout needing the least memory (when none fits) */
    int recipe_rank;         /* 1-based rank of the recipe's own layout among those that fit; 0 = not among them */
    double recipe_step_s;    /* its estimated step time, 0 when invalid / not fitting */
    char why[1024];          /* why #1 wins */
    char first_problem[512]; /* when nothing is valid: the first validation message */
} mt_plan_search_result;

/* Tries every valid (tp in {1,2,4,8} <= node, pp | layers, vpp, dp, ep (MoE), micro-batch
 * in {1,2,4,8}, recompute, sp, distributed optimizer) for n_gpus, keeps those that fit and
 * ranks them by the cost model's step time. Keeps the recipe's model, batch and cp. */
mt_status mt_plan_search(const mt_recipe *r, int n_gpus, const mt_gpu_spec *gpu, const mt_plan_opts *o,
                         mt_plan_search_result *res);

/* ---------- output (plan_print.c) ---------- */

/* One line "tp 8 pp 16 vpp 1 dp 8 mb 1 sp on dopt on rc selective" into buf. */
const char *mt_plan_layout_str(const mt_plan *p, char *buf, size_t n_bytes);
void mt_plan_print(FILE *f, const char *config, const mt_plan *p, const mt_plan_opts *o);
void mt_plan_print_json(FILE *f, const char *config, const mt_plan *p, const mt_plan_opts *o);
void mt_plan_print_problems_json(FILE *f, const char *config, int n_gpus, const char *problems);
void mt_plan_search_print(FILE *f, const char *config, const mt_plan_search_result *s, const mt_plan_opts *o);
void mt_plan_search_print_json(FILE *f, const char *config, const mt_plan_search_result *s, const mt_plan_opts *o);

#endif
