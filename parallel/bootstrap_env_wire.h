/* bootstrap_env_wire.h — internal to the env:// bootstrap (bootstrap_env.c: rank 0's store and the
 * allgather rounds; bootstrap_env_join.c: a rank > 0 joining it): the wire format, the context,
 * and the timed socket I/O and signatures both sides use. Wire format is host byte order: all
 * ranks run the same mtrain binary. */
#ifndef MT_BOOTSTRAP_ENV_WIRE_H
#define MT_BOOTSTRAP_ENV_WIRE_H

#include "parallel/bootstrap_internal.h"

#include "core/sha256.h"

#include <stddef.h>
#include <stdint.h>

#define ENV_MAGIC 0x5342544du  /* "MTBS" */
#define ENV_REJECT 0x4a42544du /* "MTBJ": instead of the host table, u32 length + a message */
#define ENV_VERSION 4u         /* 3: rank 0 sends a nonce first, the hello carries an HMAC; 4: and a
                                  * nonce of the rank's, which rank 0's answer signs */
#define HOST_BYTES 64
#define NONCE_BYTES 32
#define MAX_PENDING 64      /* connections that have not yet said an authenticated hello */
#define HELLO_MS 5000       /* how long one of them may take to say it */
#define MAX_DROP_NOTES 20   /* dropped connections logged, then only counted */
#define TIMEOUT_KEY "parallel.timeout_s"
#define MAC_LABEL "mtrain env:// hello"
#define PROOF_LABEL "mtrain env:// store"

/* rank 0 -> a new connection, first */
typedef struct {
    uint32_t magic, version;
    uint8_t nonce[NONCE_BYTES];
} env_challenge;

/* the answer: mac = HMAC-SHA256(job secret, MAC_LABEL || nonce || every field before mac);
 * rank_nonce: the rank's own challenge, which rank 0's answer (the host table) must sign */
typedef struct {
    uint32_t magic, version, rank, world;
    uint32_t pid, reserved;
    char host[HOST_BYTES];
    uint8_t rank_nonce[NONCE_BYTES];
    uint8_t mac[MT_SHA256_BYTES];
} env_hello;

typedef struct {
    uint32_t magic, seq;
    uint64_t n_bytes; /* per rank in a request, total in a reply */
} env_round;

typedef struct {
    int rank, size;
    int timeout_s;
    int fd0;      /* rank > 0: the connection to rank 0 */
    int *peer_fd; /* rank 0: peer_fd[r] for r in 1..size-1 */
    uint32_t seq;
    char addr[256];
    int port;
    int addr_in_use; /* rank 0: bind failed with EADDRINUSE */
    int n_dropped;   /* rank 0: connections dropped before an authenticated hello */
    size_t n_key;
    uint8_t key[MT_STORE_SECRET_MAX];
    char key_source[320];
    uint8_t my_nonce[NONCE_BYTES]; /* rank > 0: the challenge its hello sent to rank 0 */
} env_ctx;

typedef enum { IO_OK, IO_TIMEOUT, IO_CLOSED, IO_ERROR } io_res;

/* how often a waiting rank reports (timeout / 3, within 1..10 s) */
int64_t mt_env_progress_ms(const env_ctx *c);
/* milliseconds to the deadline for one poll, at most 1000 */
int mt_env_ms_left(int64_t deadline);
/* all n bytes, or IO_TIMEOUT / IO_CLOSED / IO_ERROR at the deadline */
io_res mt_env_write_full(int fd, const void *buf, size_t n, int64_t deadline);
io_res mt_env_read_full(int fd, void *buf, size_t n, int64_t deadline);
void mt_env_set_socket_opts(int fd);
/* the error for a failed exchange with rank `peer` during `what`, naming the timeout key */
mt_status mt_env_peer_io_error(env_ctx *c, io_res r, int peer, const char *what);
/* HMAC-SHA256(job secret, MAC_LABEL || nonce || the hello's fields before mac) */
void mt_env_hello_mac(const env_ctx *c, const uint8_t nonce[NONCE_BYTES], const env_hello *h,
                      uint8_t out[MT_SHA256_BYTES]);
/* rank 0's proof: HMAC-SHA256(job secret, PROOF_LABEL || rank_nonce || the host table) */
void mt_env_store_proof(const env_ctx *c, const uint8_t rank_nonce[NONCE_BYTES], const char *hosts,
                        uint8_t out[MT_SHA256_BYTES]);

/* bootstrap_env_join.c: a TCP connection to rank 0's store (retrying until it listens or the
 * deadline), and the hello answering rank 0's nonce: also used by a second RANK=0 asking who
 * holds the port */
mt_status mt_env_connect_store(env_ctx *c, int64_t deadline, int *out_fd);
mt_status mt_env_say_hello(env_ctx *c, int fd, int rank, const char *my_host, int64_t deadline);
/* rank > 0 (bootstrap_env_join.c): connect to rank 0 (retrying until it listens), say the signed
 * hello, receive the host table and check rank 0's proof over it */
mt_status mt_env_join_store(env_ctx *c, const char *my_host, char *hosts, int64_t deadline);

#endif
