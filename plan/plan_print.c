/* plan_print.c — `mtrain plan` output: the readable report of one layout, the search's top
 * ten, and the same as JSON (one object; numbers in base units: bytes, FLOPs, seconds).
 * Rule: printing only; every number comes from plan_model.c / plan_search.c. */
#include <math.h>
#include <string.h>

#include "core/json_string.h"
#include "plan/plan.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define MIB (1024.0 * 1024.0)

static const char *const k_rc[] = { "none", "selective", "full" };

static const char *count_str(double n, char *buf, size_t n_bytes) {
    if (n >= 1e9) snprintf(buf, n_bytes, "%.2f B", n / 1e9);
    else if (n >= 1e6) snprintf(buf, n_bytes, "%.2f M", n / 1e6);
    else if (n >= 1e3) snprintf(buf, n_bytes, "%.2f K", n / 1e3);
    else snprintf(buf, n_bytes, "%.0f", n);
    return buf;
}

static const char *flops_str(double f, char *buf, size_t n_bytes) {
    if (f >= 1e18) snprintf(buf, n_bytes, "%.3g EFLOP", f / 1e18);
    else if (f >= 1e15) snprintf(buf, n_bytes, "%.3g PFLOP", f / 1e15);
    else if (f >= 1e12) snprintf(buf, n_bytes, "%.3g TFLOP", f / 1e12);
    else snprintf(buf, n_bytes, "%.3g GFLOP", f / 1e9);
    return buf;
}

static const char *bytes_str(double b, char *buf, size_t n_bytes) {
    if (b >= GIB) snprintf(buf, n_bytes, "%.2f GiB", b / GIB);
    else if (b >= MIB) snprintf(buf, n_bytes, "%.2f MiB", b / MIB);
    else if (b >= 1024) snprintf(buf, n_bytes, "%.1f KiB", b / 1024);
    else snprintf(buf, n_bytes, "%.0f B", b);
    return buf;
}

static const char *dur_str(double s, char *buf, size_t n_bytes) {
    if (s >= 86400) snprintf(buf, n_bytes, "%.1f days", s / 86400);
    else if (s >= 3600) snprintf(buf, n_bytes, "%.1f hours", s / 3600);
    else if (s >= 60) snprintf(buf, n_bytes, "%.1f minutes", s / 60);
    else snprintf(buf, n_bytes, "%.1f s", s);
    return buf;
}

static const char *link_str(const mt_plan_comm *c, const mt_gpu_spec *g) {
    if (g->is_host) return "shared memory";
    return c->network ? "network" : "NVLink";
}

/* Uneven stages: "first 7 layers, middle 8, last 7" (no middle with two stages) into buf. */
static const char *stage_split_str(const mt_plan *p, char *buf, size_t n_bytes) {
    if (p->pp > 2)
        snprintf(buf, n_bytes, "first %d layers, middle %d, last %d", p->n_layers_first, p->n_layers_mid,
                 p->n_layers_last);
    else
        snprintf(buf, n_bytes, "first %d layers, last %d", p->n_layers_first, p->n_layers_last);
    return buf;
}

const char *mt_plan_layout_str(const mt_plan *p, char *buf, size_t n_bytes) {
    char cp[24] = "", ep[24] = "", st[48] = "";
    if (p->cp > 1) snprintf(cp, sizeof cp, " cp %d", p->cp);
    if (p->ep > 1) snprintf(ep, sizeof ep, " ep %d", p->ep);
    if (p->uneven && p->pp > 2)
        snprintf(st, sizeof st, " (%d/%d/%d layers)", p->n_layers_first, p->n_layers_mid, p->n_layers_last);
    else if (p->uneven)
        snprintf(st, sizeof st, " (%d/%d layers)", p->n_layers_first, p->n_layers_last);
    snprintf(buf, n_bytes, "tp %d pp %d%s vpp %d%s dp %d%s mb %d sp %s dopt %s rc %s", p->tp, p->pp, st, p->vpp, cp,
             p->dp, ep, p->micro_batch, p->sp ? "on" : "off", p->dist_opt ? "on" : "off", k_rc[p->recompute]);
    return buf;
}

static void print_verdict(FILE *f, const mt_plan *p, const mt_plan_opts *o) {
    char need[32], has[32], cap[32];
    bytes_str(p->need_bytes, need, sizeof need);
    bytes_str(p->usable_bytes, has, sizeof has);
    bytes_str(p->capacity_bytes, cap, sizeof cap);
    if (p->capacity_bytes <= 0)
        fprintf(f, "  verdict: needs %s per rank; device memory unknown\n", need);
    else if (p->fits)
        fprintf(f, "  verdict: fits (needs %s of %s usable = %.0f%% of %s on %s)\n", need, has, 100 * o->usable_frac,
                cap, p->gpu.name);
    else
        fprintf(f, "  verdict: does NOT fit (needs %s, has %s usable = %.0f%% of %s on %s)\n", need, has,
                100 * o->usable_frac, cap, p->gpu.name);
}

static void print_comm(FILE *f, const char *name, const mt_plan_comm *c, const mt_plan *p) {
    char b[32];
    if (c->n_ops <= 0) {
        fprintf(f, "  %-42s -\n", name);
        return;
    }
    if (p->gpu.is_host)
        fprintf(f, "  %-42s %11s in %8.0f ops over %s\n", name, bytes_str(c->bytes, b, sizeof b), c->n_ops,
                link_str(c, &p->gpu));
    else
        fprintf(f, "  %-42s %11s in %8.0f ops over %-13s ~%.3f s\n", name, bytes_str(c->bytes, b, sizeof b), c->n_ops,
                link_str(c, &p->gpu), c->exposed_s);
}

void mt_plan_print(FILE *f, const char *config, const mt_plan *p, const mt_plan_opts *o) {
    char a[64], b[64], c[64];
    const mt_gpu_spec *g = &p->gpu;
    const int bf16 = p->mode == MT_PLAN_MIXED_BF16;
    fprintf(f, "mtrain plan: %s on %d x %s (%s)\n", config, p->n_gpus, g->name, g->desc);
    if (g->is_host)
        fprintf(f, "  device     host memory %.2f GiB, peak %s\n", g->mem_bytes / GIB,
                g->peak_fp32_tflops > 0 ? "from logging.peak_tflops" : "unknown (set logging.peak_tflops)");
    else
        fprintf(f, "  device     %.0f TFLOP/s bf16 dense (%.1f fp32; GEMMs sustain %.0f%%), %.2f GiB, HBM %.0f GB/s "
                "(%.0f achievable), NVLink %.0f GB/s, network %.0f GB/s per GPU, %d GPUs per node\n",
                g->peak_bf16_tflops, g->peak_fp32_tflops, 100 * mt_gpu_sustained_frac(g),
                g->mem_bytes / GIB, g->hbm_gbs, mt_gpu_hbm_bw(g) / 1e9, g->nvlink_gbs, g->net_gbs, g->gpus_per_node);
    fprintf(f, "  layout     tp %d x pp %d x cp %d x dp %d = %d ranks; vpp %d, ep %d (expert dp %d); micro-batch %d, "
            "%d micro-batches per step, global batch %d\n", p->tp, p->pp, p->cp, p->dp, p->tp * p->pp * p->cp * p->dp,
            p->vpp, p->ep, p->edp, p->micro_batch, p->n_micro, p->global_batch);
    fprintf(f, "             sequence parallel %s, distributed optimizer %s, recompute %s, %s\n", p->sp ? "on" : "off",
            p->dist_opt ? "on" : "off", k_rc[p->recompute],
            bf16 ? "bf16 mixed precision (bf16 weights, fp32 grads, fp32 master + Adam)" : "fp32 (mtrain's trainer layout)");

    fprintf(f, "\nparameters\n");
    fprintf(f, "  total                 %s (%.0f; vocabulary unpadded), %s as allocated (padded vocabulary)\n",
            count_str(p->params.n_params, a, sizeof a), p->params.n_params,
            count_str(p->n_params_padded, b, sizeof b));
    if (p->params.n_expert > 0)
        fprintf(f, "  active per token      %s (experts %s in total)\n", count_str(p->params.n_active, a, sizeof a),
                count_str(p->params.n_expert, b, sizeof b));
    fprintf(f, "  embedding share       %.2f%% (%s)\n", 100 * p->params.n_embed / p->params.n_params,
            count_str(p->params.n_embed, a, sizeof a));
    char split[96];
    if (p->uneven)
        fprintf(f, "  per rank              first stage %s, last stage %s (uneven stages: %s)\n",
                count_str(p->first.n_params, a, sizeof a), count_str(p->last.n_params, b, sizeof b),
                stage_split_str(p, split, sizeof split));
    else
        fprintf(f, "  per rank              first stage %s, last stage %s (%d layers per stage)\n",
                count_str(p->first.n_params, a, sizeof a), count_str(p->last.n_params, b, sizeof b), p->n_layers_stage);

    fprintf(f, "\ncompute per iteration\n");
    fprintf(f, "  tokens                %.0f (%d x %d)\n", p->tokens_iter, p->global_batch, p->seq_length);
    fprintf(f, "  FLOPs                 %s without recompute (model FLOPs), %s with recompute %s, %s with full "
            "recompute\n", flops_str(p->flops_model_iter, a, sizeof a), flops_str(p->flops_hw_iter, b, sizeof b),
            k_rc[p->recompute], flops_str(p->flops_full_iter, c, sizeof c));
    fprintf(f, "  per token             %.4g FLOPs (6 x %sparams = %.4g)\n", p->flops_model_iter / p->tokens_iter,
            p->params.n_expert > 0 ? "active " : "", 6 * p->params.n_active);

    fprintf(f, "\nmemory per rank                          first stage    last stage\n");
#define MEMROW(label, x, y) \
    fprintf(f, "  %-36s %12s  %12s\n", label, bytes_str((x), a, sizeof a), bytes_str((y), b, sizeof b))
    MEMROW(bf16 ? "weights (bf16)" : "weights (fp32)", p->first.weights_bytes, p->last.weights_bytes);
    MEMROW(p->first.n_elems > 0 && p->first.grads_bytes < 3.0 * p->first.n_elems ? "gradients (bf16)" : "gradients (fp32)",
           p->first.grads_bytes, p->last.grads_bytes); /* bf16: --grad-reduce-in-bf16 */
    MEMROW(bf16 ? (p->dist_opt ? "optimizer (master+m+v, distributed)" : "optimizer (master+m+v)")
                : (p->dist_opt ? "optimizer (m+v, distributed)" : "optimizer (m+v)"),
           p->first.optim_bytes, p->last.optim_bytes);
    MEMROW("  without distributed optimizer", p->first.optim_nodist_bytes, p->last.optim_nodist_bytes);
    {
        char label[96];
        if (p->ep > 1 || p->params.n_expert > 0)
            snprintf(label, sizeof label, "  distributed (/%d, experts /%d)", p->dp * p->cp, p->edp);
        else
            snprintf(label, sizeof label, "  distributed (/%d)", p->dp * p->cp);
        MEMROW(label, p->first.optim_dist_bytes, p->last.optim_dist_bytes);
    }
    MEMROW("activations", p->first.acts_bytes, p->last.acts_bytes);
    fprintf(f, "  %-36s %12.1f  %12.1f\n", "  (layer, micro-batch) sets alive", p->first.n_layer_mbs, p->last.n_layer_mbs);
    MEMROW("total", p->first.total_bytes, p->last.total_bytes);
#undef MEMROW
    print_verdict(f, p, o);
    fprintf(f, "  activations of one micro-batch per layer per rank (%s):\n",
            bf16 && o->megatron_activations ? "Megatron-LM's, Korthikanti et al. 2022"
            : bf16                          ? "mtrain's bf16 layout on CUDA; --activations megatron: Megatron-LM's"
                                            : "mtrain's fp32 layout");
    fprintf(f, "                 recompute none   selective        full\n");
    for (int s = 0; s < 2; s++) {
        if (s && p->tp == 1) break;
        fprintf(f, "    sp %-3s      %12s %12s %12s\n", s ? "on" : "off",
                bytes_str(p->act_layer_bytes[0][s], a, sizeof a), bytes_str(p->act_layer_bytes[1][s], b, sizeof b),
                bytes_str(p->act_layer_bytes[2][s], c, sizeof c));
    }

    fprintf(f, "\npipeline\n");
    if (p->pp > 1 && p->uneven)
        fprintf(f, "  bubble                %.1f%% of the step, simulated: the 1F1B tables the trainer runs with each "
                "stage's forward FLOPs (%s; the last + the output layer; B = 2 F); even stages "
                "would give (p-1)/(m+p-1) = %.1f%%; Megatron's bubble/ideal (makespan over m slowest-stage "
                "micro-batches, less 1) = %.1f%%\n  ideal speed-up        %.2f x over one stage (all stages' work over "
                "the makespan)\n", 100 * p->bubble, stage_split_str(p, split, sizeof split),
                100 * mt_plan_bubble_fraction(p->pp, p->n_micro, 1), 100 * p->bubble_ratio, p->speedup);
    else if (p->pp > 1)
        fprintf(f, "  bubble                %.1f%% of the step = (p-1)/(v m + p - 1) with p %d, m %d, v %d; Megatron's "
                "bubble/ideal (p-1)/(v m) = %.1f%%\n  ideal speed-up        %.2f x over one stage (p / (1 + (p-1)/(v m)))\n",
                100 * p->bubble, p->pp, p->n_micro, p->vpp, 100 * p->bubble_ratio, p->speedup);
    else
        fprintf(f, "  no pipeline parallelism (pp 1): no bubble\n");

    fprintf(f, "\ncommunication per rank per iteration (bytes sent; time at %.0f%% of link bandwidth)\n",
            100 * o->link_eff);
    print_comm(f, p->sp ? "tp allgather + reduce-scatter (sp)" : "tp allreduce", &p->tp_comm, p);
    print_comm(f, "cp ring K/V exchange", &p->cp_comm, p);
    print_comm(f, "pp send/recv", &p->pp_comm, p);
    print_comm(f, p->dist_opt ? "dp reduce-scatter grads + allgather params" : "dp allreduce grads", &p->dp_comm, p);
    print_comm(f, "ep all-to-all (dispatch + combine)", &p->ep_comm, p);

    fprintf(f, "\ntime (%lld iterations, %.4g tokens)\n", (long long)p->iters, (double)p->tokens);
    if (p->peak_flops > 0) {
        fprintf(f, "  at MFU %.0f%% of %.0f TFLOP/s   step %.3f s, %s; 6TP/(nX) = %s\n", 100 * o->mfu,
                p->peak_flops / 1e12, p->step_s_mfu, dur_str(p->days_mfu * 86400, a, sizeof a),
                dur_str(p->days_6tp_mfu * 86400, b, sizeof b));
    }
    if (o->tflops > 0)
        fprintf(f, "  at %.1f TFLOP/s per GPU       step %.3f s, %s (FLOPs with recompute %s); %dTP/(nX) = %s\n",
                o->tflops, p->step_s_tflops, dur_str(p->days_tflops * 86400, a, sizeof a), k_rc[p->recompute],
                p->recompute == MT_RECOMPUTE_FULL ? 8 : 6, dur_str(p->days_ctp_tflops * 86400, b, sizeof b));
    if (o->step_ms > 0) {
        if (p->peak_flops > 0)
            fprintf(f, "  measured step %.1f ms        MFU %.1f%%, HFU %.1f%% (with recompute), %s\n", o->step_ms,
                    100 * p->mfu_step, 100 * p->hfu_step, dur_str(p->days_step * 86400, a, sizeof a));
        else
            fprintf(f, "  measured step %.1f ms        %s (peak unknown: no MFU)\n", o->step_ms,
                    dur_str(p->days_step * 86400, a, sizeof a));
    }
    if (p->t_step_s > 0) {
        const double T = p->t_step_s;
        char eff[64];
        if (p->peak_flops > 0)
            snprintf(eff, sizeof eff, "matmul efficiency %.0f%%", 100 * p->gemm_eff);
        else
            snprintf(eff, sizeof eff, "%.1f GFLOP/s", p->gemm_rate / 1e9);
        fprintf(f, "  cost model estimate      step %.3f s, MFU %.1f%%, %s: compute %.0f%% (GEMMs %.0f%% at %s, "
                "attention %.0f%%, elementwise %.0f%%), bubble %.1f%%, tp %.1f%%, cp %.1f%%, pp %.1f%%, "
                "dp %.1f%%, ep %.1f%%, optimizer %.1f%%\n",
                T, 100 * p->mfu_est, dur_str(T * (double)p->iters, a, sizeof a), 100 * p->t_compute_s / T,
                100 * p->t_gemm_s / T, eff, 100 * p->t_attn_s / T, 100 * p->t_elem_s / T,
                100 * p->t_bubble_s / T, 100 * p->tp_comm.exposed_s / T, 100 * p->cp_comm.exposed_s / T,
                100 * p->pp_comm.exposed_s / T, 100 * p->t_dp_s / T, 100 * p->ep_comm.exposed_s / T, 100 * p->t_opt_s / T);
    } else if (p->peak_flops <= 0) {
        fprintf(f, "  peak FLOP/s unknown: set logging.peak_tflops or pass --gpu\n");
    }
    if (p->notes[0]) {
        fprintf(f, "\nnotes\n  ");
        for (const char *s = p->notes; *s; s++) {
            fputc(*s, f);
            if (*s == '\n') fputs("  ", f);
        }
        fputc('\n', f);
    }
}

/* ---------- JSON ---------- */

static void json_num(FILE *f, double x) {
    if (!isfinite(x)) fputs("null", f);
    else if (x == floor(x) && fabs(x) < 9e15) fprintf(f, "%.0f", x);
    else fprintf(f, "%.9g", x);
}

#define KV_NUM(name, x)                  \
    do {                                 \
        fprintf(f, "%s\"%s\": ", sep, name); \
        json_num(f, (x));                \
        sep = ", ";                      \
    } while (0)
#define KV_STR(name, x)                  \
    do {                                 \
        fprintf(f, "%s\"%s\": ", sep, name); \
        mt_json_write_string(f, (x));                \
        sep = ", ";                      \
    } while (0)

static void json_rank(FILE *f, const char *name, const mt_plan_rank *r) {
    const char *sep = "";
    fprintf(f, "\"%s\": {", name);
    KV_NUM("stage", r->stage);
    KV_NUM("n_params", r->n_params);
    KV_NUM("n_elems", r->n_elems);
    KV_NUM("weights_bytes", r->weights_bytes);
    KV_NUM("grads_bytes", r->grads_bytes);
    KV_NUM("optim_bytes", r->optim_bytes);
    KV_NUM("optim_nodist_bytes", r->optim_nodist_bytes);
    KV_NUM("optim_dist_bytes", r->optim_dist_bytes);
    KV_NUM("acts_bytes", r->acts_bytes);
    KV_NUM("n_layer_mbs", r->n_layer_mbs);
    KV_NUM("total_bytes", r->total_bytes);
    fputc('}', f);
}

static void json_comm(FILE *f, const char *name, const mt_plan_comm *c) {
    const char *sep = "";
    fprintf(f, "\"%s\": {", name);
    KV_NUM("bytes", c->bytes);
    KV_NUM("n_ops", c->n_ops);
    KV_STR("link", c->n_ops > 0 ? (c->network ? "network" : "nvlink") : "none");
    KV_NUM("exposed_s", c->exposed_s);
    fputc('}', f);
}

static void json_plan_body(FILE *f, const mt_plan *p) {
    const char *sep = "";
    fputs("\"layout\": {", f);
    KV_NUM("gpus", p->n_gpus);
    KV_NUM("tp", p->tp);
    KV_NUM("pp", p->pp);
    KV_NUM("vpp", p->vpp);
    KV_NUM("cp", p->cp);
    KV_NUM("dp", p->dp);
    KV_NUM("ep", p->ep);
    KV_NUM("micro_batch", p->micro_batch);
    KV_NUM("n_micro", p->n_micro);
    KV_NUM("global_batch", p->global_batch);
    fprintf(f, ", \"sequence_parallel\": %s, \"distributed_optimizer\": %s", p->sp ? "true" : "false",
            p->dist_opt ? "true" : "false");
    KV_STR("recompute", k_rc[p->recompute]);
    KV_STR("precision", p->mode == MT_PLAN_MIXED_BF16 ? "bf16" : "fp32");
    fputs("}, \"params\": {", f);
    sep = "";
    KV_NUM("n_params", p->params.n_params);
    KV_NUM("n_active", p->params.n_active);
    KV_NUM("n_embed", p->params.n_embed);
    KV_NUM("n_expert", p->params.n_expert);
    KV_NUM("n_params_padded", p->n_params_padded);
    KV_NUM("embed_share", p->params.n_embed / p->params.n_params);
    KV_NUM("n_params_first_rank", p->first.n_params);
    KV_NUM("n_params_last_rank", p->last.n_params);
    fputs("}, \"flops\": {", f);
    sep = "";
    KV_NUM("tokens_iter", p->tokens_iter);
    KV_NUM("model_iter", p->flops_model_iter);
    KV_NUM("hw_iter", p->flops_hw_iter);
    KV_NUM("full_recompute_iter", p->flops_full_iter);
    fputs("}, \"memory\": {", f);
    json_rank(f, "first", &p->first);
    fputs(", ", f);
    json_rank(f, "last", &p->last);
    sep = ", ";
    KV_NUM("need_bytes", p->need_bytes);
    KV_NUM("capacity_bytes", p->capacity_bytes);
    KV_NUM("usable_bytes", p->usable_bytes);
    fprintf(f, ", \"fits\": %s", p->fits ? "true" : "false");
    fputs(", \"act_layer_bytes\": {", f);
    for (int rc = 0; rc < 3; rc++)
        fprintf(f, "%s\"%s\": [%.0f, %.0f]", rc ? ", " : "", k_rc[rc], p->act_layer_bytes[rc][0],
                p->act_layer_bytes[rc][1]);
    fputs("}}, \"pipeline\": {", f);
    sep = "";
    KV_NUM("bubble", p->bubble);
    KV_NUM("bubble_ratio", p->bubble_ratio);
    KV_NUM("speedup", p->speedup);
    if (p->uneven) {
        fputs(", \"uneven\": true", f);
        fprintf(f, ", \"stage_layers\": {\"first\": %d, \"middle\": %d, \"last\": %d}", p->n_layers_first,
                p->n_layers_mid, p->n_layers_last);
        KV_NUM("makespan_slowest_mbs", p->bubble_sim_makespan);
    }
    fputs("}, \"comm\": {", f);
    json_comm(f, "tp", &p->tp_comm);
    fputs(", ", f);
    json_comm(f, "cp", &p->cp_comm);
    fputs(", ", f);
    json_comm(f, "pp", &p->pp_comm);
    fputs(", ", f);
    json_comm(f, "dp", &p->dp_comm);
    fputs(", ", f);
    json_comm(f, "ep", &p->ep_comm);
    fputs("}, \"time\": {", f);
    sep = "";
    KV_NUM("iters", (double)p->iters);
    KV_NUM("tokens", (double)p->tokens);
    KV_NUM("peak_flops", p->peak_flops);
    KV_NUM("step_s_mfu", p->step_s_mfu);
    KV_NUM("days_mfu", p->days_mfu);
    KV_NUM("days_6tp_mfu", p->days_6tp_mfu);
    KV_NUM("step_s_tflops", p->step_s_tflops);
    KV_NUM("days_tflops", p->days_tflops);
    KV_NUM("days_ctp_tflops", p->days_ctp_tflops);
    KV_NUM("mfu_step", p->mfu_step);
    KV_NUM("hfu_step", p->hfu_step);
    KV_NUM("days_step", p->days_step);
    fputs("}, \"cost_model\": {", f);
    sep = "";
    KV_NUM("gemm_eff", p->gemm_eff);
    KV_NUM("compute_s", p->t_compute_s);
    KV_NUM("gemm_s", p->t_gemm_s);
    KV_NUM("gemm_flops_per_s", p->gemm_rate);
    KV_NUM("attention_s", p->t_attn_s);
    KV_NUM("elementwise_s", p->t_elem_s);
    KV_NUM("bubble_s", p->t_bubble_s);
    KV_NUM("tp_s", p->tp_comm.exposed_s);
    KV_NUM("cp_s", p->cp_comm.exposed_s);
    KV_NUM("pp_s", p->pp_comm.exposed_s);
    KV_NUM("dp_s", p->t_dp_s);
    KV_NUM("ep_s", p->ep_comm.exposed_s);
    KV_NUM("optimizer_s", p->t_opt_s);
    KV_NUM("step_s", p->t_step_s);
    KV_NUM("mfu", p->mfu_est);
    fputs("}", f);
}

static void json_gpu(FILE *f, const mt_gpu_spec *g) {
    const char *sep = "";
    fputs("\"device\": {", f);
    KV_STR("name", g->name);
    KV_STR("desc", g->desc);
    KV_NUM("peak_bf16_tflops", g->peak_bf16_tflops);
    KV_NUM("peak_fp32_tflops", g->peak_fp32_tflops);
    KV_NUM("mem_bytes", g->mem_bytes);
    KV_NUM("hbm_gbs", g->hbm_gbs);
    KV_NUM("hbm_achievable_gbs", mt_gpu_hbm_bw(g) / 1e9);
    KV_NUM("gemm_sustained_frac", mt_gpu_sustained_frac(g));
    KV_NUM("nvlink_gbs", g->nvlink_gbs);
    KV_NUM("net_gbs", g->net_gbs);
    KV_NUM("gpus_per_node", g->gpus_per_node);
    fputs("}", f);
}

static void json_opts(FILE *f, const mt_plan_opts *o) {
    const char *sep = "";
    fputs("\"assumptions\": {", f);
    KV_NUM("mfu", o->mfu);
    KV_NUM("tflops", o->tflops);
    KV_NUM("step_ms", o->step_ms);
    KV_NUM("gemm_eff", o->gemm_eff);
    KV_NUM("link_eff", o->link_eff);
    KV_NUM("usable_frac", o->usable_frac);
    fprintf(f, ", \"activations\": \"%s\"", o->megatron_activations ? "megatron" : "mtrain");
    fputs("}", f);
}

void mt_plan_print_json(FILE *f, const char *config, const mt_plan *p, const mt_plan_opts *o) {
    fputs("{\"ok\": true, \"config\": ", f);
    mt_json_write_string(f, config);
    fputs(", ", f);
    json_gpu(f, &p->gpu);
    fputs(", ", f);
    json_opts(f, o);
    fputs(", ", f);
    json_plan_body(f, p);
    fputs(", \"notes\": ", f);
    mt_json_write_string(f, p->notes);
    fputs("}\n", f);
}

void mt_plan_print_problems_json(FILE *f, const char *config, int n_gpus, const char *problems) {
    fputs("{\"ok\": false, \"config\": ", f);
    mt_json_write_string(f, config);
    fprintf(f, ", \"gpus\": %d, \"problems\": [", n_gpus);
    const char *s = problems;
    int first = 1;
    while (s && *s) {
        const char *e = strchr(s, '\n');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        char line[1200];
        snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line - 1 ? n : sizeof line - 1), s);
        if (!first) fputs(", ", f);
        mt_json_write_string(f, line);
        first = 0;
        s = e ? e + 1 : s + n;
    }
    fputs("]}\n", f);
}

void mt_plan_search_print(FILE *f, const char *config, const mt_plan_search_result *s, const mt_plan_opts *o) {
    char l[200];
    fprintf(f, "mtrain plan --search: %s on %d x %s (%s)\n", config, s->n_gpus, s->gpu.name, s->gpu.desc);
    fprintf(f, "  tried %ld layouts: %ld valid, %ld fit in %.0f%% of device memory\n", s->n_tried, s->n_valid, s->n_fit,
            100 * o->usable_frac);
    if (s->n_top == 0) {
        if (s->have_smallest)
            fprintf(f, "  no layout fits: the smallest, %s, needs %.1f GiB per rank (%.1f GiB usable); use more GPUs "
                    "or a larger device\n", mt_plan_layout_str(&s->smallest.plan, l, sizeof l),
                    s->smallest.plan.need_bytes / GIB, s->smallest.plan.usable_bytes / GIB);
        else
            fprintf(f, "  no valid layout%s%s\n", s->first_problem[0] ? "; first problem: " : "", s->first_problem);
        return;
    }
    if (o->gemm_eff > 0)
        fprintf(f, "  ranked by the cost model's time per token (compute at %.0f%% peak matmul efficiency ceiling, "
                "links at %.0f%%; docs/plan.md)\n\n", 100 * o->gemm_eff, 100 * o->link_eff);
    else
        fprintf(f, "  ranked by the cost model's time per token (matmuls by shape: roofline, %dx%d tiles, waves "
                "over the SMs at the measured sustained rate; attention, elementwise passes by bytes, links at %.0f%%; "
                "docs/plan.md)\n\n", MT_PLAN_TILE_M, MT_PLAN_TILE_N, 100 * o->link_eff);
    fprintf(f, "  #  layout                                                      step s   tokens/s    MFU   mem GiB\n");
    for (int i = 0; i < s->n_top; i++) {
        const mt_plan *p = &s->top[i].plan;
        fprintf(f, "  %-2d %-58s %8.3f %10.0f %5.1f%% %8.1f\n", i + 1, mt_plan_layout_str(p, l, sizeof l), p->t_step_s,
                p->tokens_iter / p->t_step_s, 100 * p->mfu_est, p->need_bytes / GIB);
        fprintf(f, "     %s\n", s->top[i].reason);
    }
    fprintf(f, "\nwhy #1: %s\n", s->why);
}

static void json_candidate(FILE *f, const mt_plan_candidate *c) {
    char l[200];
    fputs("{\"layout_str\": ", f);
    mt_json_write_string(f, mt_plan_layout_str(&c->plan, l, sizeof l));
    fputs(", \"reason\": ", f);
    mt_json_write_string(f, c->reason);
    fputs(", ", f);
    json_plan_body(f, &c->plan);
    fputs("}", f);
}

void mt_plan_search_print_json(FILE *f, const char *config, const mt_plan_search_result *s, const mt_plan_opts *o) {
    fputs("{\"ok\": true, \"config\": ", f);
    mt_json_write_string(f, config);
    fprintf(f, ", \"gpus\": %d, \"n_tried\": %ld, \"n_valid\": %ld, \"n_fit\": %ld, ", s->n_gpus, s->n_tried,
            s->n_valid, s->n_fit);
    json_gpu(f, &s->gpu);
    fputs(", ", f);
    json_opts(f, o);
    fputs(", \"top\": [", f);
    for (int i = 0; i < s->n_top; i++) {
        if (i) fputs(", ", f);
        json_candidate(f, &s->top[i]);
    }
    fputs("], \"why\": ", f);
    mt_json_write_string(f, s->why);
    fprintf(f, ", \"recipe_rank\": %d, \"n_faster_nofit\": %ld", s->recipe_rank, s->n_faster_nofit);
    if (s->have_faster_nofit) {
        fputs(", \"faster_nofit\": ", f);
        json_candidate(f, &s->faster_nofit);
    }
    if (s->have_smallest) {
        fputs(", \"smallest\": ", f);
        json_candidate(f, &s->smallest);
    }
    fputs(", \"first_problem\": ", f);
    mt_json_write_string(f, s->first_problem);
    fputs("}\n", f);
}
