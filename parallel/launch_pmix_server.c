/* launch_pmix_server.c — the PMIx server inside `mtrain launch`, on libpmix 4.2.2's server
 * API: PMIx_server_init with a private tmpdir, PMIx_server_register_nspace with the job, node
 * and per-proc info (every rank on this node, local rank = rank), then per rank
 * PMIx_server_register_client + PMIx_server_setup_fork. The host module is minimal: a fence
 * hands the collected data straight back (one server, so the local data is the whole job's),
 * direct modex answers "not found" (never needed after a collecting fence), PMIx_Abort is
 * passed to launch.c through a notify pipe. Rule kept: no exit; errors name the PMIx call and
 * PMIx_Error_string.
 * The private tmpdir is $TMPDIR/mtrain-launch.<pid>.XXXXXX (pid: the process that holds the
 * server) with a file "owner" inside ("pid P start S pidns N": S the start time from
 * /proc/P/stat, N the pid namespace). A launcher killed by SIGKILL cannot remove it (8 MB of PMIx
 * files); the next server start removes every such folder of our uid whose owner is gone: same
 * pid namespace and kill(P, 0) fails with ESRCH, or P now is another process (start time
 * differs). Folders of other users, other pid namespaces (containers sharing /tmp) or without
 * the owner file are never touched. */
#include "parallel/launch_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <pmix.h>
#include <pmix_server.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"

static struct {
    int started;
    int n_ranks;
    int notify_fd;
    char nspace[PMIX_MAX_NSLEN + 1];
    char tmpdir[4096];
    pthread_mutex_t lock; /* guards the abort record, written from libpmix's thread */
    int aborted, abort_rank, abort_status;
    char abort_msg[512];
} g = {.lock = PTHREAD_MUTEX_INITIALIZER, .notify_fd = -1};

/* ---- waiting for libpmix's operation callbacks ---- */

typedef struct {
    pthread_mutex_t m;
    pthread_cond_t cv;
    int done;
    pmix_status_t st;
} waiter;

static void waiter_init(waiter *w) {
    pthread_mutex_init(&w->m, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->done = 0;
    w->st = PMIX_SUCCESS;
}

static void op_done(pmix_status_t st, void *cbdata) {
    waiter *w = cbdata;
    pthread_mutex_lock(&w->m);
    w->st = st;
    w->done = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->m);
}

/* rc is what the non-blocking call returned; waits for the callback when it was accepted */
static pmix_status_t waiter_wait(waiter *w, pmix_status_t rc) {
    if (rc == PMIX_OPERATION_SUCCEEDED) return PMIX_SUCCESS;
    if (rc != PMIX_SUCCESS) return rc;
    struct timespec ts = mt_clock_realtime_after(60);
    pthread_mutex_lock(&w->m);
    int e = 0;
    while (!w->done && e != ETIMEDOUT) e = pthread_cond_timedwait(&w->cv, &w->m, &ts);
    rc = w->done ? w->st : PMIX_ERR_TIMEOUT;
    pthread_mutex_unlock(&w->m);
    return rc;
}

static void waiter_destroy(waiter *w) {
    pthread_mutex_destroy(&w->m);
    pthread_cond_destroy(&w->cv);
}

static mt_status pmix_fail(const char *call, pmix_status_t rc) {
    return mt_errorf(MT_ERR_PMIX, "mtrain launch: %s failed: %s (PMIx status %d)", call, PMIx_Error_string(rc),
                     (int)rc);
}

/* ---- the host module ---- */

/* a client connected or finalized: nothing to keep, acknowledged at once */
static pmix_status_t on_client_ack(const pmix_proc_t *proc, void *server_object, pmix_op_cbfunc_t cbfunc,
                                   void *cbdata) {
    (void)proc;
    (void)server_object;
    if (cbfunc) cbfunc(PMIX_SUCCESS, cbdata);
    return PMIX_SUCCESS;
}

static pmix_status_t on_abort(const pmix_proc_t *proc, void *server_object, int status, const char msg[],
                              pmix_proc_t procs[], size_t nprocs, pmix_op_cbfunc_t cbfunc, void *cbdata) {
    (void)server_object;
    (void)procs;
    (void)nprocs;
    pthread_mutex_lock(&g.lock);
    if (!g.aborted) {
        g.aborted = 1;
        g.abort_rank = (int)proc->rank;
        g.abort_status = status;
        snprintf(g.abort_msg, sizeof g.abort_msg, "%s", msg ? msg : "");
    }
    pthread_mutex_unlock(&g.lock);
    if (g.notify_fd >= 0) {
        char a = 'A';
        ssize_t k = write(g.notify_fd, &a, 1);
        (void)k;
    }
    if (cbfunc) cbfunc(PMIX_SUCCESS, cbdata);
    return PMIX_SUCCESS;
}

static pmix_status_t on_fence(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[], size_t ninfo,
                              char *data, size_t ndata, pmix_modex_cbfunc_t cbfunc, void *cbdata) {
    (void)procs;
    (void)nprocs;
    (void)info;
    (void)ninfo;
    /* every participant is local to this one server: the collected data is complete */
    if (cbfunc) cbfunc(PMIX_SUCCESS, data, ndata, cbdata, NULL, NULL);
    return PMIX_SUCCESS;
}

static pmix_status_t on_direct_modex(const pmix_proc_t *proc, const pmix_info_t info[], size_t ninfo,
                                     pmix_modex_cbfunc_t cbfunc, void *cbdata) {
    (void)proc;
    (void)info;
    (void)ninfo;
    if (cbfunc) cbfunc(PMIX_ERR_NOT_FOUND, NULL, 0, cbdata, NULL, NULL);
    return PMIX_SUCCESS;
}

static pmix_server_module_t g_module = {
    .client_connected = on_client_ack,
    .client_finalized = on_client_ack,
    .abort = on_abort,
    .fence_nb = on_fence,
    .direct_modex = on_direct_modex,
};

/* ---- tmpdir ---- */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)ftw;
    if (flag == FTW_DP || flag == FTW_D)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

void mt_launch_pmix_remove_tmpdir(void) {
    if (!g.tmpdir[0]) return;
    nftw(g.tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    g.tmpdir[0] = 0;
}

/* ---- owner record, stale folders of killed launchers ---- */

/* "start S pidns N" of process pid (S: field 22 of /proc/pid/stat); 0 when unreadable */
static int proc_identity(long pid, unsigned long long *start, char *ns, size_t n_ns) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t k = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (k <= 0) return 0;
    buf[k] = 0;
    char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    if (!p) return 0;
    int field = 2;
    for (p++; *p && field < 22; p++)
        if (*p == ' ') field++;
    if (field != 22 || sscanf(p, "%llu", start) != 1) return 0;
    if (ns) {
        snprintf(path, sizeof path, "/proc/%ld/ns/pid", pid);
        ssize_t m = readlink(path, ns, n_ns - 1);
        ns[m > 0 ? m : 0] = 0;
    }
    return 1;
}

static void write_owner(const char *dir) {
    char path[4200], ns[128] = "", line[256];
    unsigned long long start = 0;
    if (!proc_identity((long)getpid(), &start, ns, sizeof ns)) return;
    if (snprintf(path, sizeof path, "%s/owner", dir) >= (int)sizeof path) return;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return;
    int n = snprintf(line, sizeof line, "pid %ld start %llu pidns %s\n", (long)getpid(), start, ns);
    ssize_t k = write(fd, line, (size_t)n);
    (void)k;
    close(fd);
}

/* 1: the folder's owner is provably gone */
static int owner_gone(const char *dir, long name_pid) {
    char path[4200], buf[256], ns[128] = "", my_ns[128] = "";
    if (snprintf(path, sizeof path, "%s/owner", dir) >= (int)sizeof path) return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return 0;
    ssize_t k = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (k <= 0) return 0;
    buf[k] = 0;
    long pid = 0;
    unsigned long long start = 0, now_start = 0;
    if (sscanf(buf, "pid %ld start %llu pidns %127s", &pid, &start, ns) != 3 || pid != name_pid || pid <= 0) return 0;
    unsigned long long my_start;
    if (!proc_identity((long)getpid(), &my_start, my_ns, sizeof my_ns) || strcmp(ns, my_ns) != 0) return 0;
    if (kill((pid_t)pid, 0) == -1 && errno == ESRCH) return 1;
    if (proc_identity(pid, &now_start, NULL, 0) && now_start != start) return 1; /* the pid was reused */
    return 0;
}

static int rm_tree(const char *dir) { return nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* mtrain-launch.<digits>.<6 characters> */
static int our_pattern(const char *name, long *pid) {
    const char *pre = "mtrain-launch.";
    size_t n = strlen(pre);
    if (strncmp(name, pre, n)) return 0;
    const char *p = name + n, *q = p;
    while (*q >= '0' && *q <= '9') q++;
    if (q == p || q - p > 10 || *q != '.' || strlen(q + 1) != 6) return 0;
    *pid = strtol(p, NULL, 10);
    return 1;
}

static void remove_stale(const char *base) {
    DIR *d = opendir(base);
    if (!d) return;
    struct dirent *e;
    int n_removed = 0;
    while ((e = readdir(d))) {
        long pid;
        if (!our_pattern(e->d_name, &pid)) continue;
        char path[4200];
        if (snprintf(path, sizeof path, "%s/%s", base, e->d_name) >= (int)sizeof path) continue;
        struct stat sb;
        if (lstat(path, &sb) != 0 || !S_ISDIR(sb.st_mode) || sb.st_uid != geteuid()) continue;
        if (!owner_gone(path, pid)) continue;
        rm_tree(path);
        n_removed++;
    }
    closedir(d);
    if (n_removed)
        fprintf(stderr, "mtrain launch: removed %d stale mtrain-launch.* folder(s) of killed launchers from %s\n",
                n_removed, base);
}

/* ---- namespace registration ---- */

static pmix_status_t add_u32(void *list, const char *key, uint32_t v) {
    return PMIx_Info_list_add(list, key, &v, PMIX_UINT32);
}

static mt_status register_nspace(int n) {
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    size_t peers_len = (size_t)n * 12 + 16;
    char *peers = malloc(peers_len), *node_map = NULL, *proc_map = NULL;
    void *list = PMIx_Info_list_start();
    pmix_status_t rc = PMIX_SUCCESS;
    mt_status st = MT_OK;
    pmix_data_array_t darray;
    int have_darray = 0;
    waiter w;
    waiter_init(&w);
    if (!peers || !list) {
        st = mt_errorf(MT_ERR_OOM, "mtrain launch: out of memory");
        goto out;
    }
    size_t len = 0;
    for (int r = 0; r < n; r++) len += (size_t)snprintf(peers + len, peers_len - len, "%s%d", r ? "," : "", r);
    rc = PMIx_generate_regex(host, &node_map);
    if (rc != PMIX_SUCCESS) {
        st = pmix_fail("PMIx_generate_regex", rc);
        goto out;
    }
    rc = PMIx_generate_ppn(peers, &proc_map); /* "0,1,..,n-1"; a range "0-3" gives local size 1 */
    if (rc != PMIX_SUCCESS) {
        st = pmix_fail("PMIx_generate_ppn", rc);
        goto out;
    }
    pmix_rank_t leader = 0;
#define ADD(call)                                                                                 \
    do {                                                                                          \
        rc = (call);                                                                              \
        if (rc != PMIX_SUCCESS) {                                                                 \
            st = pmix_fail("PMIx_Info_list_add", rc);                                             \
            goto out;                                                                             \
        }                                                                                         \
    } while (0)
    ADD(add_u32(list, PMIX_UNIV_SIZE, (uint32_t)n));
    ADD(add_u32(list, PMIX_JOB_SIZE, (uint32_t)n));
    ADD(add_u32(list, PMIX_MAX_PROCS, (uint32_t)n));
    ADD(add_u32(list, PMIX_LOCAL_SIZE, (uint32_t)n));
    ADD(add_u32(list, PMIX_NODE_SIZE, (uint32_t)n));
    ADD(add_u32(list, PMIX_NUM_NODES, 1));
    ADD(add_u32(list, PMIX_APPNUM, 0));
    ADD(PMIx_Info_list_add(list, PMIX_LOCAL_PEERS, peers, PMIX_STRING));
    ADD(PMIx_Info_list_add(list, PMIX_LOCALLDR, &leader, PMIX_PROC_RANK));
    ADD(PMIx_Info_list_add(list, PMIX_JOBID, g.nspace, PMIX_STRING));
    ADD(PMIx_Info_list_add(list, PMIX_NODE_MAP, node_map, PMIX_STRING));
    ADD(PMIx_Info_list_add(list, PMIX_PROC_MAP, proc_map, PMIX_STRING));
    for (int r = 0; r < n; r++) {
        void *pl = PMIx_Info_list_start();
        pmix_rank_t rank = (pmix_rank_t)r;
        uint16_t lr = (uint16_t)r;
        uint32_t zero = 0;
        pmix_data_array_t pd;
        rc = PMIx_Info_list_add(pl, PMIX_RANK, &rank, PMIX_PROC_RANK);
        if (rc == PMIX_SUCCESS) rc = PMIx_Info_list_add(pl, PMIX_LOCAL_RANK, &lr, PMIX_UINT16);
        if (rc == PMIX_SUCCESS) rc = PMIx_Info_list_add(pl, PMIX_NODE_RANK, &lr, PMIX_UINT16);
        if (rc == PMIX_SUCCESS) rc = PMIx_Info_list_add(pl, PMIX_NODEID, &zero, PMIX_UINT32);
        if (rc == PMIX_SUCCESS) rc = PMIx_Info_list_add(pl, PMIX_APPNUM, &zero, PMIX_UINT32);
        if (rc == PMIX_SUCCESS) rc = PMIx_Info_list_add(pl, PMIX_HOSTNAME, host, PMIX_STRING);
        if (rc == PMIX_SUCCESS) rc = PMIx_Info_list_convert(pl, &pd);
        PMIx_Info_list_release(pl);
        if (rc != PMIX_SUCCESS) {
            st = pmix_fail("PMIx_Info_list (per-rank data)", rc);
            goto out;
        }
        rc = PMIx_Info_list_add(list, PMIX_PROC_DATA, &pd, PMIX_DATA_ARRAY);
        PMIX_DATA_ARRAY_DESTRUCT(&pd);
        if (rc != PMIX_SUCCESS) {
            st = pmix_fail("PMIx_Info_list_add(PMIX_PROC_DATA)", rc);
            goto out;
        }
    }
#undef ADD
    rc = PMIx_Info_list_convert(list, &darray);
    if (rc != PMIX_SUCCESS) {
        st = pmix_fail("PMIx_Info_list_convert", rc);
        goto out;
    }
    have_darray = 1;
    rc = PMIx_server_register_nspace(g.nspace, n, (pmix_info_t *)darray.array, darray.size, op_done, &w);
    rc = waiter_wait(&w, rc);
    if (rc != PMIX_SUCCESS) st = pmix_fail("PMIx_server_register_nspace", rc);
out:
    if (have_darray) PMIX_DATA_ARRAY_DESTRUCT(&darray);
    if (list) PMIx_Info_list_release(list);
    waiter_destroy(&w);
    free(peers);
    free(node_map);
    free(proc_map);
    return st;
}

mt_status mt_launch_pmix_start(int n_ranks, int notify_fd) {
    if (g.started) return mt_errorf(MT_ERR_INTERNAL, "mtrain launch: PMIx server started twice");
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    remove_stale(base);
    snprintf(g.tmpdir, sizeof g.tmpdir, "%s/mtrain-launch.%ld.XXXXXX", base, (long)getpid());
    if (!mkdtemp(g.tmpdir)) {
        int e = errno;
        g.tmpdir[0] = 0;
        return mt_errorf(MT_ERR_IO, "mtrain launch: cannot create a private PMIx directory under %s (TMPDIR): %s",
                         base, strerror(e));
    }
    write_owner(g.tmpdir);
    g.n_ranks = n_ranks;
    g.notify_fd = notify_fd;
    snprintf(g.nspace, sizeof g.nspace, "mtrain-launch.%ld", (long)getpid());
    pmix_info_t info[2];
    bool no = false;
    PMIX_INFO_CONSTRUCT(&info[0]);
    PMIX_INFO_CONSTRUCT(&info[1]);
    PMIX_INFO_LOAD(&info[0], PMIX_SERVER_TMPDIR, g.tmpdir, PMIX_STRING);
    PMIX_INFO_LOAD(&info[1], PMIX_SERVER_SYSTEM_SUPPORT, &no, PMIX_BOOL);
    pmix_status_t rc = PMIx_server_init(&g_module, info, 2);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    if (rc != PMIX_SUCCESS) {
        mt_launch_pmix_remove_tmpdir();
        return pmix_fail("PMIx_server_init", rc);
    }
    g.started = 1;
    mt_status st = register_nspace(n_ranks);
    if (st != MT_OK) {
        PMIx_server_finalize(); /* nothing ran yet: the library can be torn down */
        g.started = 0;
        mt_launch_pmix_remove_tmpdir();
    }
    return st;
}

mt_status mt_launch_pmix_child_env(int rank, char ***env) {
    pmix_proc_t proc;
    PMIX_PROC_LOAD(&proc, g.nspace, (pmix_rank_t)rank);
    waiter w;
    waiter_init(&w);
    pmix_status_t rc = PMIx_server_register_client(&proc, geteuid(), getegid(), NULL, op_done, &w);
    rc = waiter_wait(&w, rc);
    waiter_destroy(&w);
    if (rc != PMIX_SUCCESS) return pmix_fail("PMIx_server_register_client", rc);
    /* register first, then setup_fork, then fork: the order of openpmix's own example server */
    rc = PMIx_server_setup_fork(&proc, env);
    if (rc != PMIX_SUCCESS) return pmix_fail("PMIx_server_setup_fork", rc);
    return MT_OK;
}

int mt_launch_pmix_abort_info(int *rank, int *status, char *msg, int n_msg) {
    pthread_mutex_lock(&g.lock);
    int a = g.aborted;
    if (a) {
        *rank = g.abort_rank;
        *status = g.abort_status;
        if (n_msg > 0) snprintf(msg, (size_t)n_msg, "%s", g.abort_msg);
    }
    pthread_mutex_unlock(&g.lock);
    return a;
}

void mt_launch_pmix_finish(void) {
    if (g.started) {
        waiter w;
        waiter_init(&w);
        PMIx_server_deregister_nspace(g.nspace, op_done, &w);
        waiter_wait(&w, PMIX_SUCCESS);
        waiter_destroy(&w);
        PMIx_server_finalize();
        g.started = 0;
    }
    mt_launch_pmix_remove_tmpdir();
}
