/* comm_gloo_make.c — making Gloo communicators (see comm_gloo.h): the listening address, the
 * world from the bootstrap's allgather, and split, which gives each group shared memory when its
 * ranks share a node and Gloo otherwise. Every rank of the parent runs the same fixed sequence of
 * parent-wide exchanges whatever its group (member table, Gloo addresses, shared-memory names),
 * so groups of different kinds are made in one split without deadlock; each group then connects
 * among its own members only. */
#include "parallel/comm_gloo_internal.h"

#ifdef MT_HAVE_GLOO
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* an allgather of equal-sized blobs over some set of ranks */
typedef mt_status (*xchg_fn)(void *xctx, const void *mine, size_t n_bytes, void *all);

/* ---- this rank's listening address ---- */

static int iface_addr(const char *want, char *out, size_t out_bytes) {
    struct ifaddrs *ifs, *i;
    if (getifaddrs(&ifs)) return -1;
    int found = -1;
    for (i = ifs; i && found; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
        if (want ? strcmp(i->ifa_name, want) != 0 : (i->ifa_flags & IFF_LOOPBACK) != 0) continue;
        if (inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, out, (socklen_t)out_bytes)) found = 0;
    }
    freeifaddrs(ifs);
    return found;
}

/* the source address of a route to host (a UDP connect sends nothing) */
static int route_addr(const char *host, char *out, size_t out_bytes) {
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *res = NULL;
    if (getaddrinfo(host, "9", &hints, &res) || !res) return -1;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc = -1;
    struct sockaddr_in me;
    socklen_t len = sizeof me;
    if (fd >= 0 && !connect(fd, res->ai_addr, res->ai_addrlen) && !getsockname(fd, (struct sockaddr *)&me, &len) &&
        inet_ntop(AF_INET, &me.sin_addr, out, (socklen_t)out_bytes) && strncmp(out, "127.", 4))
        rc = 0;
    if (fd >= 0) close(fd);
    freeaddrinfo(res);
    return rc;
}

static mt_status listen_addr(int rank, char *out, size_t out_bytes) {
    const char *ifname = getenv("GLOO_SOCKET_IFNAME"), *master = getenv("MASTER_ADDR");
    if (ifname && *ifname) {
        if (iface_addr(ifname, out, out_bytes))
            return mt_errorf(MT_ERR_CONFIG, "rank %d: GLOO_SOCKET_IFNAME=%s: no IPv4 address on that interface (see "
                             "`ip addr`); unset it to take the route to MASTER_ADDR", rank, ifname);
        return MT_OK;
    }
    if (master && *master && !route_addr(master, out, out_bytes)) return MT_OK;
    if (!iface_addr(NULL, out, out_bytes)) return MT_OK;
    return mt_errorf(MT_ERR_CONFIG, "rank %d: no non-loopback IPv4 address to reach the other nodes from; set "
                     "GLOO_SOCKET_IFNAME to the interface they share", rank);
}

/* ---- exchanges ---- */

/* The Gloo address step, run by every rank of the exchange: members of a Gloo group (g != NULL)
 * hand in their blob, others an empty one; each member gets its group's blobs (group[i]: the
 * exchange rank of member i) in *blobs. Two allgathers: the sizes, then the blobs padded. */
static mt_status xchg_addresses(xchg_fn xchg, void *xctx, int n_all, const void *blob, size_t blob_bytes,
                                const int *group, int n_group, char **blobs) {
    *blobs = NULL;
    uint64_t mine = blob_bytes, *sizes = calloc((size_t)n_all, sizeof *sizes);
    if (!sizes) return mt_errorf(MT_ERR_OOM, "comm_gloo: out of memory");
    mt_status st = xchg(xctx, &mine, sizeof mine, sizes);
    uint64_t max = 1;
    for (int k = 0; k < n_all; k++)
        if (sizes[k] > max) max = sizes[k];
    char *pad = calloc(1, max), *all = calloc((size_t)n_all, max);
    if (st == MT_OK && (!pad || !all)) st = mt_errorf(MT_ERR_OOM, "comm_gloo: out of memory");
    if (st == MT_OK) {
        if (blob_bytes) memcpy(pad, blob, blob_bytes);
        st = xchg(xctx, pad, max, all);
    }
    if (st == MT_OK && blob_bytes) {
        *blobs = malloc((size_t)n_group * blob_bytes);
        if (!*blobs) st = mt_errorf(MT_ERR_OOM, "comm_gloo: out of memory");
        for (int i = 0; st == MT_OK && i < n_group; i++) {
            if (sizes[group[i]] != blob_bytes) {
                st = mt_errorf(MT_ERR_INTERNAL, "comm_gloo: members' Gloo addresses differ in size");
                break;
            }
            memcpy(*blobs + (size_t)i * blob_bytes, all + (size_t)group[i] * max, blob_bytes);
        }
    }
    free(sizes);
    free(pad);
    free(all);
    if (st != MT_OK) {
        free(*blobs);
        *blobs = NULL;
    }
    return st;
}

/* A Gloo communicator in the making: listening (prepare) and the members' addresses exchanged. */
typedef struct {
    mt_gloo *g;
    size_t blob_bytes;
    char *blobs;
} pending;

/* prepare and the address exchange, which every rank of the exchange joins (rank < 0: not a
 * member of a Gloo group; it hands in nothing) */
static mt_status gloo_start(int rank, int n, const member_info *members, int timeout_s, xchg_fn xchg, void *xctx,
                            int n_all, const int *group, pending *p) {
    char err[512] = "";
    void *blob = NULL;
    mt_status st = MT_OK;
    *p = (pending){0};
    if (rank >= 0 && mt_gloo_prepare(members[rank].addr, rank, n, timeout_s > 0 ? timeout_s * 1000 : 0, &p->g, &blob,
                                     &p->blob_bytes, err, sizeof err))
        st = mt_errorf(MT_ERR_PEER, "rank %d: comm_gloo: cannot listen on %s: %s", members[rank].world_rank,
                       members[rank].addr, err);
    /* the exchange runs even after a local failure: the others wait for it */
    mt_status xs = xchg_addresses(xchg, xctx, n_all, st == MT_OK ? blob : NULL, st == MT_OK ? p->blob_bytes : 0,
                                  group, n, &p->blobs);
    return st == MT_OK ? xs : st;
}

/* connects (among the group's members only) and wraps; takes members; frees p */
static mt_status gloo_finish(pending *p, mt_status st, int rank, int n, member_info *members, family *fam,
                             int timeout_s, mt_comm **out) {
    char err[512] = "";
    if (st == MT_OK && p->g && mt_gloo_connect(p->g, p->blobs, p->blob_bytes, err, sizeof err))
        st = mt_errorf(MT_ERR_PEER, "rank %d: comm_gloo: connecting to the other %d members: %s",
                       members[rank].world_rank, n - 1, err);
    free(p->blobs);
    mt_comm *c = NULL;
    gloo_ctx *x = NULL;
    if (st == MT_OK && p->g) {
        c = calloc(1, sizeof *c);
        x = calloc(1, sizeof *x);
        if (!c || !x) st = mt_errorf(MT_ERR_OOM, "comm_gloo: out of memory");
    }
    if (st != MT_OK || !p->g) {
        free(c);
        free(x);
        mt_gloo_free(p->g);
        free(members);
        return st;
    }
    x->g = p->g;
    x->members = members;
    x->timeout_s = timeout_s;
    x->fam = fam;
    *c = (mt_comm){&mt_gloo_impl, x, rank, n};
    mt_gloo_fam_add(fam, c);
    *out = c;
    return MT_OK;
}

static mt_status boot_xchg(void *xctx, const void *mine, size_t n_bytes, void *all) {
    mt_bootstrap *bs = xctx;
    return bs->allgather(bs, mine, n_bytes, all);
}

mt_status mt_comm_gloo_init(mt_bootstrap *bs, const char (*nodes)[MT_NODE_ID_BYTES], int timeout_s, mt_comm **world) {
    *world = NULL;
    /* Gloo writes to its sockets without MSG_NOSIGNAL: a peer that closed its side (it failed or
     * aborted) must fail this rank's call, not kill the rank with SIGPIPE */
    struct sigaction old;
    if (!sigaction(SIGPIPE, NULL, &old) && old.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
    member_info mine = {0}, *members = calloc((size_t)bs->size, sizeof *members);
    int *group = malloc(sizeof(int) * (size_t)bs->size);
    family *fam = calloc(1, sizeof *fam);
    if (!members || !group || !fam) {
        free(members), free(group), free(fam);
        return mt_errorf(MT_ERR_OOM, "comm_gloo: out of memory for %d ranks", bs->size);
    }
    pthread_mutex_init(&fam->mu, NULL);
    mt_status st = listen_addr(bs->rank, mine.addr, sizeof mine.addr);
    mine.world_rank = bs->rank;
    snprintf(mine.node, sizeof mine.node, "%s", nodes[bs->rank]);
    mt_status xs = bs->allgather(bs, &mine, sizeof mine, members); /* joined even on failure */
    if (st == MT_OK) st = xs;
    for (int k = 0; k < bs->size; k++) group[k] = k;
    if (st == MT_OK) {
        pending p;
        st = gloo_start(bs->rank, bs->size, members, timeout_s, boot_xchg, bs, bs->size, group, &p);
        st = gloo_finish(&p, st, bs->rank, bs->size, members, fam, timeout_s, world);
    } else {
        free(members);
    }
    free(group);
    pthread_mutex_lock(&fam->mu);
    int refs = fam->refs;
    pthread_mutex_unlock(&fam->mu);
    if (!refs) {
        pthread_mutex_destroy(&fam->mu);
        free(fam);
    }
    if (st != MT_OK) mt_error_context(st, "comm_gloo (the communicator across %d nodes' ranks): ", bs->size);
    return st;
}

/* ---- split ---- */

static mt_status parent_xchg(void *xctx, const void *mine, size_t n_bytes, void *all) {
    mt_comm *p = xctx;
    char err[512] = "";
    if (mt_gloo_allgather(((gloo_ctx *)p->ctx)->g, mine, all, n_bytes, err, sizeof err))
        return mt_errorf(MT_ERR_PEER, "comm_gloo split: %s", err);
    return MT_OK;
}

/* a shared-memory group's exchange: parent-wide, each member keeps its group's entries */
typedef struct {
    mt_comm *parent;
    const int *group;
    int n_group;
} group_xchg_arg;

static mt_status group_xchg(void *xctx, const void *mine, size_t n_bytes, void *all) {
    group_xchg_arg *a = xctx;
    char *every = malloc((size_t)a->parent->size * n_bytes);
    if (!every) return mt_errorf(MT_ERR_OOM, "comm_gloo split: out of memory");
    mt_status st = parent_xchg(a->parent, mine, n_bytes, every);
    for (int i = 0; st == MT_OK && i < a->n_group; i++)
        memcpy((char *)all + (size_t)i * n_bytes, every + (size_t)a->group[i] * n_bytes, n_bytes);
    free(every);
    return st;
}

/* the shared-memory step, joined by every rank of the parent (one parent-wide exchange each) */
static mt_status split_shm(mt_comm *parent, int use_shm, int new_rank, const int *group, int n_group, int timeout_s,
                           mt_comm **out) {
    group_xchg_arg a = {parent, group, n_group};
    if (use_shm && n_group > 1) return mt_comm_shm_create_xchg(new_rank, n_group, group_xchg, &a, timeout_s, out);
    size_t n_bytes = mt_comm_shm_xchg_bytes();
    char *dummy = calloc(1, n_bytes), *all = calloc((size_t)parent->size, n_bytes);
    mt_status st = dummy && all ? parent_xchg(parent, dummy, n_bytes, all) : mt_errorf(MT_ERR_OOM, "comm_gloo: out of memory");
    free(dummy);
    free(all);
    if (st == MT_OK && use_shm) st = mt_comm_shm_create_xchg(0, 1, group_xchg, &a, timeout_s, out);
    return st;
}

mt_status mt_gloo_split(mt_comm *c, int color, int key, mt_comm **out) {
    gloo_ctx *x = c->ctx;
    *out = NULL;
    if (x->failed != MT_OK) return mt_errorf(x->failed, "%s", x->why);
    member_info mine = x->members[c->rank], *all = calloc((size_t)c->size, sizeof *all);
    int *group = malloc(sizeof(int) * (size_t)c->size), n_group = 0, new_rank = -1;
    if (!all || !group) {
        free(all), free(group);
        return mt_errorf(MT_ERR_OOM, "comm_gloo split: out of memory");
    }
    mine.color = color < 0 ? -1 : color;
    mine.key = key;
    mt_status st = parent_xchg(c, &mine, sizeof mine, all);
    int same_node = 1;
    for (int k = 0; st == MT_OK && color >= 0 && k < c->size; k++) { /* insertion sort by (key, parent rank) */
        if (all[k].color != mine.color) continue;
        int i = n_group++;
        while (i > 0 && all[group[i - 1]].key > all[k].key) {
            group[i] = group[i - 1];
            i--;
        }
        group[i] = k;
        if (strcmp(all[k].node, mine.node)) same_node = 0;
    }
    for (int i = 0; i < n_group; i++)
        if (group[i] == c->rank) new_rank = i;
    int use_gloo = color >= 0 && !same_node;
    member_info *members = NULL;
    if (st == MT_OK && use_gloo) {
        members = calloc((size_t)n_group, sizeof *members);
        if (!members) st = mt_errorf(MT_ERR_OOM, "comm_gloo split: out of memory");
        for (int i = 0; members && i < n_group; i++) members[i] = all[group[i]];
    }
    /* the fixed sequence: Gloo addresses (every rank), shared-memory names and attach (every rank;
     * the attach waits on the group's members only), then the Gloo groups connect */
    pending p = {0};
    int gloo_rank = use_gloo && members ? new_rank : -1;
    if (st == MT_OK) st = gloo_start(gloo_rank, n_group, members, x->timeout_s, parent_xchg, c, c->size, group, &p);
    if (st == MT_OK && !use_gloo) st = split_shm(c, color >= 0, new_rank, group, n_group, x->timeout_s, out);
    else if (st == MT_OK) st = split_shm(c, 0, new_rank, group, n_group, x->timeout_s, NULL);
    st = gloo_finish(&p, st, gloo_rank, n_group, members, x->fam, x->timeout_s, out);
    free(all);
    free(group);
    if (st != MT_OK) mt_error_context(st, "comm_gloo split (color %d): ", color);
    return st;
}
#endif
