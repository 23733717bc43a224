/* comm_shm_core.c — how comm_shm waits: brief spinning with sched_yield (only when the node's
 * ranks fit its cores; the budget halves whenever spinning did not pay off), then futex sleeps in slices of <= 100 ms; between slices the family's abort flag, the
 * peers' liveness (/proc/<pid>/stat: gone, zombie, or a reused pid = died) and the deadline are
 * checked. Also the barrier every collective is built on, abort, and the sticky failure state.
 * Rule: every wait has a deadline and names the rank it waits for; nothing here allocates. */
#include "parallel/comm_shm_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"

#define SHM_SPIN_NS 50000ull           /* spin at most this long before sleeping (spin mode only) */
#define SHM_SPIN_MIN_NS 2000ull        /* ... and at least this long */
#define SHM_CHECK_NS 100000000ull      /* liveness check and sleep slice: 100 ms */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, expected, &ts, NULL, 0);
}

void shm_wake(_Atomic uint32_t *word, _Atomic int32_t *sleepers) {
    atomic_fetch_add(word, 1);
    if (atomic_load(sleepers) > 0) syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* 0: alive (state and starttime filled when /proc could tell), -1: no such process. */
int shm_proc_stat(pid_t pid, char *state, uint64_t *starttime) {
    char path[64], buf[1024];
    *state = '?';
    *starttime = 0;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n_read = -1;
    if (fd >= 0) {
        n_read = read(fd, buf, sizeof buf - 1);
        close(fd);
    }
    if (n_read <= 0) { /* no /proc entry (or unreadable): ask the kernel directly */
        if (kill(pid, 0) == -1 && errno == ESRCH) return -1;
        return 0;
    }
    buf[n_read] = 0;
    char *p = strrchr(buf, ')'); /* the command name may contain spaces and parentheses */
    if (!p || p[1] != ' ') return 0;
    p += 2;
    *state = *p;
    for (int field = 3; field < 22 && p; field++) {
        p = strchr(p, ' ');
        if (p) p++;
    }
    if (p) *starttime = strtoull(p, NULL, 10);
    return 0;
}

static const char *state_words(char s) {
    switch (s) {
    case 'T': return "stopped (SIGSTOP?)";
    case 't': return "stopped by a debugger";
    case 'D': return "in uninterruptible sleep (I/O?)";
    case 'R': return "running";
    case 'S': return "sleeping";
    default: return "state unknown";
    }
}

/* "rank W (pid P)" plus its place in a sub-communicator */
static void describe(shm_ctx *c, int k, char *buf, size_t buf_bytes) {
    const shm_member *m = &c->members[k];
    if (c->hdr == c->fam->root)
        snprintf(buf, buf_bytes, "rank %d (pid %d)", m->world_rank, m->pid);
    else
        snprintf(buf, buf_bytes, "rank %d (pid %d; rank %d of this %d-rank communicator)", m->world_rank, m->pid, k,
                 c->n);
}

static void wake_all(shm_ctx *c, shm_hdr *h);

/* First failure of the family wins the root's abort slot; relay = 1: a peer failure noticed by
 * this rank, passed on verbatim so every rank reports the root cause, not the ranks that exited
 * after noticing it. */
static void publish(shm_ctx *c, int relay, const char *reason) {
    shm_hdr *root = c->fam->root;
    int expected = 0;
    if (atomic_compare_exchange_strong(&root->abort_claim, &expected, 1)) {
        root->abort_rank = relay ? -1 : c->world_rank;
        root->abort_pid = (int32_t)getpid();
        snprintf(root->abort_reason, sizeof root->abort_reason, "%s", reason);
        atomic_store_explicit(&root->aborted, 1, memory_order_release);
    }
    wake_all(c, c->hdr);
    if (root != c->hdr) wake_all(c, root);
}

mt_status shm_fail(shm_ctx *c, mt_status st) {
    if (c->failed == MT_OK) {
        c->failed = st;
        snprintf(c->fail_msg, sizeof c->fail_msg, "%s", mt_last_error());
        if (st == MT_ERR_PEER) publish(c, 1, c->fail_msg);
    }
    return st;
}

static mt_status abort_error(shm_ctx *c) {
    shm_hdr *root = c->fam->root;
    if (root->abort_rank < 0) return shm_fail(c, mt_errorf(MT_ERR_PEER, "%s", root->abort_reason));
    return shm_fail(c, mt_errorf(MT_ERR_PEER, "rank %d (pid %d) aborted: %s", root->abort_rank, root->abort_pid,
                                 root->abort_reason));
}

mt_status shm_check(shm_ctx *c, const char *what, int groupable) {
    if (c->failed != MT_OK) return mt_errorf(c->failed, "%s", c->fail_msg);
    if (atomic_load_explicit(&c->fam->root->aborted, memory_order_acquire)) return abort_error(c);
    if (c->group_depth > 0 && !groupable)
        return mt_errorf(MT_ERR_UNSUPPORTED,
                         "comm_shm: %s inside group_start/group_end; only send and recv can be grouped", what);
    return MT_OK;
}

/* The first member that is gone (no process, zombie, or its pid now names another process), or -1. */
static int dead_peer(shm_ctx *c) {
    for (int k = 0; k < c->n; k++) {
        if (k == c->rank) continue;
        const shm_member *m = &c->members[k];
        char state;
        uint64_t start;
        if (shm_proc_stat(m->pid, &state, &start) < 0 || state == 'Z' || state == 'X') return k;
        if (m->starttime && start && start != m->starttime) return k;
    }
    return -1;
}

mt_status shm_wait(shm_ctx *c, _Atomic uint32_t *word, _Atomic int32_t *sleepers, shm_cond_fn cond, void *arg,
                   const char *what) {
    int blocker = -1;
    shm_hdr *root = c->fam->root;
    if (cond(c, arg, &blocker)) return MT_OK;
    if (c->spin) {
        /* spin with a sched_yield every ~128 polls (cheap when nothing else wants the core, and
         * it lets the peer run when the node is busier than it looks); the budget adapts:
         * halved each time spinning ended in a sleep, back to the maximum when it paid off */
        uint64_t t0 = mt_clock_ns();
        for (unsigned i = 1;; i++) {
            cpu_relax();
            if (cond(c, arg, &blocker)) {
                c->spin_ns = SHM_SPIN_NS;
                return MT_OK;
            }
            if (atomic_load_explicit(&root->aborted, memory_order_relaxed)) break;
            if ((i & 127) == 0) {
                if (mt_clock_ns() - t0 > c->spin_ns) break;
                sched_yield();
            }
        }
        c->spin_ns = c->spin_ns / 2 > SHM_SPIN_MIN_NS ? c->spin_ns / 2 : SHM_SPIN_MIN_NS;
    } else {
        sched_yield(); /* oversubscribed: let the rank we wait for run */
        if (cond(c, arg, &blocker)) return MT_OK;
    }
    uint64_t start = mt_clock_ns();
    uint64_t deadline = c->timeout_s > 0 ? start + (uint64_t)c->timeout_s * 1000000000ull : UINT64_MAX;
    uint64_t next_check = start + SHM_CHECK_NS;
    int grace_given = 0;
    for (;;) {
        if (atomic_load_explicit(&root->aborted, memory_order_acquire)) return abort_error(c);
        uint64_t now = mt_clock_ns();
        if (now >= next_check) {
            int dead = dead_peer(c);
            if (dead >= 0) {
                /* a peer may finish its part and exit just before we look: only a wait that is
                 * still unsatisfied after seeing the death fails */
                if (cond(c, arg, &blocker)) return MT_OK;
                char who[160];
                describe(c, dead, who, sizeof who);
                return shm_fail(c, mt_errorf(MT_ERR_PEER, "%s died (noticed by rank %d in %s)", who,
                                             c->members[c->rank].world_rank, what));
            }
            next_check = now + SHM_CHECK_NS;
        }
        if (now >= deadline && cond(c, arg, &blocker)) return MT_OK;
        char bstate = '?';
        uint64_t bstart;
        if (now >= deadline && !grace_given && blocker >= 0 &&
            shm_proc_stat(c->members[blocker].pid, &bstate, &bstart) == 0 && bstate != 'T' && bstate != 't') {
            /* The peer we wait for may itself be waiting, with the same timeout, in another communicator
             * (a tp peer on this node in a data-parallel collective over the network that lost a node): it
             * started that wait a little after ours began, so its error, the root cause, comes a little
             * after our deadline. Give it a quarter of the timeout (1 to 5 s) to publish that error to
             * this family (mt_pstate_abort) before reporting the peer as hung. A stopped peer gets none. */
            uint64_t grace = (uint64_t)c->timeout_s * 250000000ull;
            if (grace < 1000000000ull) grace = 1000000000ull;
            if (grace > 5000000000ull) grace = 5000000000ull;
            deadline = now + grace;
            grace_given = 1;
            continue;
        }
        if (now >= deadline) {
            char who[160] = "a peer", state_msg[96] = "";
            if (blocker >= 0) {
                char state;
                uint64_t st_time;
                describe(c, blocker, who, sizeof who);
                if (shm_proc_stat(c->members[blocker].pid, &state, &st_time) == 0 && state != '?')
                    snprintf(state_msg, sizeof state_msg, " (/proc says it is %s)", state_words(state));
            }
            return shm_fail(c, mt_errorf(MT_ERR_PEER,
                                         "timed out after %d s waiting for %s in %s; is it stopped or hung?%s "
                                         "(noticed by rank %d; raise parallel.timeout_s if it is just slow)",
                                         c->timeout_s, who, what, state_msg, c->members[c->rank].world_rank));
        }
        atomic_fetch_add(sleepers, 1);
        uint32_t v = atomic_load(word);
        if (cond(c, arg, &blocker)) {
            atomic_fetch_sub(sleepers, 1);
            return MT_OK;
        }
        uint64_t until = next_check < deadline ? next_check : deadline;
        futex_wait(word, v, until > now ? until - now : 1000);
        atomic_fetch_sub(sleepers, 1);
        if (cond(c, arg, &blocker)) return MT_OK;
    }
}

static int barrier_cond(shm_ctx *c, void *arg, int *blocker) {
    uint64_t seq = *(const uint64_t *)arg;
    for (int k = 0; k < c->n; k++) {
        if (atomic_load(&c->members[k].arrive) < seq) {
            *blocker = k;
            return 0;
        }
    }
    return 1;
}

mt_status shm_barrier(shm_ctx *c, const char *what) {
    if (c->n == 1) return MT_OK;
    uint64_t seq = ++c->bar_seq;
    int blocker;
    atomic_store(&c->members[c->rank].arrive, seq); /* seq_cst: publishes the slots written before */
    if (barrier_cond(c, &seq, &blocker)) {          /* this rank arrived last: wake the others */
        shm_wake(&c->hdr->bar_word, &c->hdr->bar_sleepers);
        return MT_OK;
    }
    return shm_wait(c, &c->hdr->bar_word, &c->hdr->bar_sleepers, barrier_cond, &seq, what);
}

mt_status shm_barrier_op(mt_comm *comm) {
    shm_ctx *c = shm_of(comm);
    mt_status st = shm_check(c, "barrier", 0);
    if (st != MT_OK) return st;
    return shm_barrier(c, "barrier");
}

static void wake_all(shm_ctx *c, shm_hdr *h) {
    shm_wake(&h->bar_word, &h->bar_sleepers);
    if (h == c->hdr)
        for (int k = 0; k < c->n; k++) shm_wake(&c->members[k].bell, &c->members[k].bell_sleepers);
}

void shm_abort(mt_comm *comm) {
    if (!comm || !comm->ctx) return;
    publish(shm_of(comm), 0, mt_last_error());
}
