/* bootstrap_env_join.c — a rank > 0 of the env:// bootstrap (bootstrap_env.c) joining rank 0's
 * store: connect (retrying until rank 0 listens, saying once that it waits), read rank 0's nonce,
 * answer with a hello signed by the job secret and carrying a nonce of its own, then wait for the
 * host table and check that rank 0 signed it over that nonce (or read rank 0's refusal). */
#include "parallel/bootstrap_env_wire.h"

#include "core/clock.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

/* a TCP connection to MASTER_ADDR:port, retried until rank 0 listens or the deadline passes */
mt_status mt_env_connect_store(env_ctx *c, int64_t deadline, int *out_fd) {
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", c->port);
    char last_err[256] = "no attempt";
    int64_t t_start = mt_clock_ms_i64();
    int noted = 0;
    for (;;) {
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
        int g = getaddrinfo(c->addr, port_s, &hints, &res);
        if (g != 0) {
            if (g == EAI_AGAIN && mt_clock_ms_i64() < deadline) {
                usleep(200000);
                continue;
            }
            return mt_errorf(MT_ERR_CONFIG, "MASTER_ADDR=%s cannot be resolved: %s", c->addr, gai_strerror(g));
        }
        for (struct addrinfo *a = res; a; a = a->ai_next) {
            int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
            if (fd < 0) continue;
            int rc = connect(fd, a->ai_addr, a->ai_addrlen);
            if (rc != 0 && errno == EINPROGRESS) {
                struct pollfd pfd = {.fd = fd, .events = POLLOUT};
                int left = (int)(deadline - mt_clock_ms_i64());
                if (left < 100) left = 100;
                if (left > 5000) left = 5000;
                if (poll(&pfd, 1, left) == 1) {
                    int err = 0;
                    socklen_t len = sizeof err;
                    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
                    rc = err ? -1 : 0;
                    errno = err;
                } else {
                    rc = -1;
                    errno = ETIMEDOUT;
                }
            }
            if (rc == 0) {
                freeaddrinfo(res);
                mt_env_set_socket_opts(fd);
                *out_fd = fd;
                return MT_OK;
            }
            snprintf(last_err, sizeof last_err, "%s", strerror(errno));
            close(fd);
        }
        freeaddrinfo(res);
        if (mt_clock_ms_i64() >= deadline)
            return mt_errorf(MT_ERR_PEER,
                             "env:// bootstrap rank %d: could not connect to rank 0's store at MASTER_ADDR=%s port "
                             "%d within %d s (last error: %s; " TIMEOUT_KEY " sets the limit); is rank 0 running "
                             "with the same MASTER_ADDR and MASTER_PORT?",
                             c->rank, c->addr, c->port, c->timeout_s, last_err);
        if (!noted && mt_clock_ms_i64() - t_start >= mt_env_progress_ms(c)) {
            noted = 1;
            fprintf(stderr,
                    "mtrain: env:// bootstrap rank %d: cannot reach rank 0's store at MASTER_ADDR=%s port %d yet (%s); "
                    "retrying until " TIMEOUT_KEY "=%d s\n",
                    c->rank, c->addr, c->port, last_err, c->timeout_s);
        }
        usleep(50000);
    }
}

/* rank > 0 (and a second RANK=0's probe): read rank 0's nonce, answer with a signed hello */
mt_status mt_env_say_hello(env_ctx *c, int fd, int rank, const char *my_host, int64_t deadline) {
    env_challenge ch;
    io_res r = mt_env_read_full(fd, &ch, sizeof ch, deadline);
    if (r != IO_OK) return mt_env_peer_io_error(c, r, 0, "the hello (waiting for rank 0's nonce)");
    if (ch.magic != ENV_MAGIC)
        return mt_errorf(MT_ERR_PEER, "env:// bootstrap rank %d: MASTER_ADDR=%s port %d is not an mtrain store",
                         c->rank, c->addr, c->port);
    if (ch.version != ENV_VERSION)
        return mt_errorf(MT_ERR_CONFIG, "env:// bootstrap rank %d: rank 0 runs a different mtrain (env:// protocol %u, "
                                        "this rank %u): run the same mtrain binary on every rank",
                         c->rank, ch.version, ENV_VERSION);
    env_hello h;
    memset(&h, 0, sizeof h);
    h.magic = ENV_MAGIC;
    h.version = ENV_VERSION;
    h.rank = (uint32_t)rank;
    h.world = (uint32_t)c->size;
    h.pid = (uint32_t)getpid();
    snprintf(h.host, sizeof h.host, "%s", my_host);
    if (getrandom(c->my_nonce, NONCE_BYTES, 0) != NONCE_BYTES)
        return mt_errorf(MT_ERR_IO, "env:// bootstrap rank %d: getrandom: %s", c->rank, strerror(errno));
    memcpy(h.rank_nonce, c->my_nonce, NONCE_BYTES);
    mt_env_hello_mac(c, ch.nonce, &h, h.mac);
    r = mt_env_write_full(fd, &h, sizeof h, deadline);
    return r == IO_OK ? MT_OK : mt_env_peer_io_error(c, r, 0, "the hello");
}

mt_status mt_env_join_store(env_ctx *c, const char *my_host, char *hosts, int64_t deadline) {
    mt_status st = mt_env_connect_store(c, deadline, &c->fd0);
    if (st == MT_OK) st = mt_env_say_hello(c, c->fd0, c->rank, my_host, deadline);
    if (st != MT_OK) return st;
    io_res r = IO_OK;
    uint32_t magic = 0;
    /* the answer comes once every rank joined: say once that we wait (rank 0 names who is missing) */
    for (int64_t note_at = mt_clock_ms_i64() + mt_env_progress_ms(c); r == IO_OK;) {
        struct pollfd pfd = {.fd = c->fd0, .events = POLLIN};
        if (poll(&pfd, 1, mt_env_ms_left(deadline)) > 0 || mt_clock_ms_i64() >= deadline) break;
        if (note_at && mt_clock_ms_i64() >= note_at && c->rank >= 0) {
            note_at = 0;
            fprintf(stderr,
                    "mtrain: env:// bootstrap rank %d: joined rank 0's store at MASTER_ADDR=%s port %d; waiting for "
                    "the other ranks of WORLD_SIZE=%d (rank 0's log names the missing ones; " TIMEOUT_KEY
                    "=%d s)\n",
                    c->rank, c->addr, c->port, c->size, c->timeout_s);
        }
    }
    if (r == IO_OK) r = mt_env_read_full(c->fd0, &magic, sizeof magic, deadline);
    if (r == IO_OK && magic == ENV_REJECT) {
        uint32_t n = 0;
        char msg[1024] = "";
        if (mt_env_read_full(c->fd0, &n, sizeof n, deadline) == IO_OK && n < sizeof msg)
            mt_env_read_full(c->fd0, msg, n, deadline);
        return mt_errorf(MT_ERR_CONFIG, "env:// bootstrap rank %d: %s", c->rank,
                         msg[0] ? msg : "rank 0 refused this process");
    }
    if (r == IO_OK && magic != ENV_MAGIC)
        return mt_errorf(MT_ERR_PEER, "env:// bootstrap rank %d: MASTER_ADDR=%s port %d is not an mtrain store",
                         c->rank, c->addr, c->port);
    uint8_t proof[MT_SHA256_BYTES], want[MT_SHA256_BYTES];
    if (r == IO_OK) r = mt_env_read_full(c->fd0, proof, sizeof proof, deadline);
    if (r == IO_OK) r = mt_env_read_full(c->fd0, hosts, (size_t)c->size * HOST_BYTES, deadline);
    if (r != IO_OK) return mt_env_peer_io_error(c, r, 0, "the hello (waiting for every rank to join)");
    mt_env_store_proof(c, c->my_nonce, hosts, want);
    unsigned diff = 0; /* constant time: the comparison says nothing about where it differs */
    for (size_t i = 0; i < sizeof want; i++) diff |= (unsigned)(proof[i] ^ want[i]);
    if (diff)
        return mt_errorf(MT_ERR_PEER,
                         "env:// bootstrap rank %d: the store at MASTER_ADDR=%s port %d did not prove that it holds "
                         "this job's secret (%s): it is not this job's rank 0 (another job's store on this port, or "
                         "an impostor); give every rank the same secret and its own MASTER_PORT",
                         c->rank, c->addr, c->port, c->key_source);
    return MT_OK;
}
