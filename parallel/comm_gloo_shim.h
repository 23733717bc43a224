/* comm_gloo_shim.h — the C face of the Gloo library (C++), for parallel/comm_gloo.c: one Gloo
 * context over TCP, made in two steps so the caller does the rendezvous through its own exchange
 * (no Gloo store): mt_gloo_prepare opens this rank's listening pairs and gives their addresses,
 * the caller gathers every member's blob, mt_gloo_connect connects. Byte counts are bytes here
 * (the shim knows no mt_dtype). Every function returns 0, or -1 with Gloo's message in err (a
 * closed connection, a timeout); nothing throws through it. Built only when Gloo's headers exist
 * (MT_HAVE_GLOO); without them comm_gloo.c answers with a clear error instead. */
#ifndef MT_COMM_GLOO_SHIM_H
#define MT_COMM_GLOO_SHIM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_gloo mt_gloo;

enum { MT_GLOO_F32 = 0, MT_GLOO_SUM = 0, MT_GLOO_MAX = 1 };

/* host: the address this rank listens on (reachable from the others); *blob_bytes: the size of
 * the blob every member hands to mt_gloo_connect (size * an address, this rank's slot unused). */
int mt_gloo_prepare(const char *host, int rank, int size, int timeout_ms, mt_gloo **out, void **blob,
                    size_t *blob_bytes, char *err, size_t err_bytes);
/* blobs: size blobs of blob_bytes, member order */
int mt_gloo_connect(mt_gloo *g, const void *blobs, size_t blob_bytes, char *err, size_t err_bytes);
/* fp32 in place; op MT_GLOO_SUM or MT_GLOO_MAX */
int mt_gloo_allreduce_f32(mt_gloo *g, float *buf, size_t n, int op, char *err, size_t err_bytes);
int mt_gloo_allgather(mt_gloo *g, const void *send, void *recv, size_t bytes_per_rank, char *err, size_t err_bytes);
int mt_gloo_broadcast(mt_gloo *g, void *buf, size_t n_bytes, int root, char *err, size_t err_bytes);
int mt_gloo_barrier(mt_gloo *g, char *err, size_t err_bytes);
/* point to point, all posted at once then waited for (no order deadlocks) */
typedef struct {
    int is_send, peer;
    void *buf;
    size_t n_bytes;
} mt_gloo_p2p;
int mt_gloo_p2p_batch(mt_gloo *g, const mt_gloo_p2p *ops, int n_ops, char *err, size_t err_bytes);
/* closes every connection: the peers' pending and later calls fail promptly */
void mt_gloo_close(mt_gloo *g);
void mt_gloo_free(mt_gloo *g);

#ifdef __cplusplus
}
#endif

#endif
