/* plan_device_file.c — a measured device profile (`mtrain plan --probe` writes it, `--device FILE`
 * reads it) as one JSON object: the host's memory and cores plus the probe's rates
 * (mt_device_probe, plan.h). Rule: a missing or malformed key is MT_ERR_DATA naming the file and key. */
#include <stdio.h>
#include <string.h>

#include "core/json_tree.h"
#include "plan/plan.h"

mt_status mt_device_profile_save(const char *path, const mt_gpu_spec *g) {
    FILE *f = fopen(path, "w");
    if (!f) return mt_errorf(MT_ERR_IO, "%s: cannot write the device profile", path);
    const mt_device_probe *p = &g->probe;
    fprintf(f, "{\"format\": \"mtrain-device-profile-1\", \"name\": \"probed-cpu\", \"mem_bytes\": %.0f, \"threads\": %d,\n",
            g->mem_bytes, p->threads);
    fprintf(f, " \"stream_gbs_1t\": %.6g, \"stream_gbs_nt\": %.6g, \"op_overhead_s\": %.6g,\n", p->stream_gbs_1t,
            p->stream_gbs_nt, p->op_overhead_s);
    fprintf(f, " \"attn_flops_1t\": %.6g, \"attn_flops_nt\": %.6g, \"comm_alpha_s\": %.6g, \"comm_gbs\": %.6g,\n",
            p->attn_flops_1t, p->attn_flops_nt, p->comm_alpha_s, p->comm_gbs);
    fprintf(f, " \"stream_gbs_2r\": %.6g, \"attn_flops_2r\": %.6g, \"coll_alpha_s\": %.6g,\n", p->stream_gbs_2r,
            p->attn_flops_2r, p->coll_alpha_s);
    fprintf(f, " \"gemm\": [");
    for (int i = 0; i < p->n_gemm; i++)
        fprintf(f, "%s\n  {\"m\": %.0f, \"n\": %.0f, \"k\": %.0f, \"flops_1t\": %.6g, \"flops_nt\": %.6g, \"flops_2r\": %.6g}",
                i ? "," : "", p->gemm_mnk[i][0], p->gemm_mnk[i][1], p->gemm_mnk[i][2], p->gemm_flops_1t[i],
                p->gemm_flops_nt[i], p->gemm_flops_2r[i]);
    fprintf(f, "]}\n");
    if (fclose(f)) return mt_errorf(MT_ERR_IO, "%s: writing the device profile failed", path);
    return MT_OK;
}

static mt_status num(const mt_json_node *o, const char *key, const char *path, double lo, double *out) {
    const mt_json_node *v = mt_json_get(o, key);
    if (!v || v->type != MT_JSON_NUMBER || !(v->number >= lo))
        return mt_errorf(MT_ERR_DATA, "%s: key \"%s\" missing or not a number >= %g; rewrite the profile with "
                         "mtrain plan --probe %s", path, key, lo, path);
    *out = v->number;
    return MT_OK;
}

mt_status mt_device_profile_load(const char *path, mt_gpu_spec *out) {
    mt_json_doc doc;
    mt_status st = mt_json_doc_load(&doc, path);
    if (st != MT_OK) return st;
    mt_gpu_host(out, 0.0);
    mt_device_probe *p = &out->probe;
    const mt_json_node *r = doc.root;
    double x = 0;
    if (!r || r->type != MT_JSON_OBJECT) {
        mt_json_doc_free(&doc);
        return mt_errorf(MT_ERR_DATA, "%s: a device profile is one JSON object (mtrain plan --probe writes one)", path);
    }
    if (st == MT_OK) st = num(r, "mem_bytes", path, 1, &out->mem_bytes);
    if (st == MT_OK) st = num(r, "threads", path, 1, &x);
    p->threads = (int)x;
    if (st == MT_OK) st = num(r, "stream_gbs_1t", path, 0, &p->stream_gbs_1t);
    if (st == MT_OK) st = num(r, "stream_gbs_nt", path, 0, &p->stream_gbs_nt);
    if (st == MT_OK) st = num(r, "op_overhead_s", path, 0, &p->op_overhead_s);
    if (st == MT_OK) st = num(r, "attn_flops_1t", path, 0, &p->attn_flops_1t);
    if (st == MT_OK) st = num(r, "attn_flops_nt", path, 0, &p->attn_flops_nt);
    if (st == MT_OK) st = num(r, "comm_alpha_s", path, 0, &p->comm_alpha_s);
    if (st == MT_OK) st = num(r, "comm_gbs", path, 0, &p->comm_gbs);
    if (st == MT_OK) st = num(r, "stream_gbs_2r", path, 0, &p->stream_gbs_2r);
    if (st == MT_OK) st = num(r, "attn_flops_2r", path, 0, &p->attn_flops_2r);
    if (st == MT_OK) st = num(r, "coll_alpha_s", path, 0, &p->coll_alpha_s);
    const mt_json_node *gm = mt_json_get(r, "gemm");
    if (st == MT_OK && (!gm || gm->type != MT_JSON_ARRAY || gm->n_items < 1 || gm->n_items > MT_PROBE_MAX_GEMM))
        st = mt_errorf(MT_ERR_DATA, "%s: key \"gemm\" must be an array of 1..%d measured shapes", path,
                       MT_PROBE_MAX_GEMM);
    for (size_t i = 0; st == MT_OK && i < gm->n_items; i++) {
        const mt_json_node *e = &gm->items[i];
        st = num(e, "m", path, 1, &p->gemm_mnk[i][0]);
        if (st == MT_OK) st = num(e, "n", path, 1, &p->gemm_mnk[i][1]);
        if (st == MT_OK) st = num(e, "k", path, 1, &p->gemm_mnk[i][2]);
        if (st == MT_OK) st = num(e, "flops_1t", path, 0, &p->gemm_flops_1t[i]);
        if (st == MT_OK) st = num(e, "flops_nt", path, 0, &p->gemm_flops_nt[i]);
        if (st == MT_OK) st = num(e, "flops_2r", path, 0, &p->gemm_flops_2r[i]);
        p->n_gemm = (int)i + 1;
    }
    mt_json_doc_free(&doc);
    if (st != MT_OK) return st;
    out->probed = 1;
    out->gpus_per_node = p->threads;
    snprintf(out->name_buf, sizeof out->name_buf, "probed");
    snprintf(out->desc_buf, sizeof out->desc_buf, "this machine's CPU backend, measured (%s)", path);
    out->name = out->name_buf;
    out->desc = out->desc_buf;
    return MT_OK;
}
