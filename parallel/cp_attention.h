/* cp_attention.h — context parallelism's layer: the attention core of one layer as a ring over the
 * cp group, and RoPE at the global positions of a rank's chunks. With cp = 1 both are the plain
 * backend ops (no communication, no copy), as the tensor-parallel layers are at tp = 1.
 * Layout: every sequence of T tokens is cut into 2 cp chunks of T / (2 cp) tokens and cp rank r
 * holds chunks r and 2 cp - 1 - r (Megatron's causal load balance: each rank gets one early and
 * one late chunk, so every rank does the same attention work), as its local rows [0, Tc) and
 * [Tc, 2 Tc). Attention runs as a ring: K / V blocks travel cp - 1 steps, partial outputs merge by
 * logsumexp; the backward repeats the ring with the dK / dV partials travelling with their
 * blocks and a last step home.
 * The layer takes what it needs as arguments (backend, group, shapes, the ring buffers in the
 * caller's activation memory); it allocates nothing. Exchanges are timed into *clock. */
#ifndef MT_CP_ATTENTION_H
#define MT_CP_ATTENTION_H

#include "core/backend.h"
#include "parallel/comm_clock.h"
#include "parallel/parallel_state.h"

typedef struct {
    mt_backend *be;
    mt_comm *comm;         /* the cp group; NULL when cp = 1 */
    int cp, rank;          /* group size and this rank's index in it */
    mt_dtype act;
    int n_chunks;          /* local sequence = n_chunks chunks of chunk_len tokens: 1 chunk of T at cp = 1, else 2 */
    int chunk_len;
    int chunk_pos[2];      /* global position of each local chunk's first token */
    mt_comm_clock *clock;  /* the ring exchanges' time (NULL: untimed) */
} mt_cp;

/* One layer's attention shapes on this rank: B sequences of T local tokens, H query and KV key /
 * value heads of D, qkv rows of qkv_rows elements ([q heads | k heads | v heads]). */
typedef struct {
    int B, T, H, KV, D, qkv_rows;
    float scale;           /* the softmax scale (0 = 1/sqrt(D); mt_attn_scale) */
} mt_cp_shape;

/* Fills c for sequences of T_global tokens over group g (size 1: cp = 1). Errors name a group that
 * does not match parallel.context = cp, or a sequence that does not split into 2 cp chunks. */
mt_status mt_cp_init(mt_cp *c, mt_backend *be, mt_dtype act, const mt_group *g, int cp, int T_global);

/* The global chunk (of 2 cp) that local chunk c (0 or 1) of cp rank r holds: r and 2 cp - 1 - r.
 * Pure (tested in test/ops/test_cpu_attention_cp.c). */
static inline int mt_cp_chunk(int cp, int r, int c) { return c == 0 ? r : 2 * cp - 1 - r; }
/* The global position of local token t (0 <= t < T / cp) of cp rank r, for sequences of T tokens. */
static inline int mt_cp_position(int T, int cp, int r, int t) {
    if (cp <= 1) return t;
    const int Tc = T / (2 * cp);
    return mt_cp_chunk(cp, r, t / Tc) * Tc + t % Tc;
}

/* RoPE (how->inverse: its transpose) of x (s->B sequences of local rows of s->qkv_rows elements, the
 * first H + KV heads rotated) at the rows' global positions; how gives theta, inverse, rot_dim and
 * interleaved (mt_rope_args), the rest is filled here. */
mt_status mt_cp_rope(const mt_cp *c, const mt_cp_shape *s, void *x, const mt_rope_args *how);
/* out / lse from this rank's qkv and, with cp > 1, the peers' K / V blocks. kv_ring: two blocks of
 * (B T, 2 KV D) act (the activation layout's cp_kv; unused at cp = 1). */
mt_status mt_cp_attention_fwd(mt_cp *c, const mt_cp_shape *s, void *kv_ring, const void *qkv, void *out, void *lse);
/* dqkv (=) from dout and the forward's out / lse. delta: (B H T) f32 scratch; kv_ring as above;
 * dkv_ring: three blocks of (B T, 2 KV D) act (cp_dkv; unused at cp = 1). */
mt_status mt_cp_attention_bwd(mt_cp *c, const mt_cp_shape *s, void *kv_ring, void *dkv_ring, void *delta,
                              const void *qkv, const void *out, const void *lse, const void *dout, void *dqkv);

#endif
