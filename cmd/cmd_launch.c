/* cmd_launch.c — two subcommands around the rank bootstrap:
 *   mtrain launch -n N [--max-restarts M] [--no-prefix] [--] ARGS...
 *       forks N local ranks of `mtrain ARGS` under a built-in PMIx server (parallel/launch.c);
 *       with M > 0 a failed job is restarted up to M times (parallel/launch_restarts.c)
 *   mtrain bootstrap-check [--timeout S] [--fail-rank R [--fail-code C]] [--sleep S [--sleep-rank R]]
 *                          [--if-restart-below K]
 *       bootstraps (PMIx / env:// / single, parallel/bootstrap.h), allgathers every rank's
 *       (rank, size, local rank, local size, pid, host), checks that every rank sees ranks
 *       0..size-1 exactly once and consistent local ranks, and prints
 *       "bootstrap-check: kind=K rank=R size=N local=L/LN ok" (and, when MT_RESTART_COUNT is
 *       set, as mtrain launch does, "bootstrap-check: rank=R MT_RESTART_COUNT=K
 *       TORCHELASTIC_RESTART_COUNT=K"). The --fail / --sleep options are faults for the
 *       launcher tests (test/e2e/bootstrap_launchers.sh, test/e2e/launch_restarts.sh);
 *       --if-restart-below K confines them to the attempts whose MT_RESTART_COUNT (unset = 0)
 *       is below K, so a restarted job can run clean.
 * Rule kept: returns the exit code; cmd/mtrain.c exits. */
#include "cmd/cmd_launch.h"
#include "core/clock.h"

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "parallel/bootstrap.h"
#include "parallel/launch.h"

static void launch_usage(FILE *f) {
    fprintf(f,
            "usage: mtrain launch -n N [--max-restarts M] [--no-prefix] [--oversubscribe] [--] ARGS...\n"
            "  Runs N ranks of `mtrain ARGS` on this machine, like torchrun --nproc-per-node N. The\n"
            "  launcher is a PMIx server: the ranks bootstrap exactly as under srun --mpi=pmix.\n"
            "  -n N, --nproc-per-node N   number of ranks\n"
            "  --max-restarts M           when a rank fails, start all N ranks again (same arguments), up\n"
            "                             to M times; default 0: never. Also --max-restarts=M, --max_restarts\n"
            "  --no-prefix                do not prefix output lines with \"[rR] \" (lines that already\n"
            "                             start with \"[r\", like mtrain's \"[r3 tp1 pp0 dp1]\", never are)\n"
            "  --oversubscribe            allow more than 64 ranks per CPU (more than 4 per CPU only warns)\n"
            "  When a rank exits non-zero, is killed or calls PMIx_Abort, the others get SIGTERM (SIGKILL\n"
            "  5 s later). With a restart left the launcher logs the rank, its cause and \"restart k of\n"
            "  M\" and starts all N ranks again; else it exits with that rank's status (128 + signal),\n"
            "  saying \"restarts exhausted\" when M > 0. The ranks see MT_RESTART_COUNT (and\n"
            "  TORCHELASTIC_RESTART_COUNT) = the restarts so far, 0 at first, to resume from their latest\n"
            "  checkpoint after a restart. SIGINT/SIGTERM/SIGHUP are passed to the ranks and end the job,\n"
            "  never restarted (mtrain saves a checkpoint and exits 0 on SIGTERM: the launcher then exits 0\n"
            "  too); ranks still running MT_LAUNCH_STOP_GRACE_S (300) seconds later, or after a second\n"
            "  signal, are killed. OMP_NUM_THREADS defaults to CPUs / N.\n"
            "example: mtrain launch -n 4 --max-restarts 3 --config configs/gpt-tiny.yaml\n");
}

static int parse_int(const char *s, int lo, int hi, int *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return 0;
    *out = (int)v;
    return 1;
}

/* --max-restarts M, --max-restarts=M and torchrun's --max_restarts spellings: returns 0 when
 * argv[*i] is none of them, 1 when parsed (*i moved past it), -1 after printing an error */
static int max_restarts_arg(int argc, char **argv, int *i, int *out) {
    static const char *const names[] = {"--max-restarts", "--max_restarts"};
    const char *a = argv[*i];
    for (int k = 0; k < 2; k++) {
        size_t n = strlen(names[k]);
        if (strncmp(a, names[k], n) || (a[n] && a[n] != '=')) continue;
        int inline_value = a[n] == '=';
        if (!inline_value && *i + 1 >= argc) {
            fprintf(stderr, "mtrain launch: error: %s needs a value: the number of restarts, 0 or more\n", a);
            return -1;
        }
        const char *v = inline_value ? a + n + 1 : argv[*i + 1];
        if (!parse_int(v, 0, 1000000, out)) {
            fprintf(stderr, "mtrain launch: error: %s%s%s: expected a number of restarts in 0..1000000\n", a,
                    inline_value ? "" : " ", inline_value ? "" : v);
            return -1;
        }
        *i += inline_value ? 1 : 2;
        return 1;
    }
    return 0;
}

/* Ranks far beyond the cores time-share them: each one is slower than the whole machine would
 * be, start-up takes seconds per hundred ranks, and a rank descheduled for long can miss
 * parallel.timeout_s. More than MT_LAUNCH_WARN_PER_CPU ranks per usable CPU warns; more than
 * MT_LAUNCH_REFUSE_PER_CPU (and more than 64 ranks) is refused unless --oversubscribe (or
 * MT_LAUNCH_OVERSUBSCRIBE=1) says it is meant, e.g. a bootstrap scale test. */
#define MT_LAUNCH_WARN_PER_CPU 4
#define MT_LAUNCH_REFUSE_PER_CPU 64
static int check_oversubscription(int n, int oversubscribe) {
    cpu_set_t set;
    int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1) cpus = 1;
    const char *e = getenv("MT_LAUNCH_OVERSUBSCRIBE");
    if (e && !strcmp(e, "1")) oversubscribe = 1;
    if (n > 64 && n > MT_LAUNCH_REFUSE_PER_CPU * cpus && !oversubscribe) {
        fprintf(stderr,
                "mtrain launch: error: -n %d ranks on %d CPU(s) is %.0f ranks per CPU (more than %d): refusing; "
                "use fewer ranks, or pass --oversubscribe (MT_LAUNCH_OVERSUBSCRIBE=1) if this is meant\n",
                n, cpus, (double)n / cpus, MT_LAUNCH_REFUSE_PER_CPU);
        return 1;
    }
    if (n > MT_LAUNCH_WARN_PER_CPU * cpus)
        fprintf(stderr,
                "mtrain launch: warning: -n %d ranks on %d CPU(s) (%.1f per CPU, more than %d): the ranks time-share "
                "the cores, start slowly and may need a larger parallel.timeout_s\n",
                n, cpus, (double)n / cpus, MT_LAUNCH_WARN_PER_CPU);
    return 0;
}

int mt_cmd_launch(int argc, char **argv) {
    int n = 0, prefix = 1, i = 0, max_restarts = 0, got, oversubscribe = 0;
    while (i < argc) {
        const char *a = argv[i];
        if ((got = max_restarts_arg(argc, argv, &i, &max_restarts)) != 0) {
            if (got < 0) return 2;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            launch_usage(stdout);
            return 0;
        } else if ((!strcmp(a, "-n") || !strcmp(a, "--nproc-per-node") || !strcmp(a, "--nprocs")) && i + 1 < argc) {
            if (!parse_int(argv[i + 1], 1, 4096, &n)) {
                fprintf(stderr, "mtrain launch: error: %s %s: expected a number of ranks in 1..4096\n", a, argv[i + 1]);
                return 2;
            }
            i += 2;
        } else if (!strncmp(a, "--nproc-per-node=", 17)) {
            if (!parse_int(a + 17, 1, 4096, &n)) {
                fprintf(stderr, "mtrain launch: error: %s: expected a number of ranks in 1..4096\n", a);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--no-prefix")) {
            prefix = 0;
            i++;
        } else if (!strcmp(a, "--oversubscribe")) {
            oversubscribe = 1;
            i++;
        } else if (!strcmp(a, "--")) {
            i++;
            break;
        } else {
            break; /* the first argument the launcher does not know starts the rank's ARGS */
        }
    }
    if (n == 0) {
        fprintf(stderr, "mtrain launch: error: -n N (the number of ranks) is required\n");
        launch_usage(stderr);
        return 2;
    }
    if (i >= argc) {
        fprintf(stderr, "mtrain launch: error: nothing to run after the launcher's options\n");
        launch_usage(stderr);
        return 2;
    }
    if (check_oversubscription(n, oversubscribe) != 0) return 2;
    char **child_argv = calloc((size_t)(argc - i + 2), sizeof *child_argv);
    if (!child_argv) {
        fprintf(stderr, "mtrain launch: error: out of memory\n");
        return 1;
    }
    child_argv[0] = "mtrain";
    for (int k = i; k < argc; k++) child_argv[k - i + 1] = argv[k];
    mt_launch_opts o = {.n_ranks = n, .argv = child_argv, .exe = NULL, .prefix = prefix, .kill_grace_s = 5,
                       .max_restarts = max_restarts};
    int code = 1;
    mt_status st = mt_launch_run(&o, &code);
    free(child_argv);
    if (st != MT_OK) {
        fprintf(stderr, "%s\n", mt_last_error());
        return 1;
    }
    return code;
}

/* ---- bootstrap-check ---- */

typedef struct {
    int32_t rank, size, local_rank, local_size, pid;
    char host[64];
    char kind[8];
} who_t;

static int check_table(const mt_bootstrap *bs, const who_t *all, char *why, size_t n_why) {
    for (int r = 0; r < bs->size; r++) {
        const who_t *w = &all[r];
        if (w->rank != r) return snprintf(why, n_why, "slot %d holds rank %d", r, (int)w->rank), 0;
        if (w->size != bs->size)
            return snprintf(why, n_why, "rank %d sees size %d, rank %d sees %d", r, (int)w->size, bs->rank, bs->size),
                   0;
        if (strncmp(w->kind, bs->kind, sizeof w->kind - 1))
            return snprintf(why, n_why, "rank %d bootstrapped as %.7s, rank %d as %s", r, w->kind, bs->rank, bs->kind),
                   0;
        if (w->local_rank < 0 || w->local_rank >= w->local_size)
            return snprintf(why, n_why, "rank %d has local rank %d of %d", r, (int)w->local_rank, (int)w->local_size),
                   0;
        int same_host = 0, same_local = 0;
        for (int q = 0; q < bs->size; q++) {
            if (strncmp(all[q].host, w->host, sizeof w->host)) continue;
            same_host++;
            if (all[q].local_rank == w->local_rank) same_local++;
            if (q != r && all[q].pid == w->pid)
                return snprintf(why, n_why, "ranks %d and %d are the same process (pid %d)", q, r, (int)w->pid), 0;
        }
        if (same_local != 1)
            return snprintf(why, n_why, "local rank %d appears %d times on host %s", (int)w->local_rank, same_local,
                            w->host),
                   0;
        if (same_host != w->local_size)
            return snprintf(why, n_why, "host %s runs %d ranks but rank %d says local size %d", w->host, same_host, r,
                            (int)w->local_size),
                   0;
    }
    return 1;
}

int mt_cmd_bootstrap_check(int argc, char **argv) {
    int timeout_s = 60, fail_rank = -1, fail_code = 1, sleep_s = 0, sleep_rank = -1, restart_below = -1;
    for (int i = 0; i < argc; i++) {
        int *dst = NULL, lo = 0, hi = 1 << 30;
        if (!strcmp(argv[i], "--timeout")) dst = &timeout_s, lo = 1;
        else if (!strcmp(argv[i], "--fail-rank")) dst = &fail_rank;
        else if (!strcmp(argv[i], "--fail-code")) dst = &fail_code, lo = 1, hi = 255;
        else if (!strcmp(argv[i], "--sleep")) dst = &sleep_s;
        else if (!strcmp(argv[i], "--sleep-rank")) dst = &sleep_rank;
        else if (!strcmp(argv[i], "--if-restart-below")) dst = &restart_below;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: mtrain bootstrap-check [--timeout S] [--fail-rank R [--fail-code C]] "
                   "[--sleep S [--sleep-rank R]] [--if-restart-below K]\n"
                   "  --fail-rank R       rank R exits with status C (default 1) after the checks, without finalize\n"
                   "  --sleep S           every rank (or only --sleep-rank R) sleeps S s before the final barrier\n"
                   "  --if-restart-below K  the two faults above happen only while MT_RESTART_COUNT (set by\n"
                   "                      mtrain launch; unset = 0) is below K: a restarted job runs clean\n");
            return 0;
        }
        if (!dst || i + 1 >= argc || !parse_int(argv[i + 1], lo, hi, dst)) {
            fprintf(stderr, "bootstrap-check: error: bad argument '%s'%s\n", argv[i],
                    dst ? " (expected a number after it)" : "");
            return 2;
        }
        i++;
    }
    const char *restart_env = getenv("MT_RESTART_COUNT");
    int restart = 0;
    if (restart_below >= 0) {
        if (fail_rank < 0 && sleep_s == 0) {
            fprintf(stderr, "bootstrap-check: error: --if-restart-below confines --fail-rank / --sleep: give one\n");
            return 2;
        }
        if (restart_env && !parse_int(restart_env, 0, 1 << 30, &restart)) {
            fprintf(stderr, "bootstrap-check: error: MT_RESTART_COUNT=%s is not a restart count\n", restart_env);
            return 2;
        }
        if (restart >= restart_below) fail_rank = -1, sleep_s = 0; /* this attempt runs clean */
    }
    mt_bootstrap bs;
    double t0 = mt_clock_s();
    mt_status st = mt_bootstrap_init(&bs, timeout_s);
    if (st != MT_OK) {
        fprintf(stderr, "bootstrap-check: error: %s (%s)\n", mt_last_error(), mt_status_name(st));
        return 1;
    }
    double t_init = mt_clock_s() - t0;
    who_t me;
    memset(&me, 0, sizeof me);
    me.rank = bs.rank;
    me.size = bs.size;
    me.local_rank = bs.local_rank;
    me.local_size = bs.local_size;
    me.pid = (int32_t)getpid();
    gethostname(me.host, sizeof me.host - 1);
    snprintf(me.kind, sizeof me.kind, "%s", bs.kind);
    who_t *all = calloc((size_t)bs.size, sizeof *all);
    size_t blob_bytes = 4099;
    unsigned char *blob = malloc(blob_bytes), *blobs = malloc(blob_bytes * (size_t)bs.size);
    char why[512] = "";
    int ok = all && blob && blobs;
    if (!ok) snprintf(why, sizeof why, "out of memory");
    double t1 = mt_clock_s(), t_ag1 = 0, t_ag2 = 0, t_bar = 0;
    if (ok && (st = bs.allgather(&bs, &me, sizeof me, all)) != MT_OK) ok = 0;
    t_ag1 = mt_clock_s() - t1;
    if (ok && !check_table(&bs, all, why, sizeof why)) ok = 0;
    if (ok) {
        for (size_t i = 0; i < blob_bytes; i++) blob[i] = (unsigned char)(bs.rank * 31 + i * 7);
        t1 = mt_clock_s();
        if ((st = bs.allgather(&bs, blob, blob_bytes, blobs)) != MT_OK) ok = 0;
        t_ag2 = mt_clock_s() - t1;
        for (int r = 0; ok && r < bs.size; r++)
            for (size_t i = 0; ok && i < blob_bytes; i++)
                if (blobs[(size_t)r * blob_bytes + i] != (unsigned char)(r * 31 + i * 7)) {
                    snprintf(why, sizeof why, "byte %zu of rank %d's %zu-byte blob is wrong", i, r, blob_bytes);
                    ok = 0;
                }
    }
    if (ok) {
        t1 = mt_clock_s();
        if ((st = bs.barrier(&bs)) != MT_OK) ok = 0;
        t_bar = mt_clock_s() - t1;
    }
    if (!ok) {
        if (st != MT_OK)
            fprintf(stderr, "bootstrap-check: rank %d: error: %s (%s)\n", bs.rank, mt_last_error(), mt_status_name(st));
        else
            fprintf(stderr, "bootstrap-check: rank %d: FAILED: %s\n", bs.rank, why);
        free(all), free(blob), free(blobs);
        bs.finalize(&bs);
        return 1;
    }
    printf("bootstrap-check: kind=%s rank=%d size=%d local=%d/%d ok\n", bs.kind, bs.rank, bs.size, bs.local_rank,
           bs.local_size);
    if (restart_env) {
        const char *te = getenv("TORCHELASTIC_RESTART_COUNT");
        printf("bootstrap-check: rank=%d MT_RESTART_COUNT=%s TORCHELASTIC_RESTART_COUNT=%s\n", bs.rank, restart_env,
               te ? te : "(unset)");
    }
    if (bs.rank == 0)
        printf("bootstrap-check: timings on rank 0: init %.1f ms, allgather %zu B %.2f ms, allgather %zu B %.2f ms, "
               "barrier %.2f ms\n",
               t_init * 1e3, sizeof me, t_ag1 * 1e3, blob_bytes, t_ag2 * 1e3, t_bar * 1e3);
    fflush(stdout);
    free(all), free(blob), free(blobs);
    if (bs.rank == fail_rank) {
        fprintf(stderr, "bootstrap-check: rank %d exits with status %d as asked (--fail-rank)\n", bs.rank, fail_code);
        return fail_code; /* without finalize, like a crashing rank; the others wait in the barrier below */
    }
    if (sleep_s > 0 && (sleep_rank < 0 || sleep_rank == bs.rank)) sleep((unsigned)sleep_s);
    st = bs.barrier(&bs);
    if (st != MT_OK) {
        fprintf(stderr, "bootstrap-check: rank %d: final barrier: %s (%s)\n", bs.rank, mt_last_error(),
                mt_status_name(st));
        bs.finalize(&bs);
        return 1;
    }
    bs.finalize(&bs);
    return 0;
}
