/* comm_shm_seg.c — creating communicators: the world through the bootstrap (or, for programs
 * that fork their own ranks, through an anonymous shared "local" handle), sub-communicators by
 * split() through the parent's segment, and destroy. Each communicator of n > 1 ranks owns one
 * segment: its leader (new rank 0) creates "/mtrain-<pid>-<random>" (a name every member learned
 * beforehand), fallocates it (a full /dev/shm is an error, not a SIGBUS later) and marks it
 * ready; the others poll for it while watching the leader; the last to attach unlinks it, and
 * on any failure every rank that knows the name unlinks it too, so /dev/shm keeps nothing.
 * Rule: no exit, no leaks on error paths; every wait has the communicator's deadline. */
#include "parallel/comm_shm_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"

const struct mt_comm_i mt_comm_shm_i = MT_COMM_TABLE("shm", shm_, shm_barrier_op, shm_split);

typedef struct {
    int32_t pid, world_rank;
    uint64_t starttime;
} shm_peer;

typedef struct {
    size_t slot_bytes, ring_bytes;
    int spin;
} shm_params;

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static void make_name(char name[SHM_NAME_BYTES]) {
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        struct timespec ts = mt_clock_realtime_after(0);
        r = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40) ^ (uintptr_t)&r;
    }
    snprintf(name, SHM_NAME_BYTES, "/mtrain-%d-%016llx", (int)getpid(), (unsigned long long)r);
}

static uint64_t self_starttime(void) {
    char state;
    uint64_t t;
    shm_proc_stat(getpid(), &state, &t);
    return t;
}

static void layout(shm_hdr *h, int n, const shm_params *p) {
    h->n_ranks = n;
    h->slot_bytes = p->slot_bytes;
    h->ring_bytes = p->ring_bytes;
    h->spin = p->spin;
    h->members_off = round_up(sizeof(shm_hdr), 4096);
    h->data_off = round_up(h->members_off + (size_t)n * sizeof(shm_member), 4096);
    h->ring_stride = round_up(sizeof(shm_ring) + p->ring_bytes, 256);
    h->rings_off = round_up(h->data_off + 2 * (size_t)n * p->slot_bytes, 4096);
    h->seg_bytes = round_up(h->rings_off + (size_t)n * (size_t)n * h->ring_stride, 4096);
}

static void shm_free_ctx(shm_ctx *c) {
    if (!c) return;
    free(c->ops);
    free(c->busy);
    free(c->counts);
    free(c);
}

/* The per-process context of a mapped segment; takes a reference on fam (or makes the segment
 * the root of a new family when fam is NULL). */
static mt_status make_ctx(shm_hdr *h, size_t map_bytes, int rank, int timeout_s, shm_family *fam, shm_ctx **out) {
    int n = h->n_ranks;
    shm_ctx *c = calloc(1, sizeof *c);
    if (!c) return mt_errorf(MT_ERR_OOM, "comm_shm: out of memory for a communicator context");
    c->busy = calloc(2 * (size_t)n, 1);
    c->counts = calloc((size_t)n * (size_t)n, sizeof *c->counts);
    c->cap_ops = 16;
    c->ops = calloc((size_t)c->cap_ops, sizeof *c->ops);
    if (!fam) {
        fam = calloc(1, sizeof *fam);
        if (fam) {
            fam->root = h;
            fam->root_bytes = map_bytes;
        }
    }
    if (!c->busy || !c->counts || !c->ops || !fam) {
        if (fam && fam->refs == 0) free(fam);
        shm_free_ctx(c);
        return mt_errorf(MT_ERR_OOM, "comm_shm: out of memory for a %d-rank communicator context", n);
    }
    fam->refs++;
    c->fam = fam;
    c->hdr = h;
    c->map_bytes = map_bytes;
    c->own_map = fam->root != h;
    c->rank = rank;
    c->n = n;
    c->timeout_s = timeout_s;
    c->spin = h->spin;
    c->spin_ns = 50000;
    c->members = (shm_member *)((char *)h + h->members_off);
    c->data = (char *)h + h->data_off;
    c->rings = (char *)h + h->rings_off;
    c->world_rank = c->members[rank].world_rank;
    c->comm.i = &mt_comm_shm_i;
    c->comm.ctx = c;
    c->comm.rank = rank;
    c->comm.size = n;
    *out = c;
    return MT_OK;
}

static void unmap_ctx(shm_ctx *c) {
    shm_family *fam = c->fam;
    if (c->own_map) munmap(c->hdr, c->map_bytes);
    if (--fam->refs == 0) {
        munmap(fam->root, fam->root_bytes);
        free(fam);
    }
    shm_free_ctx(c);
}

void shm_destroy(mt_comm *comm) {
    if (!comm || !comm->ctx) return;
    unmap_ctx(shm_of(comm));
}

static int attached_cond(shm_ctx *c, void *arg, int *blocker) {
    (void)arg;
    *blocker = -1;
    return atomic_load(&c->hdr->n_attached) >= c->n;
}

/* Leader: create, size, allocate and initialise the segment. */
static mt_status create_segment(const char *name, int n, const shm_peer *peers, const shm_params *p, shm_hdr **out,
                                size_t *out_bytes) {
    shm_hdr tmp;
    memset(&tmp, 0, sizeof tmp);
    layout(&tmp, n, p);
    size_t n_bytes = tmp.seg_bytes;
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0)
        return mt_errorf(MT_ERR_IO, "comm_shm: shm_open(%s) failed: %s; is /dev/shm mounted and writable?", name,
                         strerror(errno));
    int err = ftruncate(fd, (off_t)n_bytes) ? errno : posix_fallocate(fd, 0, (off_t)n_bytes);
    if (err) {
        uint64_t failed = SHM_MAGIC_FAILED;
        if (pwrite(fd, &failed, sizeof failed, 0) != (ssize_t)sizeof failed) { /* members will time out */
        }
        shm_unlink(name);
        close(fd);
        return mt_errorf(MT_ERR_OOM,
                         "comm_shm: cannot allocate %.1f MiB of shared memory in /dev/shm for a %d-rank communicator "
                         "(%s); make /dev/shm larger (docker: --shm-size) or lower MT_COMM_SHM_SLOT_BYTES (now %zu) "
                         "and MT_COMM_SHM_RING_BYTES (now %zu)",
                         (double)n_bytes / (1 << 20), n, strerror(err), p->slot_bytes, p->ring_bytes);
    }
    void *base = mmap(NULL, n_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
        shm_unlink(name);
        return mt_errorf(MT_ERR_OOM, "comm_shm: mmap of %zu bytes of %s failed: %s", n_bytes, name, strerror(errno));
    }
    shm_hdr *h = base;
    memcpy(h, &tmp, sizeof tmp);
    shm_member *m = (shm_member *)((char *)h + h->members_off);
    for (int k = 0; k < n; k++) {
        m[k].pid = peers[k].pid;
        m[k].world_rank = peers[k].world_rank;
        m[k].starttime = peers[k].starttime;
    }
    atomic_store_explicit(&h->magic, SHM_MAGIC_READY, memory_order_release);
    *out = h;
    *out_bytes = n_bytes;
    return MT_OK;
}

/* Member: wait for the leader's segment (watching the leader), then map it. */
static mt_status attach_segment(const char *name, const shm_peer *leader, int timeout_s, shm_hdr **out,
                                size_t *out_bytes) {
    double deadline = timeout_s > 0 ? mt_clock_s() + timeout_s : 1e300, next_check = mt_clock_s() + 0.1;
    long pause_us = 50;
    int fd = -1;
    uint64_t magic = 0;
    for (;;) {
        if (fd < 0) {
            fd = shm_open(name, O_RDWR, 0);
            if (fd < 0 && errno != ENOENT)
                return mt_errorf(MT_ERR_IO, "comm_shm: shm_open(%s) failed: %s", name, strerror(errno));
        }
        if (fd >= 0 && pread(fd, &magic, sizeof magic, 0) == (ssize_t)sizeof magic && magic != 0) break;
        double now = mt_clock_s();
        if (now >= next_check) {
            char state;
            uint64_t start;
            if (shm_proc_stat(leader->pid, &state, &start) < 0 || state == 'Z' ||
                (leader->starttime && start && start != leader->starttime)) {
                if (fd >= 0) close(fd);
                return mt_errorf(MT_ERR_PEER, "rank %d (pid %d) died while creating a shared-memory communicator",
                                 leader->world_rank, leader->pid);
            }
            next_check = now + 0.1;
        }
        if (now >= deadline) {
            if (fd >= 0) close(fd);
            return mt_errorf(MT_ERR_PEER,
                             "timed out after %d s waiting for rank %d (pid %d) to create the shared-memory "
                             "communicator %s; is it stopped or hung? (parallel.timeout_s sets the limit)",
                             timeout_s, leader->world_rank, leader->pid, name);
        }
        sleep_us(pause_us);
        if (pause_us < 2000) pause_us *= 2;
    }
    if (magic != SHM_MAGIC_READY) {
        close(fd);
        return mt_errorf(MT_ERR_PEER, "rank %d (pid %d) could not create the shared-memory communicator %s "
                                      "(see its error message; /dev/shm may be full)",
                         leader->world_rank, leader->pid, name);
    }
    uint64_t n_bytes = 0;
    if (pread(fd, &n_bytes, sizeof n_bytes, offsetof(shm_hdr, seg_bytes)) != (ssize_t)sizeof n_bytes) {
        close(fd);
        return mt_errorf(MT_ERR_IO, "comm_shm: cannot read the header of %s", name);
    }
    void *base = mmap(NULL, n_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED)
        return mt_errorf(MT_ERR_OOM, "comm_shm: mmap of %llu bytes of %s failed: %s", (unsigned long long)n_bytes,
                         name, strerror(errno));
    shm_hdr *h = base;
    (void)atomic_load_explicit(&h->magic, memory_order_acquire);
    *out = h;
    *out_bytes = n_bytes;
    return MT_OK;
}

/* Every member of a new communicator calls this with the same name, peers and params; rank 0
 * creates. n == 1 needs no name: private memory. */
static mt_status open_group(const char *name, int n, int rank, const shm_peer *peers, const shm_params *p,
                            shm_family *fam, int timeout_s, mt_comm **out) {
    shm_hdr *h = NULL;
    size_t n_bytes = 0;
    mt_status st;
    *out = NULL;
    if (n == 1) {
        shm_hdr tmp;
        memset(&tmp, 0, sizeof tmp);
        layout(&tmp, 1, p);
        n_bytes = tmp.seg_bytes;
        void *base = mmap(NULL, n_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED) return mt_errorf(MT_ERR_OOM, "comm_shm: cannot map %zu bytes", n_bytes);
        h = base;
        memcpy(h, &tmp, sizeof tmp);
        shm_member *m = (shm_member *)((char *)h + h->members_off);
        m->pid = peers[0].pid;
        m->world_rank = peers[0].world_rank;
        m->starttime = peers[0].starttime;
        atomic_store(&h->n_attached, 1);
        atomic_store(&h->magic, SHM_MAGIC_READY);
    } else if (rank == 0) {
        st = create_segment(name, n, peers, p, &h, &n_bytes);
        if (st != MT_OK) return st;
    } else {
        st = attach_segment(name, &peers[0], timeout_s, &h, &n_bytes);
        if (st != MT_OK) {
            shm_unlink(name); /* the leader may be gone: nobody else would remove it */
            return st;
        }
    }
    shm_ctx *c = NULL;
    st = make_ctx(h, n_bytes, rank, timeout_s, fam, &c);
    if (st != MT_OK) {
        munmap(h, n_bytes);
        if (n > 1) shm_unlink(name);
        return st;
    }
    if (n > 1) {
        if (atomic_fetch_add(&h->n_attached, 1) + 1 == n) shm_unlink(name);
        shm_wake(&h->bar_word, &h->bar_sleepers);
        st = shm_wait(c, &h->bar_word, &h->bar_sleepers, attached_cond, NULL, "communicator creation");
        if (st != MT_OK) {
            shm_unlink(name);
            unmap_ctx(c);
            return st;
        }
    }
    *out = &c->comm;
    return MT_OK;
}

/* ---- the world: one exchange of who-is-who, then open_group ---- */

typedef struct {
    int32_t pid, rank;
    uint64_t starttime;
    char host[100]; /* hostname/boot-id */
    char name[SHM_NAME_BYTES];
    cpu_set_t cpus;
} world_xchg;

typedef mt_comm_shm_xchg_fn xchg_fn;

static size_t env_bytes(const char *var, size_t dflt, size_t lo, size_t hi) {
    const char *v = getenv(var);
    if (!v || !*v) return dflt;
    char *end;
    unsigned long long x = strtoull(v, &end, 0);
    if (*end == 'k' || *end == 'K') x <<= 10;
    else if (*end == 'm' || *end == 'M') x <<= 20;
    if (x < lo) x = lo;
    if (x > hi) x = hi;
    return (size_t)x;
}

/* "hostname/boot-id": equal on every rank of one node (a hostname alone can repeat). */
void mt_comm_shm_node_id(char *buf, size_t buf_bytes) {
    char host[64] = "?", boot[40] = "";
    if (gethostname(host, sizeof host - 1)) snprintf(host, sizeof host, "?");
    host[sizeof host - 1] = 0;
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t k = read(fd, boot, sizeof boot - 1);
        close(fd);
        boot[k > 0 ? k : 0] = 0;
        boot[strcspn(boot, "\n")] = 0;
    }
    snprintf(buf, buf_bytes, "%.60s/%.36s", host, boot);
}

static mt_status world_create(int rank, int n, xchg_fn xchg, void *xctx, int timeout_s, mt_comm **out) {
    mt_status st;
    *out = NULL;
    if (n < 1 || rank < 0 || rank >= n)
        return mt_errorf(MT_ERR_INTERNAL, "comm_shm: rank %d of %d ranks is not a valid rank", rank, n);
    world_xchg mine;
    memset(&mine, 0, sizeof mine);
    mine.pid = (int32_t)getpid();
    mine.rank = rank;
    mine.starttime = self_starttime();
    mt_comm_shm_node_id(mine.host, sizeof mine.host);
    if (rank == 0) make_name(mine.name);
    if (sched_getaffinity(0, sizeof mine.cpus, &mine.cpus)) CPU_ZERO(&mine.cpus);

    world_xchg *all = calloc((size_t)n, sizeof *all);
    shm_peer *peers = calloc((size_t)n, sizeof *peers);
    if (!all || !peers) {
        free(all);
        free(peers);
        return mt_errorf(MT_ERR_OOM, "comm_shm: out of memory for %d ranks", n);
    }
    if (n > 1) {
        st = xchg(xctx, &mine, sizeof mine, all);
        if (st != MT_OK) {
            mt_error_context(st, "comm_shm: exchanging segment names: ");
            goto out;
        }
    } else {
        all[0] = mine;
    }
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    for (int k = 0; k < n; k++) {
        if (strcmp(all[k].host, all[0].host)) {
            st = mt_errorf(MT_ERR_UNSUPPORTED,
                           "comm_shm: rank %d runs on %s but rank 0 on %s (host/boot id); the shared-memory "
                           "communicator needs every rank on one node (several nodes need the NCCL communicator)",
                           k, all[k].host, all[0].host);
            goto out;
        }
        CPU_OR(&cpus, &cpus, &all[k].cpus);
        peers[k].pid = all[k].pid;
        peers[k].world_rank = k;
        peers[k].starttime = all[k].starttime;
    }
    /* defaults shrink with many ranks: slots <= 128 MiB and rings <= 64 MiB per communicator
     * (rings grow as n^2); explicit settings are taken as given */
    shm_params p;
    size_t slot_dflt = SHM_DEFAULT_SLOT_BYTES, ring_dflt = SHM_DEFAULT_RING_BYTES;
    if (slot_dflt > ((size_t)64 << 20) / (size_t)n) slot_dflt = ((size_t)64 << 20) / (size_t)n;
    if (ring_dflt > ((size_t)64 << 20) / ((size_t)n * (size_t)n)) ring_dflt = ((size_t)64 << 20) / ((size_t)n * (size_t)n);
    if (ring_dflt < 4096) ring_dflt = 4096;
    p.slot_bytes = round_up(env_bytes("MT_COMM_SHM_SLOT_BYTES", slot_dflt, 256, (size_t)1 << 30), 64);
    if (p.slot_bytes < (size_t)128 * (size_t)n) p.slot_bytes = (size_t)128 * (size_t)n; /* alltoallv counts fit */
    p.ring_bytes = round_up(env_bytes("MT_COMM_SHM_RING_BYTES", ring_dflt, 64, (size_t)1 << 30), 64);
    int n_cpus = CPU_COUNT(&cpus);
    p.spin = n_cpus <= 0 || n <= n_cpus;
    const char *spin = getenv("MT_COMM_SHM_SPIN");
    if (spin && *spin) p.spin = atoi(spin) != 0;
    st = open_group(all[0].name, n, rank, peers, &p, NULL, timeout_s, out);
out:
    free(all);
    free(peers);
    return st;
}

static mt_status bootstrap_xchg(void *xctx, const void *mine, size_t n_bytes, void *all) {
    mt_bootstrap *bs = xctx;
    return bs->allgather(bs, mine, n_bytes, all);
}

mt_status mt_comm_shm_init(mt_bootstrap *bs, int timeout_s, mt_comm **world) {
    if (!bs || !world) return mt_errorf(MT_ERR_INTERNAL, "mt_comm_shm_init: NULL argument");
    *world = NULL;
    if (bs->local_size > 0 && bs->local_size != bs->size)
        return mt_errorf(MT_ERR_UNSUPPORTED,
                         "comm_shm: %d ranks on %d nodes (%d on this one); the shared-memory communicator needs "
                         "every rank on one node",
                         bs->size, bs->size / bs->local_size, bs->local_size);
    return world_create(bs->rank, bs->size, bootstrap_xchg, bs, timeout_s, world);
}

size_t mt_comm_shm_xchg_bytes(void) { return sizeof(world_xchg); }

mt_status mt_comm_shm_create_xchg(int rank, int n, mt_comm_shm_xchg_fn xchg, void *xctx, int timeout_s,
                                  mt_comm **out) {
    return world_create(rank, n, xchg, xctx, timeout_s, out);
}

/* ---- split ---- */

mt_status shm_split(mt_comm *comm, int color, int key, mt_comm **out) {
    shm_ctx *c = shm_of(comm);
    *out = NULL;
    mt_status st = shm_check(c, "split", 0);
    if (st != MT_OK) return st;
    shm_member *me = &c->members[c->rank];
    me->xchg.color = color < 0 ? -1 : color;
    me->xchg.key = key;
    if (color >= 0) make_name(me->xchg.name);
    st = shm_barrier(c, "split");
    if (st != MT_OK) return st;
    int *group = malloc(sizeof(int) * (size_t)c->n);
    shm_peer *peers = malloc(sizeof(shm_peer) * (size_t)c->n);
    char name[SHM_NAME_BYTES] = "";
    int n_group = 0, new_rank = -1;
    if (!group || !peers) {
        free(group);
        free(peers);
        return shm_fail(c, mt_errorf(MT_ERR_OOM, "comm_shm: out of memory in split"));
    }
    if (color >= 0) {
        for (int k = 0; k < c->n; k++) { /* insertion sort by (key, old rank) */
            if (c->members[k].xchg.color != color) continue;
            int kk = c->members[k].xchg.key, i = n_group++;
            while (i > 0 && c->members[group[i - 1]].xchg.key > kk) {
                group[i] = group[i - 1];
                i--;
            }
            group[i] = k;
        }
        for (int i = 0; i < n_group; i++) {
            const shm_member *m = &c->members[group[i]];
            if (group[i] == c->rank) new_rank = i;
            peers[i].pid = m->pid;
            peers[i].world_rank = m->world_rank;
            peers[i].starttime = m->starttime;
        }
        memcpy(name, c->members[group[0]].xchg.name, sizeof name);
        name[sizeof name - 1] = 0;
    }
    st = shm_barrier(c, "split"); /* everyone has read the exchange area */
    if (st == MT_OK && color >= 0) {
        shm_params p = {c->hdr->slot_bytes, c->hdr->ring_bytes, c->hdr->spin};
        st = open_group(name, n_group, new_rank, peers, &p, c->fam, c->timeout_s, out);
        if (st != MT_OK) mt_error_context(st, "comm_shm split (color %d): ", color);
    }
    free(group);
    free(peers);
    return st;
}

/* ---- local handle: an allgather over anonymous shared memory, for forked ranks ---- */

#define LOCAL_BLOB_BYTES 512

struct mt_comm_shm_local {
    int n_ranks;
    size_t map_bytes;
    _Atomic uint64_t arrived;
    _Atomic uint32_t word;
    _Atomic int32_t sleepers;
    char blobs[]; /* n_ranks * LOCAL_BLOB_BYTES */
};

typedef struct {
    mt_comm_shm_local *l;
    int rank, timeout_s;
} local_xctx;

static mt_status local_barrier(local_xctx *x) {
    mt_comm_shm_local *l = x->l;
    uint64_t n = (uint64_t)l->n_ranks;
    uint64_t target = (atomic_fetch_add(&l->arrived, 1) / n + 1) * n;
    atomic_fetch_add(&l->word, 1);
    if (atomic_load(&l->sleepers) > 0) syscall(SYS_futex, (uint32_t *)&l->word, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
    double deadline = x->timeout_s > 0 ? mt_clock_s() + x->timeout_s : 1e300;
    while (atomic_load(&l->arrived) < target) {
        if (mt_clock_s() >= deadline)
            return mt_errorf(MT_ERR_PEER,
                             "timed out after %d s waiting for the other %d ranks to create the local communicator "
                             "(parallel.timeout_s sets the limit)",
                             x->timeout_s, l->n_ranks - 1);
        atomic_fetch_add(&l->sleepers, 1);
        uint32_t v = atomic_load(&l->word);
        if (atomic_load(&l->arrived) < target) {
            struct timespec ts = {0, 100000000};
            syscall(SYS_futex, (uint32_t *)&l->word, FUTEX_WAIT, v, &ts, NULL, 0);
        }
        atomic_fetch_sub(&l->sleepers, 1);
    }
    return MT_OK;
}

static mt_status local_xchg(void *xctx, const void *mine, size_t n_bytes, void *all) {
    local_xctx *x = xctx;
    if (n_bytes > LOCAL_BLOB_BYTES) return mt_errorf(MT_ERR_INTERNAL, "comm_shm local: blob of %zu bytes", n_bytes);
    memcpy(x->l->blobs + (size_t)x->rank * LOCAL_BLOB_BYTES, mine, n_bytes);
    mt_status st = local_barrier(x);
    if (st != MT_OK) return st;
    for (int k = 0; k < x->l->n_ranks; k++)
        memcpy((char *)all + (size_t)k * n_bytes, x->l->blobs + (size_t)k * LOCAL_BLOB_BYTES, n_bytes);
    return local_barrier(x); /* blobs may be reused by the next exchange */
}

mt_status mt_comm_shm_local_create(int n_ranks, mt_comm_shm_local **out) {
    *out = NULL;
    if (n_ranks < 1) return mt_errorf(MT_ERR_CONFIG, "comm_shm local: %d ranks", n_ranks);
    size_t n_bytes = round_up(sizeof(mt_comm_shm_local) + (size_t)n_ranks * LOCAL_BLOB_BYTES, 4096);
    void *base = mmap(NULL, n_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return mt_errorf(MT_ERR_OOM, "comm_shm local: mmap failed: %s", strerror(errno));
    mt_comm_shm_local *l = base;
    l->n_ranks = n_ranks;
    l->map_bytes = n_bytes;
    *out = l;
    return MT_OK;
}

mt_status mt_comm_shm_create_local(mt_comm_shm_local *local, int rank, int timeout_s, mt_comm **world) {
    if (!local || !world) return mt_errorf(MT_ERR_INTERNAL, "mt_comm_shm_create_local: NULL argument");
    local_xctx x = {local, rank, timeout_s};
    return world_create(rank, local->n_ranks, local_xchg, &x, timeout_s, world);
}

void mt_comm_shm_local_free(mt_comm_shm_local *local) {
    if (local) munmap(local, local->map_bytes);
}
