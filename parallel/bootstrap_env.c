/* bootstrap_env.c — env:// bootstrap, as torchrun sets it: RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT. Rank 0 serves a tiny TCP store: every other
 * rank connects once (retrying until rank 0 listens), says a signed hello (rank, world size,
 * host name), and then each allgather round is "send my blob to rank 0, receive everyone's".
 * This file: rank 0's store, the timed socket I/O, the rounds; a rank > 0 joining the store is
 * bootstrap_env_join.c; the wire format both share, bootstrap_env_wire.h.
 * Rank 0 waits on all its peers at once (poll), so a peer that dies is named within the
 * poll interval, and a peer that never answers is named when the timeout passes.
 *   - Store port: MT_STORE_PORT if set; else MASTER_PORT + 1 when TORCHELASTIC_USE_AGENT_STORE
 *     is true (torchrun's agent already serves its own store on MASTER_PORT); else MASTER_PORT.
 *   - LOCAL_RANK / LOCAL_WORLD_SIZE are optional: when unset they are derived from the host
 *     names exchanged in the hello. They are derived too when the host names show more ranks on
 *     this host than LOCAL_WORLD_SIZE says: several launchers ("nodes") on one machine, e.g.
 *     `mtrain launch --nnodes 2 --node-rank 0|1` (or torchrun) twice on one host; the ranks are
 *     then local to each other in fact (one shared-memory communicator, one set of GPUs), and
 *     local rank = this rank's place among the ranks of this host.
 *   - Wire format is host byte order: all ranks run the same mtrain binary.
 *   - Waiting is never silent: rank 0 prints which ranks it still waits for every
 *     progress_ms() (timeout / 3, within 1..10 s), a rank > 0 that cannot reach rank 0, or waits
 *     for the others, says so once; every timeout names parallel.timeout_s, the key that sets it.
 *     These progress lines (stderr) are the one exception to "no printing" in bootstrap.
 *   - A RANK given to two processes is named: the hello carries the pid; a second RANK=k (k > 0)
 *     ends the job at once ("rank k joined twice (first pid A on H1, again pid B on H2)"), told
 *     to every rank already connected (a reject message instead of the host table); a second
 *     RANK=0 finds the port taken, asks the store there who it is, and reports "rank 0 joined
 *     twice" with that store's pid and host (the first rank 0 only logs it: if the store belongs
 *     to another job on the same port, that job must not be failed by our mistake).
 *   - Nobody else is let in: rank 0 binds MASTER_ADDR's address (MT_STORE_BIND overrides it),
 *     sends every connection a fresh nonce, and accepts a hello only when it carries
 *     HMAC-SHA256(job secret, MAC_LABEL || nonce || the hello's fields); the job secret comes
 *     from bootstrap_secret.c. Connections that have not said a signed hello are served all at
 *     once (up to MAX_PENDING, each for HELLO_MS); one that sends garbage, an unsigned or wrongly
 *     signed hello, or nothing, is dropped and logged with its address and never ends the job.
 *     A signed hello (a process holding the secret: one of this job's) with a wrong WORLD_SIZE
 *     or RANK still ends it, as a configuration error. Rank 0 proves itself in turn: each hello
 *     carries a nonce of the rank's, and rank 0's answer signs it with the host table
 *     (HMAC-SHA256(job secret, PROOF_LABEL || that nonce || the table)); a rank whose store
 *     cannot sign it (another job's store on the port, an impostor) stops, saying so.
 * Rule kept: no exit; every failure names the variable (MASTER_PORT=abc ...) or the rank. */
#include "parallel/bootstrap_env_wire.h"

#include "core/clock.h"
#include "core/sha256.h"
#include "parallel/net_bind.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* how often a waiting rank 0 reports who is missing */
int64_t mt_env_progress_ms(const env_ctx *c) {
    int64_t ms = (int64_t)c->timeout_s * 1000 / 3;
    return ms < 1000 ? 1000 : ms > 10000 ? 10000 : ms;
}

int mt_env_ms_left(int64_t deadline) {
    int64_t left = deadline - mt_clock_ms_i64();
    if (left < 0) return 0;
    return left > 1000 ? 1000 : (int)left; /* wake up at least every second */
}

io_res mt_env_write_full(int fd, const void *buf, size_t n, int64_t deadline) {
    const char *p = buf;
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
            continue;
        }
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (mt_clock_ms_i64() >= deadline) return IO_TIMEOUT;
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            poll(&pfd, 1, mt_env_ms_left(deadline));
            continue;
        }
        if (k < 0 && (errno == EPIPE || errno == ECONNRESET)) return IO_CLOSED;
        return IO_ERROR;
    }
    return IO_OK;
}

io_res mt_env_read_full(int fd, void *buf, size_t n, int64_t deadline) {
    char *p = buf;
    while (n) {
        ssize_t k = recv(fd, p, n, MSG_DONTWAIT);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
            continue;
        }
        if (k == 0) return IO_CLOSED;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (mt_clock_ms_i64() >= deadline) return IO_TIMEOUT;
            struct pollfd pfd = {.fd = fd, .events = POLLIN};
            poll(&pfd, 1, mt_env_ms_left(deadline));
            continue;
        }
        if (errno == ECONNRESET) return IO_CLOSED;
        return IO_ERROR;
    }
    return IO_OK;
}

void mt_env_set_socket_opts(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(fd, F_SETFD, FD_CLOEXEC);
}

/* Peer names for messages */
mt_status mt_env_peer_io_error(env_ctx *c, io_res r, int peer, const char *what) {
    if (c->rank == 0) {
        if (r == IO_TIMEOUT)
            return mt_errorf(MT_ERR_PEER, "env:// bootstrap: rank %d did not answer %s within %d s (" TIMEOUT_KEY
                             " sets the limit)", peer, what, c->timeout_s);
        if (r == IO_CLOSED)
            return mt_errorf(MT_ERR_PEER,
                             "env:// bootstrap: rank %d closed its connection to rank 0 during %s (did it exit "
                             "or crash?)",
                             peer, what);
        return mt_errorf(MT_ERR_PEER, "env:// bootstrap: talking to rank %d during %s: %s", peer, what,
                         strerror(errno));
    }
    if (r == IO_TIMEOUT)
        return mt_errorf(MT_ERR_PEER,
                         "env:// bootstrap rank %d: no answer from rank 0's store (MASTER_ADDR=%s port %d) to %s "
                         "within %d s (" TIMEOUT_KEY " sets the limit); a rank of WORLD_SIZE=%d is missing, slow "
                         "or hung (rank 0's log names it)",
                         c->rank, c->addr, c->port, what, c->timeout_s, c->size);
    if (r == IO_CLOSED)
        return mt_errorf(MT_ERR_PEER,
                         "env:// bootstrap rank %d: rank 0 (the store at MASTER_ADDR=%s port %d) closed the "
                         "connection during %s: it exited or failed (see its log)",
                         c->rank, c->addr, c->port, what);
    return mt_errorf(MT_ERR_PEER, "env:// bootstrap rank %d: talking to rank 0 during %s: %s", c->rank, what,
                     strerror(errno));
}

/* ---- rank 0: listen, accept every other rank's hello, answer with all host names ---- */

static mt_status listen_socket(env_ctx *c, int *out_fd) {
    const char *bind_env = getenv("MT_STORE_BIND");
    const char *where = bind_env && *bind_env ? bind_env : c->addr;
    int fd = -1;
    int rc = mt_net_bind_addr(where, c->port, &fd);
    if (rc != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        c->addr_in_use = e == EADDRINUSE;
        if (e == EADDRNOTAVAIL)
            return mt_errorf(MT_ERR_CONFIG,
                             "env:// bootstrap rank 0: %s=%s is not an address of this machine (rank 0 serves the "
                             "store on that interface alone): set MASTER_ADDR to rank 0's address, or "
                             "MT_STORE_BIND=0.0.0.0 to serve on every interface",
                             bind_env && *bind_env ? "MT_STORE_BIND" : "MASTER_ADDR", where);
        return mt_errorf(MT_ERR_IO,
                         "env:// bootstrap rank 0: cannot listen on %s port %d (MASTER_PORT / MT_STORE_PORT): %s%s",
                         where, c->port, strerror(e),
                         e == EADDRINUSE ? " (another job, or torchrun's own store, holds it: pick another "
                                           "MASTER_PORT or set MT_STORE_PORT)"
                                         : "");
    }
    if (listen(fd, c->size < 4096 ? c->size + MAX_PENDING : 4096) != 0) {
        int e = errno;
        close(fd);
        return mt_errorf(MT_ERR_IO, "env:// bootstrap rank 0: listen on port %d: %s", c->port, strerror(e));
    }
    *out_fd = fd;
    return MT_OK;
}

/* "3, 5, 7" (at most 16, then ", ..."): the ranks in 1..size-1 whose peer_fd is still -1 */
static void missing_ranks(const env_ctx *c, char *out, size_t n_out) {
    size_t len = 0;
    int n_missing = 0;
    out[0] = 0;
    for (int r = 1; r < c->size; r++) {
        if (c->peer_fd[r] >= 0) continue;
        if (n_missing++ < 16 && len < n_out - 16)
            len += (size_t)snprintf(out + len, n_out - len, "%s%d", len ? ", " : "", r);
    }
    if (n_missing > 16 && len < n_out - 6) snprintf(out + len, n_out - len, ", ...");
}

static void send_reject(int fd, const char *msg) {
    uint32_t m = ENV_REJECT, n = (uint32_t)strlen(msg);
    int64_t d = mt_clock_ms_i64() + 1000;
    if (mt_env_write_full(fd, &m, sizeof m, d) == IO_OK && mt_env_write_full(fd, &n, sizeof n, d) == IO_OK)
        mt_env_write_full(fd, msg, n, d);
}

/* the MAC of a hello (every field before mac) answering the challenge nonce */
void mt_env_hello_mac(const env_ctx *c, const uint8_t nonce[NONCE_BYTES], const env_hello *h,
                      uint8_t out[MT_SHA256_BYTES]) {
    uint8_t head[sizeof MAC_LABEL + NONCE_BYTES];
    memcpy(head, MAC_LABEL, sizeof MAC_LABEL);
    memcpy(head + sizeof MAC_LABEL, nonce, NONCE_BYTES);
    mt_hmac_sha256(c->key, c->n_key, head, sizeof head, h, offsetof(env_hello, mac), out);
}

/* rank 0's proof that it holds the job secret, sent before the host table to a rank whose hello
 * carried rank_nonce: HMAC-SHA256(job secret, PROOF_LABEL || rank_nonce || the host table) */
void mt_env_store_proof(const env_ctx *c, const uint8_t rank_nonce[NONCE_BYTES], const char *hosts,
                        uint8_t out[MT_SHA256_BYTES]) {
    uint8_t head[sizeof PROOF_LABEL + NONCE_BYTES];
    memcpy(head, PROOF_LABEL, sizeof PROOF_LABEL);
    memcpy(head + sizeof PROOF_LABEL, rank_nonce, NONCE_BYTES);
    mt_hmac_sha256(c->key, c->n_key, head, sizeof head, hosts, (size_t)c->size * HOST_BYTES, out);
}

/* a connection that has not said an authenticated hello yet */
typedef struct {
    int fd;
    int64_t deadline;
    size_t got; /* bytes of h received */
    env_hello h;
    uint8_t nonce[NONCE_BYTES];
    char from[80]; /* the peer's address, for the log */
} env_pending;

/* closes a connection that did not say an authenticated hello; logged (the first few) */
static void drop_pending(env_ctx *c, env_pending *p, const char *why) {
    if (c->n_dropped < MAX_DROP_NOTES)
        fprintf(stderr, "mtrain: env:// bootstrap rank 0: dropped a connection from %s: %s\n", p->from, why);
    else if (c->n_dropped == MAX_DROP_NOTES)
        fprintf(stderr, "mtrain: env:// bootstrap rank 0: more connections dropped; no longer logged\n");
    c->n_dropped++;
    close(p->fd);
    p->fd = -1;
}

static void peer_name(int fd, char *out, size_t n_out) {
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    char host[64] = "?";
    int port = 0;
    if (getpeername(fd, (struct sockaddr *)&sa, &len) == 0) {
        if (sa.ss_family == AF_INET) {
            inet_ntop(AF_INET, &((struct sockaddr_in *)&sa)->sin_addr, host, sizeof host);
            port = ntohs(((struct sockaddr_in *)&sa)->sin_port);
        } else if (sa.ss_family == AF_INET6) {
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&sa)->sin6_addr, host, sizeof host);
            port = ntohs(((struct sockaddr_in6 *)&sa)->sin6_port);
        }
    }
    snprintf(out, n_out, "%s port %d", host, port);
}

/* a new connection: send it a fresh nonce; the oldest waiting one makes room when all slots are taken */
static void accept_pending(env_ctx *c, int lfd, env_pending *pend) {
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) return; /* ECONNABORTED, EINTR, ...: keep waiting */
    mt_env_set_socket_opts(fd);
    env_pending *slot = NULL;
    for (int i = 0; i < MAX_PENDING && !slot; i++)
        if (pend[i].fd < 0) slot = &pend[i];
    if (!slot) {
        slot = &pend[0];
        for (int i = 1; i < MAX_PENDING; i++)
            if (pend[i].deadline < slot->deadline) slot = &pend[i];
        drop_pending(c, slot, "too many connections waiting to say hello; this one waited longest");
    }
    memset(slot, 0, sizeof *slot);
    slot->fd = fd;
    slot->deadline = mt_clock_ms_i64() + HELLO_MS;
    peer_name(fd, slot->from, sizeof slot->from);
    env_challenge ch = {.magic = ENV_MAGIC, .version = ENV_VERSION};
    if (getrandom(slot->nonce, NONCE_BYTES, 0) != NONCE_BYTES) {
        drop_pending(c, slot, "getrandom failed");
        return;
    }
    memcpy(ch.nonce, slot->nonce, NONCE_BYTES);
    if (mt_env_write_full(fd, &ch, sizeof ch, mt_clock_ms_i64() + 1000) != IO_OK) drop_pending(c, slot, "cannot send it a nonce");
}

/* -1: keep reading; 0: dropped; 1: a complete, authenticated hello is in p->h */
static int read_pending(env_ctx *c, env_pending *p) {
    ssize_t k = recv(p->fd, (char *)&p->h + p->got, sizeof p->h - p->got, MSG_DONTWAIT);
    char why[640];
    if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) {
        snprintf(why, sizeof why, "closed after %zu of the hello's %zu bytes", p->got, sizeof p->h);
        drop_pending(c, p, why);
        return 0;
    }
    if (k < 0) return -1;
    p->got += (size_t)k;
    if (p->got >= 2 * sizeof(uint32_t) && (p->h.magic != ENV_MAGIC || p->h.version != ENV_VERSION)) {
        if (p->h.magic == ENV_MAGIC) { /* an mtrain rank of another version: tell it */
            snprintf(why, sizeof why, "rank 0 runs a different mtrain (env:// protocol %u; this process speaks %u): "
                     "run the same mtrain binary on every rank", ENV_VERSION, p->h.version);
            send_reject(p->fd, why);
        }
        drop_pending(c, p, p->h.magic == ENV_MAGIC ? "a hello of another mtrain version" : "not an mtrain hello");
        return 0;
    }
    if (p->got < sizeof p->h) return -1;
    uint8_t mac[MT_SHA256_BYTES];
    mt_env_hello_mac(c, p->nonce, &p->h, mac);
    if (!mt_bytes_equal_ct(mac, p->h.mac, sizeof mac)) {
        snprintf(why, sizeof why, "the hello from %s (claiming rank %u) is not signed with rank 0's job secret "
                 "(%s): every rank needs the same one (MT_STORE_SECRET set to one value for all, or the same "
                 "secret file)", p->from, p->h.rank, c->key_source);
        send_reject(p->fd, why);
        drop_pending(c, p, why);
        return 0;
    }
    p->h.host[HOST_BYTES - 1] = 0;
    return 1;
}

/* an authenticated hello: register the rank (1), answer a second RANK=0 and carry on (0), or end the job */
static mt_status take_hello(env_ctx *c, env_pending *p, char *hosts, uint32_t *pids, uint8_t *rank_nonces,
                            const char *my_host, int *joined) {
    const env_hello *h = &p->h;
    int fd = p->fd;
    p->fd = -1;
    if (h->world != (uint32_t)c->size) {
        close(fd);
        return mt_errorf(MT_ERR_CONFIG, "env:// bootstrap: rank %u has WORLD_SIZE=%u but rank 0 has WORLD_SIZE=%d",
                         h->rank, h->world, c->size);
    }
    if (h->rank == 0) { /* a second RANK=0 asks who holds the port: tell it, carry on */
        char msg[512];
        snprintf(msg, sizeof msg,
                 "rank 0 joined twice: the store at port %d is rank 0 of WORLD_SIZE=%d (pid %d on %s), and this "
                 "process (pid %u on %s) has RANK=0 too: each process needs its own RANK (or, if the store is "
                 "another job's, its own MASTER_PORT)",
                 c->port, c->size, (int)getpid(), my_host, h->pid, h->host);
        send_reject(fd, msg);
        close(fd);
        fprintf(stderr, "mtrain: env:// bootstrap rank 0: warning: %s\n", msg);
        return MT_OK;
    }
    if (h->rank >= (uint32_t)c->size) {
        close(fd);
        return mt_errorf(MT_ERR_CONFIG, "env:// bootstrap: a process has RANK=%u but WORLD_SIZE=%d", h->rank, c->size);
    }
    if (c->peer_fd[h->rank] >= 0) { /* end the job: which of the two was meant is unknown */
        char msg[512];
        snprintf(msg, sizeof msg,
                 "rank %u joined twice (first pid %u on %s, again pid %u on %s): each process needs its own "
                 "RANK (WORLD_SIZE=%d: RANK 0..%d, once each)",
                 h->rank, pids[h->rank], hosts + (size_t)h->rank * HOST_BYTES, h->pid, h->host, c->size, c->size - 1);
        send_reject(fd, msg);
        close(fd);
        for (int r = 1; r < c->size; r++)
            if (c->peer_fd[r] >= 0) send_reject(c->peer_fd[r], msg);
        return mt_errorf(MT_ERR_CONFIG, "env:// bootstrap rank 0: %s", msg);
    }
    pids[h->rank] = h->pid;
    memcpy(rank_nonces + (size_t)h->rank * NONCE_BYTES, h->rank_nonce, NONCE_BYTES);
    c->peer_fd[h->rank] = fd;
    memcpy(hosts + (size_t)h->rank * HOST_BYTES, h->host, HOST_BYTES);
    (*joined)++;
    return MT_OK;
}

/* Rank 0: every connection gets a nonce and HELLO_MS to answer it with a signed hello; all are
 * served at once (poll), so idle or hostile connections hold nothing up, and one that says
 * anything but a signed hello is dropped and logged, never ending the job. */
static mt_status serve_hellos(env_ctx *c, char *hosts, int64_t deadline) {
    int lfd = -1, joined = 0;
    mt_status st = listen_socket(c, &lfd);
    if (st != MT_OK) return st;
    uint32_t *pids = calloc((size_t)c->size, sizeof *pids);
    uint8_t *rank_nonces = calloc((size_t)c->size, NONCE_BYTES);
    env_pending *pend = calloc(MAX_PENDING, sizeof *pend);
    if (!pids || !rank_nonces || !pend) {
        close(lfd);
        free(pids);
        free(rank_nonces);
        free(pend);
        return mt_errorf(MT_ERR_OOM, "env:// bootstrap: out of memory");
    }
    for (int i = 0; i < MAX_PENDING; i++) pend[i].fd = -1;
    char my_host[HOST_BYTES] = "";
    memcpy(my_host, hosts, HOST_BYTES - 1);
    int64_t t_start = mt_clock_ms_i64(), next_note = t_start + mt_env_progress_ms(c);
    /* rank 0 holds one socket per rank: make sure the fd limit allows it */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)c->size + 64 + MAX_PENDING &&
        rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    while (joined < c->size - 1) {
        int64_t now = mt_clock_ms_i64();
        if (now >= deadline) {
            char missing[256];
            missing_ranks(c, missing, sizeof missing);
            st = mt_errorf(MT_ERR_PEER,
                           "env:// bootstrap rank 0: only %d of WORLD_SIZE=%d ranks connected to %s port %d within "
                           "%d s; missing rank(s) %s (" TIMEOUT_KEY "=%d sets the limit: --set " TIMEOUT_KEY "=S)",
                           joined + 1, c->size, my_host, c->port, c->timeout_s, missing, c->timeout_s);
            goto out;
        }
        if (now >= next_note) {
            char missing[256];
            missing_ranks(c, missing, sizeof missing);
            fprintf(stderr,
                    "mtrain: env:// bootstrap rank 0: waiting for rank(s) %s (of WORLD_SIZE=%d) to join at %s:%d "
                    "(%lld s so far; " TIMEOUT_KEY "=%d sets the limit)\n",
                    missing, c->size, my_host, c->port, (long long)((now - t_start) / 1000), c->timeout_s);
            next_note = now + mt_env_progress_ms(c);
        }
        struct pollfd pfd[MAX_PENDING + 1];
        int who[MAX_PENDING + 1], n = 0;
        pfd[n] = (struct pollfd){.fd = lfd, .events = POLLIN};
        who[n++] = -1;
        for (int i = 0; i < MAX_PENDING; i++) {
            if (pend[i].fd < 0) continue;
            if (now >= pend[i].deadline) {
                char why[128];
                snprintf(why, sizeof why, "%zu of the hello's %zu bytes in %d s", pend[i].got, sizeof(env_hello),
                         HELLO_MS / 1000);
                drop_pending(c, &pend[i], why);
                continue;
            }
            pfd[n] = (struct pollfd){.fd = pend[i].fd, .events = POLLIN};
            who[n++] = i;
        }
        if (poll(pfd, (nfds_t)n, mt_env_ms_left(deadline)) <= 0) continue;
        for (int j = 1; j < n && st == MT_OK; j++) {
            if (!pfd[j].revents || read_pending(c, &pend[who[j]]) != 1) continue;
            st = take_hello(c, &pend[who[j]], hosts, pids, rank_nonces, my_host, &joined);
        }
        if (st != MT_OK) goto out;
        if (pfd[0].revents) accept_pending(c, lfd, pend);
    }
    /* everyone is here: answer each with the table of host names, signed over its own nonce */
    for (int r = 1; r < c->size; r++) {
        uint32_t magic = ENV_MAGIC;
        uint8_t proof[MT_SHA256_BYTES];
        mt_env_store_proof(c, rank_nonces + (size_t)r * NONCE_BYTES, hosts, proof);
        io_res res = mt_env_write_full(c->peer_fd[r], &magic, sizeof magic, deadline);
        if (res == IO_OK) res = mt_env_write_full(c->peer_fd[r], proof, sizeof proof, deadline);
        if (res == IO_OK) res = mt_env_write_full(c->peer_fd[r], hosts, (size_t)c->size * HOST_BYTES, deadline);
        if (res != IO_OK) {
            st = mt_env_peer_io_error(c, res, r, "the hello");
            goto out;
        }
    }
out:
    close(lfd); /* nobody else connects after the hello */
    for (int i = 0; i < MAX_PENDING; i++)
        if (pend[i].fd >= 0) close(pend[i].fd);
    free(pend);
    free(pids);
    free(rank_nonces);
    return st;
}

/* ---- allgather rounds ---- */

/* rank 0: receive every peer's header + blob at once, whichever is ready first */
static mt_status gather_at_root(env_ctx *c, uint32_t seq, size_t n_bytes, char *all, int64_t deadline) {
    int n_peers = c->size - 1;
    mt_status st = MT_OK;
    size_t *got = calloc((size_t)c->size, sizeof *got);
    env_round *hdr = calloc((size_t)c->size, sizeof *hdr);
    struct pollfd *pfd = calloc((size_t)c->size, sizeof *pfd);
    int *who = calloc((size_t)c->size, sizeof *who);
    if (!got || !hdr || !pfd || !who) {
        st = mt_errorf(MT_ERR_OOM, "env:// bootstrap: out of memory");
        goto out;
    }
    int remaining = n_peers;
    while (remaining > 0) {
        int n = 0;
        for (int r = 1; r < c->size; r++) {
            if (got[r] == sizeof(env_round) + n_bytes && got[r] >= sizeof(env_round)) continue;
            pfd[n] = (struct pollfd){.fd = c->peer_fd[r], .events = POLLIN};
            who[n++] = r;
        }
        if (mt_clock_ms_i64() >= deadline) {
            char missing[192] = "";
            size_t len = 0;
            for (int i = 0; i < n && len < sizeof missing - 16; i++)
                len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%d", i ? ", " : "", who[i]);
            st = mt_errorf(MT_ERR_PEER,
                           "env:// bootstrap: rank(s) %s%s did not reach bootstrap call %u (an allgather or "
                           "barrier) within %d s (" TIMEOUT_KEY " sets the limit)",
                           missing, len >= sizeof missing - 16 ? ", ..." : "", seq, c->timeout_s);
            goto out;
        }
        if (poll(pfd, (nfds_t)n, mt_env_ms_left(deadline)) <= 0) continue;
        for (int i = 0; i < n; i++) {
            if (!pfd[i].revents) continue;
            int r = who[i];
            char *dst;
            size_t want;
            if (got[r] < sizeof(env_round)) {
                dst = (char *)&hdr[r] + got[r];
                want = sizeof(env_round) - got[r];
            } else {
                dst = all + (size_t)r * n_bytes + (got[r] - sizeof(env_round));
                want = sizeof(env_round) + n_bytes - got[r];
            }
            ssize_t k = recv(c->peer_fd[r], dst, want, MSG_DONTWAIT);
            if (k == 0 || (k < 0 && errno == ECONNRESET)) {
                st = mt_env_peer_io_error(c, IO_CLOSED, r, "a bootstrap allgather / barrier");
                goto out;
            }
            if (k < 0) {
                if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
                st = mt_env_peer_io_error(c, IO_ERROR, r, "a bootstrap allgather / barrier");
                goto out;
            }
            got[r] += (size_t)k;
            if (got[r] == sizeof(env_round)) {
                if (hdr[r].magic != ENV_MAGIC || hdr[r].seq != seq) {
                    st = mt_errorf(MT_ERR_INTERNAL,
                                   "env:// bootstrap: rank %d is at bootstrap call %u, rank 0 at %u (every rank "
                                   "must make the same bootstrap calls in the same order)",
                                   r, hdr[r].seq, seq);
                    goto out;
                }
                if (hdr[r].n_bytes != n_bytes) {
                    st = mt_errorf(MT_ERR_INTERNAL,
                                   "env:// bootstrap allgather %u: rank %d contributed %llu bytes, rank 0 %zu (every "
                                   "rank must pass the same n_bytes)",
                                   seq, r, (unsigned long long)hdr[r].n_bytes, n_bytes);
                    goto out;
                }
            }
            if (got[r] == sizeof(env_round) + n_bytes) remaining--;
        }
    }
out:
    free(got);
    free(hdr);
    free(pfd);
    free(who);
    return st;
}

static mt_status env_allgather(mt_bootstrap *bs, const void *mine, size_t n_bytes, void *all) {
    env_ctx *c = bs->ctx;
    if (!c) return mt_errorf(MT_ERR_INTERNAL, "bootstrap allgather after finalize");
    uint32_t seq = c->seq++;
    int64_t deadline = mt_clock_ms_i64() + (int64_t)c->timeout_s * 1000;
    if (c->size == 1) {
        if (n_bytes && all != mine) memmove(all, mine, n_bytes);
        return MT_OK;
    }
    if (c->rank == 0) {
        mt_status st = gather_at_root(c, seq, n_bytes, all, deadline);
        if (st != MT_OK) return st;
        if (n_bytes) memmove(all, mine, n_bytes);
        env_round reply = {.magic = ENV_MAGIC, .seq = seq, .n_bytes = (uint64_t)n_bytes * (uint64_t)c->size};
        for (int r = 1; r < c->size; r++) {
            io_res res = mt_env_write_full(c->peer_fd[r], &reply, sizeof reply, deadline);
            if (res == IO_OK && n_bytes) res = mt_env_write_full(c->peer_fd[r], all, n_bytes * (size_t)c->size, deadline);
            if (res != IO_OK) return mt_env_peer_io_error(c, res, r, "a bootstrap allgather / barrier");
        }
        return MT_OK;
    }
    env_round req = {.magic = ENV_MAGIC, .seq = seq, .n_bytes = n_bytes}, reply;
    io_res res = mt_env_write_full(c->fd0, &req, sizeof req, deadline);
    if (res == IO_OK && n_bytes) res = mt_env_write_full(c->fd0, mine, n_bytes, deadline);
    if (res == IO_OK) res = mt_env_read_full(c->fd0, &reply, sizeof reply, deadline);
    if (res != IO_OK) return mt_env_peer_io_error(c, res, 0, "a bootstrap allgather / barrier");
    if (reply.magic != ENV_MAGIC || reply.seq != seq || reply.n_bytes != (uint64_t)n_bytes * (uint64_t)c->size)
        return mt_errorf(MT_ERR_INTERNAL, "env:// bootstrap rank %d: rank 0 answered call %u with %llu bytes, expected "
                                          "call %u with %zu",
                         c->rank, reply.seq, (unsigned long long)reply.n_bytes, seq, n_bytes * (size_t)c->size);
    if (n_bytes) {
        res = mt_env_read_full(c->fd0, all, n_bytes * (size_t)c->size, deadline);
        if (res != IO_OK) return mt_env_peer_io_error(c, res, 0, "a bootstrap allgather / barrier");
    }
    return MT_OK;
}

static mt_status env_barrier(mt_bootstrap *bs) {
    char dummy = 0;
    return env_allgather(bs, &dummy, 0, &dummy);
}

static void env_finalize(mt_bootstrap *bs) {
    env_ctx *c = bs->ctx;
    if (!c) return;
    if (c->fd0 >= 0) close(c->fd0);
    if (c->peer_fd)
        for (int r = 1; r < c->size; r++)
            if (c->peer_fd[r] >= 0) close(c->peer_fd[r]);
    free(c->peer_fd);
    free(c);
    bs->ctx = NULL;
}

mt_status mt_bootstrap_env_init(mt_bootstrap *bs, int timeout_s) {
    long rank = 0, world = 0, local_rank = 0, local_world = 0, port = 0, store_port = 0;
    int have_local_rank = 0, have_local_world = 0, have_store_port = 0;
    mt_status st;
    if (!getenv("WORLD_SIZE") && !getenv("RANK"))
        return mt_errorf(MT_ERR_CONFIG, "env:// bootstrap (MT_BOOTSTRAP=env): neither RANK nor WORLD_SIZE is set (set RANK, "
                                        "WORLD_SIZE, MASTER_ADDR and MASTER_PORT for each process, as torchrun does, or "
                                        "unset MT_BOOTSTRAP for a single process)");
    if (!getenv("WORLD_SIZE") || !getenv("RANK"))
        return mt_errorf(MT_ERR_CONFIG, "env:// bootstrap: %s is set but %s is not (set RANK, WORLD_SIZE, MASTER_ADDR and "
                                        "MASTER_PORT together, as torchrun does)",
                         getenv("RANK") ? "RANK" : "WORLD_SIZE", getenv("RANK") ? "WORLD_SIZE" : "RANK");
    st = mt_bootstrap_env_int("WORLD_SIZE", 1, 1 << 20, "a world size", 1, &world, NULL);
    if (st != MT_OK) return mt_error_context(st, "env:// bootstrap: ");
    st = mt_bootstrap_env_int("RANK", 0, world - 1, "a rank below WORLD_SIZE", 1, &rank, NULL);
    if (st != MT_OK) return mt_error_context(st, "env:// bootstrap: ");
    st = mt_bootstrap_env_int("LOCAL_WORLD_SIZE", 1, world, "a local world size (<= WORLD_SIZE)", 0, &local_world,
                              &have_local_world);
    if (st != MT_OK) return st;
    st = mt_bootstrap_env_int("LOCAL_RANK", 0, (have_local_world ? local_world : world) - 1,
                              have_local_world ? "a rank below LOCAL_WORLD_SIZE" : "a rank below WORLD_SIZE", 0,
                              &local_rank, &have_local_rank);
    if (st != MT_OK) return st;
    const char *addr = getenv("MASTER_ADDR");
    if (world > 1) {
        if (!addr || !*addr)
            return mt_errorf(MT_ERR_CONFIG, "MASTER_ADDR is not set (env:// with WORLD_SIZE=%ld needs the host of "
                                            "rank 0, e.g. MASTER_ADDR=127.0.0.1)",
                             world);
        st = mt_bootstrap_env_int("MASTER_PORT", 1, 65535, "a port number", 1, &port, NULL);
        if (st != MT_OK) return mt_error_context(st, "env:// bootstrap: ");
        st = mt_bootstrap_env_int("MT_STORE_PORT", 1, 65535, "a port number", 0, &store_port, &have_store_port);
        if (st != MT_OK) return st;
        if (!have_store_port) {
            const char *agent = getenv("TORCHELASTIC_USE_AGENT_STORE");
            int agent_store = agent && (!strcmp(agent, "True") || !strcmp(agent, "true") || !strcmp(agent, "1"));
            store_port = agent_store ? port + 1 : port;
            if (store_port > 65535)
                return mt_errorf(MT_ERR_CONFIG, "MASTER_PORT=%ld: torchrun's agent store holds it and %ld is not a "
                                                "port; set MT_STORE_PORT",
                                 port, store_port);
        }
    }
    env_ctx *c = calloc(1, sizeof *c);
    char *hosts = calloc((size_t)world, HOST_BYTES);
    if (!c || !hosts) {
        free(c);
        free(hosts);
        return mt_errorf(MT_ERR_OOM, "env:// bootstrap: out of memory");
    }
    c->rank = (int)rank;
    c->size = (int)world;
    c->timeout_s = timeout_s;
    c->fd0 = -1;
    c->port = (int)store_port;
    snprintf(c->addr, sizeof c->addr, "%s", addr ? addr : "");
    if (world > 1) {
        st = mt_bootstrap_store_secret(c->key, &c->n_key, c->key_source, sizeof c->key_source);
        if (st != MT_OK) {
            free(c);
            free(hosts);
            return st;
        }
    }
    char my_host[HOST_BYTES] = "";
    gethostname(my_host, sizeof my_host - 1);
    memcpy(hosts + (size_t)rank * HOST_BYTES, my_host, HOST_BYTES);
    int64_t deadline = mt_clock_ms_i64() + (int64_t)timeout_s * 1000;
    if (world > 1 && rank == 0) {
        c->peer_fd = malloc((size_t)world * sizeof *c->peer_fd);
        if (!c->peer_fd) {
            st = mt_errorf(MT_ERR_OOM, "env:// bootstrap: out of memory");
            goto fail;
        }
        for (long r = 0; r < world; r++) c->peer_fd[r] = -1;
        st = serve_hellos(c, hosts, deadline);
        if (st != MT_OK && c->addr_in_use) { /* another RANK=0 of this job, or another job? ask it */
            char first[1024];
            snprintf(first, sizeof first, "%s", mt_last_error());
            int64_t probe_deadline = mt_clock_ms_i64() + 3000;
            env_ctx probe = *c;
            probe.rank = -1; /* no "waiting" note */
            probe.fd0 = -1;
            mt_status pst = mt_env_connect_store(&probe, probe_deadline, &probe.fd0);
            if (pst == MT_OK) {
                uint32_t magic = 0, n = 0;
                char msg[1024] = "";
                if (mt_env_say_hello(&probe, probe.fd0, 0, my_host, probe_deadline) == MT_OK &&
                    mt_env_read_full(probe.fd0, &magic, sizeof magic, probe_deadline) == IO_OK && magic == ENV_REJECT &&
                    mt_env_read_full(probe.fd0, &n, sizeof n, probe_deadline) == IO_OK && n < sizeof msg &&
                    mt_env_read_full(probe.fd0, msg, n, probe_deadline) == IO_OK)
                    st = mt_errorf(MT_ERR_CONFIG, "env:// bootstrap rank 0: cannot listen on port %d: %s", c->port,
                                   msg);
                else
                    st = mt_errorf(MT_ERR_IO, "%s", first);
                close(probe.fd0);
            } else {
                st = mt_errorf(MT_ERR_IO, "%s", first);
            }
        }
    } else if (world > 1) {
        st = mt_env_join_store(c, my_host, hosts, deadline);
    }
    if (st != MT_OK) goto fail;
    /* local rank / size from the host names where the launcher did not say */
    int same_before = 0, same_all = 0;
    for (long r = 0; r < world; r++) {
        if (strncmp(hosts + (size_t)r * HOST_BYTES, my_host, HOST_BYTES) != 0) continue;
        same_all++;
        if (r < rank) same_before++;
    }
    free(hosts);
    hosts = NULL;
    bs->rank = c->rank;
    bs->size = c->size;
    if (have_local_world && same_all > local_world) have_local_rank = have_local_world = 0; /* see the top */
    bs->local_rank = have_local_rank ? (int)local_rank : same_before;
    bs->local_size = have_local_world ? (int)local_world : same_all;
    if (bs->local_rank >= bs->local_size) bs->local_size = bs->local_rank + 1;
    bs->kind = "env";
    bs->allgather = env_allgather;
    bs->barrier = env_barrier;
    bs->finalize = env_finalize;
    bs->ctx = c;
    return MT_OK;
fail:
    free(hosts);
    {
        mt_bootstrap tmp = {.ctx = c};
        env_finalize(&tmp);
    }
    return st;
}
