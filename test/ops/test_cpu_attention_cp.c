/* test_cpu_attention_cp.c — context parallelism's pieces on the CPU backend, in one process:
 *  1. the chunk assignment (parallel/cp_attention.h: mt_cp_chunk, mt_cp_position): for cp = 1 .. 8, cp rank
 *     r holds global chunks r and 2cp-1-r, every global position is held exactly once, and every
 *     rank gets the same causal attention work (sum over its queries of the keys they see);
 *  2. the block attention ops (attention_block_fwd / _bwd) run as the ring runs them (each cp
 *     rank's two local chunks against every rank's chunks at their global positions, merged by
 *     logsumexp; dK / dV summed at their owner) against the full attention_fwd / _bwd of the
 *     whole sequence: out, lse and dqkv of every row at its global position. Shapes: GQA (4 query,
 *     2 kv heads), cp = 2 with chunks of 80 rows (several 64-row query tiles per block and a
 *     block tile boundary inside a chunk), cp = 3 and cp = 4 with small chunks.
 *     Tolerance: |got - want| <= 1e-5 |want| + 1e-5 max|want|. The two computations differ only
 *     in fp32 reassociation: the full op runs one online softmax over a row's keys, the blocks
 *     run one per block and merge them with exp(lse) weights; dK / dV add the blocks' partial
 *     sums in another order. That is a few ulp (6e-8) per merge over <= 8 blocks; a wrong
 *     mask, position or merge is off by O(1e-2) or more;
 *     The K / V blocks are packed out of each rank's qkv and dK / dV put back with copy_rows, as
 *     the ring does;
 *  3. edge rules: a block no query row sees leaves (out, lse) untouched when merging, writes out
 *     0 / lse -inf when not; rows outside the sequence are a configuration error. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test/test.h"
#include "core/backend.h"
#include "parallel/cp_attention.h"

static mt_backend be;

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static float urand(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (float)((rng_state >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static void test_chunks(void) {
    for (int cp = 1; cp <= 8; cp++) {
        const int Tc = 3, T = 2 * cp * Tc, Tl = T / cp;
        int *seen = calloc((size_t)T, sizeof *seen);
        long work0 = -1;
        for (int r = 0; r < cp; r++) {
            if (cp > 1) CHECK(mt_cp_chunk(cp, r, 0) == r && mt_cp_chunk(cp, r, 1) == 2 * cp - 1 - r);
            long work = 0;
            for (int t = 0; t < Tl; t++) {
                const int p = mt_cp_position(T, cp, r, t);
                CHECKF(p >= 0 && p < T, "cp %d rank %d local %d -> %d", cp, r, t, p);
                if (p >= 0 && p < T) seen[p]++;
                work += p + 1; /* keys a causal query at position p sees */
            }
            if (work0 < 0) work0 = work;
            CHECKF(work == work0, "cp %d rank %d: causal work %ld, rank 0 %ld", cp, r, work, work0);
        }
        for (int p = 0; p < T; p++) CHECKF(seen[p] == 1, "cp %d: position %d held %d times", cp, p, seen[p]);
        free(seen);
    }
    CHECK(mt_cp_position(8, 2, 1, 3) == 5); /* cp 2, T = 8: rank 1 holds chunks 1 and 2 (of 2 tokens): local 3 -> 5 */
}

static double maxabs(const float *x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}

/* got[i] vs want[i] for the n_rows x w values of one rank's rows (local row t <-> global row gpos(t)) */
static void check_rows(const char *what, const float *got, const float *want, int B, int Tl, int T, int w, int cp,
                       int r, double scale) {
    double worst = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tl; t++) {
            const int p = mt_cp_position(T, cp, r, t);
            for (int e = 0; e < w; e++) {
                const double g = got[((size_t)b * Tl + t) * w + e], x = want[((size_t)b * T + p) * w + e];
                const double err = fabs(g - x) / (1e-5 * fabs(x) + 1e-5 * scale);
                if (err > worst) worst = err;
            }
        }
    CHECKF(worst <= 1.0, "%s cp %d rank %d: worst err/tol %.3g", what, cp, r, worst);
}

#define MAX_CP 8
#define MAX_RING_BLOCKS (MAX_CP * MAX_CP * 4)
typedef struct {
    int rank, owner; /* the rank computing, the rank whose K / V it uses */
    int qc, kc;      /* local query and key chunk (0 or 1) */
    int gq, gk;      /* their global chunk numbers (gk <= gq: causal) */
} ring_block;

/* Every rank's blocks in ring order; their count (cp <= MAX_CP). */
static int ring_blocks(int cp, ring_block *out) {
    int n = 0;
    for (int r = 0; r < cp; r++)
        for (int s = 0; s < cp; s++) {
            const int owner = (r - s + cp) % cp;
            for (int qc = 0; qc < 2; qc++)
                for (int kc = 0; kc < 2; kc++) {
                    const int gq = mt_cp_chunk(cp, r, qc), gk = mt_cp_chunk(cp, owner, kc);
                    if (gk <= gq) out[n++] = (ring_block){r, owner, qc, kc, gq, gk};
                }
        }
    return n;
}

static void test_ring(int B, int cp, int Tc, int H, int KV, int D) {
    const int T = 2 * cp * Tc, Tl = 2 * Tc, S3 = (H + 2 * KV) * D, SO = H * D;
    const size_t nq = (size_t)B * T * S3, no = (size_t)B * T * SO, nl = (size_t)B * H * T;
    float *qkv = malloc(nq * 4), *out = malloc(no * 4), *lse = malloc(nl * 4), *dout = malloc(no * 4);
    float *dqkv = malloc(nq * 4), *delta = malloc(nl * 4);
    for (size_t i = 0; i < nq; i++) qkv[i] = urand();
    for (size_t i = 0; i < no; i++) dout[i] = urand();
    mt_attention_fwd_args fa = {.out = out, .lse = lse, .qkv = qkv, .B = B, .T = T, .H = H, .KV = KV, .D = D};
    CHECK(MT_BE_CALL(&be, attention_fwd, &fa) == MT_OK);
    mt_attention_bwd_args ba = {.dqkv = dqkv, .delta = delta, .dout = dout, .qkv = qkv, .out = out, .lse = lse,
                                .B = B, .T = T, .H = H, .KV = KV, .D = D};
    CHECK(MT_BE_CALL(&be, attention_bwd, &ba) == MT_OK);

    /* each rank's local tensors: rows of its two chunks */
    const size_t lq = (size_t)B * Tl * S3, lo = (size_t)B * Tl * SO, ll = (size_t)B * H * Tl;
    float *Lqkv = malloc(cp * lq * 4), *Lout = malloc(cp * lo * 4), *Llse = malloc(cp * ll * 4);
    float *Ldout = malloc(cp * lo * 4), *Ldqkv = calloc(cp * lq, 4), *Ldelta = malloc(ll * 4);
    const int SK = 2 * KV * D; /* packed [k | v] rows, as the ring carries them */
    const size_t lk = (size_t)B * Tl * SK;
    float *Lkv = malloc(cp * lk * 4), *Ldkv = calloc(cp * lk, 4);
    for (int r = 0; r < cp; r++)
        for (int b = 0; b < B; b++)
            for (int t = 0; t < Tl; t++) {
                const int p = mt_cp_position(T, cp, r, t);
                memcpy(Lqkv + r * lq + ((size_t)b * Tl + t) * S3, qkv + ((size_t)b * T + p) * S3, (size_t)S3 * 4);
                memcpy(Ldout + r * lo + ((size_t)b * Tl + t) * SO, dout + ((size_t)b * T + p) * SO, (size_t)SO * 4);
            }
    for (int r = 0; r < cp; r++) {
        mt_copy_rows_args c = {.dst = Lkv + r * lk, .src = Lqkv + r * lq + H * D, .rows = B * Tl, .cols = SK,
                               .dst_stride = SK, .src_stride = S3};
        CHECK(MT_BE_CALL(&be, copy_rows, &c) == MT_OK);
    }
    /* the causal (query chunk, key chunk) pairs of every rank, in ring order as
     * parallel/cp_attention.c: step s brings the K / V of rank (r - s) mod cp */
    ring_block blk[MAX_RING_BLOCKS];
    const int n_blk = ring_blocks(cp, blk);
    int started[MAX_CP][2] = {{0}};
    for (int i = 0; i < n_blk; i++) { /* forward */
        const ring_block *k = &blk[i];
        const int r = k->rank, owner = k->owner;
        mt_attention_block_fwd_args a = {.out = Lout + r * lo, .lse = Llse + r * ll, .qkv = Lqkv + r * lq,
                                         .kv = Lkv + owner * lk, .B = B, .T = Tl, .H = H, .KV = KV, .D = D,
                                         .q0 = k->qc * Tc, .Tq = Tc, .q_pos = k->gq * Tc, .k0 = k->kc * Tc,
                                         .Tk = Tc, .k_pos = k->gk * Tc, .merge = started[r][k->qc]};
        CHECK(MT_BE_CALL(&be, attention_block_fwd, &a) == MT_OK);
        started[r][k->qc] = 1;
    }
    for (int i = 0; i < n_blk; i++) { /* backward: dK / dV straight to their owner */
        const ring_block *k = &blk[i];
        const int r = k->rank, owner = k->owner;
        mt_attention_block_bwd_args a = {.dqkv = Ldqkv + r * lq, .dkv = Ldkv + owner * lk,
                                         .delta = Ldelta, .dout = Ldout + r * lo, .qkv = Lqkv + r * lq,
                                         .kv = Lkv + owner * lk, .out = Lout + r * lo,
                                         .lse = Llse + r * ll, .B = B, .T = Tl, .H = H, .KV = KV, .D = D,
                                         .q0 = k->qc * Tc, .Tq = Tc, .q_pos = k->gq * Tc, .k0 = k->kc * Tc,
                                         .Tk = Tc, .k_pos = k->gk * Tc};
        CHECK(MT_BE_CALL(&be, attention_block_bwd, &a) == MT_OK);
    }
    for (int r = 0; r < cp; r++) { /* dK / dV back into the k / v columns of each rank's dqkv */
        mt_copy_rows_args c = {.dst = Ldqkv + r * lq + H * D, .src = Ldkv + r * lk, .rows = B * Tl, .cols = SK,
                               .dst_stride = S3, .src_stride = SK};
        CHECK(MT_BE_CALL(&be, copy_rows, &c) == MT_OK);
    }
    /* lse is (B, H, T): compare it transposed as (B*H rows, T) through a (B, T, H) copy */
    float *lse_t = malloc(nl * 4), *Llse_t = malloc(ll * 4);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) lse_t[((size_t)b * T + t) * H + h] = lse[((size_t)b * H + h) * T + t];
    const double so = maxabs(out, no), sl = maxabs(lse, nl), sd = maxabs(dqkv, nq);
    for (int r = 0; r < cp; r++) {
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int t = 0; t < Tl; t++)
                    Llse_t[((size_t)b * Tl + t) * H + h] = Llse[r * ll + ((size_t)b * H + h) * Tl + t];
        check_rows("out", Lout + r * lo, out, B, Tl, T, SO, cp, r, so);
        check_rows("lse", Llse_t, lse_t, B, Tl, T, H, cp, r, sl);
        check_rows("dqkv", Ldqkv + r * lq, dqkv, B, Tl, T, S3, cp, r, sd);
    }
    free(lse_t), free(Llse_t);
    free(qkv), free(out), free(lse), free(dout), free(dqkv), free(delta);
    free(Lqkv), free(Lout), free(Llse), free(Ldout), free(Ldqkv), free(Ldelta), free(Lkv), free(Ldkv);
}

static void test_edges(void) {
    enum { T = 8, H = 2, KV = 1, D = 4, S3 = (H + 2 * KV) * D };
    float qkv[T * S3], kv[T * 2 * KV * D], out[T * H * D], lse[H * T];
    for (int i = 0; i < T * S3; i++) qkv[i] = urand();
    for (int i = 0; i < T * 2 * KV * D; i++) kv[i] = urand();
    for (int i = 0; i < T * H * D; i++) out[i] = 0.5f;
    for (int i = 0; i < H * T; i++) lse[i] = 1.25f;
    /* keys at positions 100.. are later than every query at 0..3: invisible */
    mt_attention_block_fwd_args a = {.out = out, .lse = lse, .qkv = qkv, .kv = kv, .B = 1, .T = T, .H = H, .KV = KV,
                                     .D = D, .q0 = 0, .Tq = 4, .q_pos = 0, .k0 = 4, .Tk = 4, .k_pos = 100, .merge = 1};
    CHECK(MT_BE_CALL(&be, attention_block_fwd, &a) == MT_OK);
    CHECK(out[0] == 0.5f && out[3 * H * D + D] == 0.5f && lse[0] == 1.25f && lse[T + 3] == 1.25f);
    a.merge = 0;
    CHECK(MT_BE_CALL(&be, attention_block_fwd, &a) == MT_OK);
    CHECK(out[0] == 0.0f && lse[0] == -INFINITY && lse[T + 3] == -INFINITY && out[4 * H * D] == 0.5f);
    a.Tq = 5, a.q0 = 4; /* rows 4 .. 8 of 8 */
    CHECK(MT_BE_CALL(&be, attention_block_fwd, &a) == MT_ERR_CONFIG);
    CHECK_STR_CONTAINS(mt_last_error(), "outside the 8 rows");
}

int main(void) {
    CHECK(mt_backend_cpu_create(&be, 0) == MT_OK);
    test_chunks();
    test_ring(2, 2, 80, 4, 2, 16);
    test_ring(1, 3, 5, 4, 2, 8);
    test_ring(2, 4, 6, 4, 4, 8);
    test_edges();
    mt_backend_destroy(&be);
    TEST_MAIN_END();
}
