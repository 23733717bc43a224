/* cmd_launch.c — two subcommands around the rank bootstrap:
 *   mtrain launch -n N [torchrun's flags] [--max-restarts M] [--no-prefix] [--] ARGS...
 *       forks N local ranks of `mtrain ARGS` under a built-in PMIx server (parallel/launch.c);
 *       with M > 0 a failed job is restarted up to M times (parallel/launch_restarts.c). Takes
 *       torchrun's flags in both spellings (--nproc_per_node / --nproc-per-node, "--f v" and
 *       "--f=v"); with --nnodes K > 1 it is one node of a K-node job: ranks
 *       node_rank * N .. + N-1 of K * N, bootstrapping through env:// at --master-addr:--master-port
 *       (or --rdzv-endpoint) instead of the PMIx server. See launch_usage() for every flag.
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

#include "core/backend.h"
#include "parallel/bootstrap.h"
#include "parallel/launch.h"

static void launch_usage(FILE *f) {
    fprintf(f,
            "usage: mtrain launch -n N [--nnodes K --node-rank R --master-addr HOST --master-port PORT]\n"
            "                     [--max-restarts M] [--no-prefix] [--oversubscribe] [--] ARGS...\n"
            "  Runs N ranks of `mtrain ARGS` on this machine, like torchrun --nproc-per-node N. On one node\n"
            "  the launcher is a PMIx server: the ranks bootstrap exactly as under srun --mpi=pmix.\n"
            "  torchrun's flags are taken in both spellings (--node_rank / --node-rank) and forms (--f V,\n"
            "  --f=V). With `--`, every flag before it must be a launcher flag; without, the first argument\n"
            "  that is not one starts ARGS (a near miss such as --nnode is an error).\n"
            "  -n N, --nproc-per-node N   ranks on this node; also auto (the GPUs if any, else the CPUs this\n"
            "                             process may use), cpu (the CPUs), gpu (the GPUs; none: an error)\n"
            "  --nnodes K                 nodes of the job (default 1); K > 1: run this launcher on every node,\n"
            "                             each with its --node-rank; elastic MIN:MAX is refused (fixed sizes)\n"
            "  --node-rank R              this node, 0..K-1 (default 0): its ranks are R*N .. R*N+N-1 of K*N\n"
            "  --master-addr HOST, --master-port PORT\n"
            "                             node 0's host and a free port there (default 127.0.0.1:29500): global\n"
            "                             rank 0 serves the env:// store on it (K > 1; one node needs no port)\n"
            "  --rdzv-endpoint HOST[:PORT] the same as --master-addr/--master-port (port default 29400), with\n"
            "                             --rdzv-backend c10d|static (others refused) and --rdzv-id ID\n"
            "                             (TORCHELASTIC_RUN_ID); node ranks are never assigned: give --node-rank\n"
            "  --standalone               a single-node job (the default here: no port is needed)\n"
            "  --role NAME                ROLE_NAME (default \"default\")\n"
            "  --monitor-interval, -r/--redirects, -t/--tee, --log-dir, --start-method, --rdzv-conf,\n"
            "  --local-addr, --use-env    accepted and ignored, with a note (output is always relayed)\n"
            "  With K > 1 the ranks get torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE,\n"
            "  LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, ROLE_RANK, ROLE_WORLD_SIZE, MASTER_ADDR,\n"
            "  MASTER_PORT, TORCHELASTIC_RUN_ID, ...) and bootstrap through env://; a local rank's failure\n"
            "  ends this node's ranks and the launcher exits non-zero; the other nodes' ranks notice it\n"
            "  through their communicator. The CPU backend's communicator is shared memory: several\n"
            "  launchers on ONE machine work (e.g. --nnodes 2 --node-rank 0|1 --master-addr 127.0.0.1);\n"
            "  ranks on different machines are refused (that needs the NCCL communicator). The store\n"
            "  admits only ranks holding the job secret: MT_STORE_SECRET (the same on every node), else\n"
            "  MT_STORE_SECRET_FILE, else ~/.mtrain/store_secret (created when missing; shared home).\n"
            "  --max-restarts M           when a rank fails, start all N ranks again (same arguments), up\n"
            "                             to M times; default 0: never. Also --max-restarts=M, --max_restarts\n"
            "  --no-prefix                do not prefix output lines with \"[rR] \" (lines that already\n"
            "                             start with \"[r\", like mtrain's \"[r3 tp1 pp0 dp1]\", and Megatron's\n"
            "                             iteration and validation lines, printed by one rank, never are)\n"
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

/* Ranks far beyond the cores time-share them: each one is slower than the whole machine would
 * be, start-up takes seconds per hundred ranks, and a rank descheduled for long can miss
 * parallel.timeout_s. More than MT_LAUNCH_WARN_PER_CPU ranks per usable CPU warns; more than
 * MT_LAUNCH_REFUSE_PER_CPU (and more than 64 ranks) is refused unless --oversubscribe (or
 * MT_LAUNCH_OVERSUBSCRIBE=1) says it is meant, e.g. a bootstrap scale test. */
#define MT_LAUNCH_WARN_PER_CPU 4
#define MT_LAUNCH_REFUSE_PER_CPU 64
static int usable_cpus(void);
static int check_oversubscription(int n, int oversubscribe) {
    int cpus = usable_cpus();
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

/* ---- torchrun's flags ---- */

/* torchrun's defaults (torch.distributed.run): --master-addr 127.0.0.1, --master-port 29500; a
 * --rdzv-endpoint without a port means 29400 */
#define MT_LAUNCH_DEFAULT_ADDR "127.0.0.1"
#define MT_LAUNCH_DEFAULT_PORT 29500
#define MT_LAUNCH_DEFAULT_RDZV_PORT 29400

typedef enum {
    F_NPROC = 1, F_NNODES, F_NODE_RANK, F_MASTER_ADDR, F_MASTER_PORT, F_STANDALONE, F_RDZV_BACKEND, F_RDZV_ENDPOINT,
    F_RDZV_ID, F_RDZV_CONF, F_MAX_RESTARTS, F_MONITOR_INTERVAL, F_REDIRECTS, F_TEE, F_LOG_DIR, F_ROLE,
    F_START_METHOD, F_LOCAL_ADDR, F_USE_ENV, F_NO_PREFIX, F_OVERSUBSCRIBE, F_REFUSED
} flag_id;

typedef struct {
    const char *name;  /* the dash spelling; torchrun's underscore spelling matches too */
    const char *alias; /* a short form ("-n", "-r", "-t") or another long name, or NULL */
    int takes_value;
    flag_id id;
} flag_def;

static const flag_def k_flags[] = {
    {"--nproc-per-node", "-n", 1, F_NPROC},
    {"--nprocs", NULL, 1, F_NPROC},
    {"--nnodes", NULL, 1, F_NNODES},
    {"--node-rank", NULL, 1, F_NODE_RANK},
    {"--master-addr", NULL, 1, F_MASTER_ADDR},
    {"--master-port", NULL, 1, F_MASTER_PORT},
    {"--standalone", NULL, 0, F_STANDALONE},
    {"--rdzv-backend", NULL, 1, F_RDZV_BACKEND},
    {"--rdzv-endpoint", NULL, 1, F_RDZV_ENDPOINT},
    {"--rdzv-id", NULL, 1, F_RDZV_ID},
    {"--rdzv-conf", NULL, 1, F_RDZV_CONF},
    {"--max-restarts", NULL, 1, F_MAX_RESTARTS},
    {"--monitor-interval", NULL, 1, F_MONITOR_INTERVAL},
    {"--redirects", "-r", 1, F_REDIRECTS},
    {"--tee", "-t", 1, F_TEE},
    {"--log-dir", NULL, 1, F_LOG_DIR},
    {"--role", NULL, 1, F_ROLE},
    {"--start-method", NULL, 1, F_START_METHOD},
    {"--local-addr", NULL, 1, F_LOCAL_ADDR},
    {"--use-env", NULL, 0, F_USE_ENV},
    {"--no-prefix", NULL, 0, F_NO_PREFIX},
    {"--oversubscribe", NULL, 0, F_OVERSUBSCRIBE},
    /* torchrun's, refused: the ranks always run this mtrain */
    {"--no-python", NULL, 0, F_REFUSED},
    {"--module", "-m", 0, F_REFUSED},
    {"--run-path", NULL, 0, F_REFUSED},
    {"--logs-specs", NULL, 1, F_REFUSED},
    {"--local-ranks-filter", NULL, 1, F_REFUSED},
    {"--log-line-prefix-template", NULL, 1, F_REFUSED},
};
#define N_FLAGS (int)(sizeof k_flags / sizeof k_flags[0])

static const char *k_known =
    "-n/--nproc-per-node, --nnodes, --node-rank, --master-addr, --master-port, --standalone, --rdzv-backend, "
    "--rdzv-endpoint, --rdzv-id, --rdzv-conf, --max-restarts, --monitor-interval, -r/--redirects, -t/--tee, "
    "--log-dir, --role, --start-method, --local-addr, --use-env, --no-prefix, --oversubscribe "
    "(each also with '_' for '-', and as --flag=value)";

/* 1 when arg is `name` (or name=VALUE), '_' and '-' alike after the leading dashes; *value is
 * what follows '=' (NULL without one) */
static int flag_matches(const char *arg, const char *name, const char **value) {
    if (!name) return 0;
    size_t i = 0;
    for (; name[i]; i++) {
        char a = arg[i], b = name[i];
        if (i >= 2 && a == '_') a = '-';
        if (a != b) return 0;
    }
    if (arg[i] && arg[i] != '=') return 0;
    *value = arg[i] == '=' ? arg + i + 1 : NULL;
    return 1;
}

/* words a launcher flag starts with: a near miss of one of them is a mistake, never an mtrain
 * argument (mtrain has no --nproc..., --nnode..., --node..., --master..., --rdzv... flags) */
static int looks_like_launcher_flag(const char *a) {
    static const char *const stems[] = {"--nproc", "--nnode", "--node", "--master", "--rdzv", "--max-restart",
                                        "--max_restart", "--monitor", "--redirect", "--standalone", "--start-method",
                                        "--start_method", "--local-addr", "--local_addr"};
    for (size_t k = 0; k < sizeof stems / sizeof stems[0]; k++)
        if (!strncmp(a, stems[k], strlen(stems[k]))) return 1;
    return 0;
}

typedef struct {
    int n, prefix, max_restarts, oversubscribe;
    int nnodes, node_rank, have_node_rank, standalone;
    int master_port, have_addr, have_port;
    char master_addr[256];
    const char *rdzv_backend, *rdzv_id, *role;
    char rdzv_endpoint[300];
} launch_args;

static int usable_cpus(void) {
    cpu_set_t set;
    int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    return cpus < 1 ? 1 : cpus;
}

/* --nproc-per-node N | auto | cpu | gpu (torchrun's): auto = the GPUs when there are any, else
 * the CPUs this process may run on; cpu = the CPUs; gpu = the GPUs (none: an error) */
static int parse_nproc(const char *flag, const char *v, int *n) {
    if (!strcmp(v, "auto") || !strcmp(v, "cpu") || !strcmp(v, "gpu")) {
        int gpus = strcmp(v, "cpu") ? mt_cuda_device_count() : 0;
        if (!strcmp(v, "gpu") && gpus < 1) {
            fprintf(stderr, "mtrain launch: error: %s gpu: no CUDA device is visible here; give a number of ranks, "
                            "or 'cpu' / 'auto' (one rank per CPU)\n", flag);
            return 0;
        }
        *n = gpus > 0 ? gpus : usable_cpus();
        if (*n > 4096) *n = 4096;
        return 1;
    }
    if (parse_int(v, 1, 4096, n)) return 1;
    fprintf(stderr, "mtrain launch: error: %s %s: expected a number of ranks in 1..4096, or auto, cpu, gpu\n", flag, v);
    return 0;
}

/* --nnodes N, or torchrun's elastic MIN:MAX with MIN == MAX */
static int parse_nnodes(const char *flag, const char *v, int *n) {
    const char *colon = strchr(v, ':');
    if (colon) {
        char lo[32];
        int a, b;
        snprintf(lo, sizeof lo, "%.*s", (int)(colon - v) < 31 ? (int)(colon - v) : 31, v);
        if (parse_int(lo, 1, 1 << 20, &a) && parse_int(colon + 1, 1, 1 << 20, &b) && a == b) {
            *n = a;
            return 1;
        }
        fprintf(stderr, "mtrain launch: error: %s %s: elastic MIN:MAX node counts are not supported (an mtrain job "
                        "has a fixed world size: its parallel layout is tp x pp x dp x ...); give the number of nodes, "
                        "e.g. %s %d, on every node\n", flag, v, flag, parse_int(colon + 1, 1, 1 << 20, &b) ? b : 2);
        return 0;
    }
    if (parse_int(v, 1, 1 << 20, n)) return 1;
    fprintf(stderr, "mtrain launch: error: %s %s: expected a number of nodes, 1 or more\n", flag, v);
    return 0;
}

/* HOST[:PORT] (IPv6: [ADDR]:PORT) into addr / port (no port: torchrun's 29400) */
static int parse_endpoint(const char *flag, const char *v, char *addr, size_t n_addr, int *port) {
    const char *host = v, *host_end, *colon;
    if (*v == '[') {
        host = v + 1;
        host_end = strchr(host, ']');
        colon = host_end && host_end[1] == ':' ? host_end + 1 : NULL;
        if (!host_end || (host_end[1] && !colon)) goto bad;
    } else {
        colon = strrchr(v, ':');
        host_end = colon ? colon : v + strlen(v);
    }
    if (host_end == host || (size_t)(host_end - host) >= n_addr) goto bad;
    snprintf(addr, n_addr, "%.*s", (int)(host_end - host), host);
    *port = MT_LAUNCH_DEFAULT_RDZV_PORT;
    if (colon && !parse_int(colon + 1, 1, 65535, port)) goto bad;
    return 1;
bad:
    fprintf(stderr, "mtrain launch: error: %s %s: expected HOST[:PORT] (PORT 1..65535), e.g. node0:29400\n", flag, v);
    return 0;
}

static void note(const char *flag, const char *v, const char *what) {
    fprintf(stderr, "mtrain launch: note: %s%s%s %s\n", flag, v ? " " : "", v ? v : "", what);
}

/* one launcher flag (known to be one: k_flags[k]) with its value v (NULL for a switch) */
static int take_flag(launch_args *la, const flag_def *f, const char *a, const char *v) {
    int x;
    switch (f->id) {
    case F_NPROC: return parse_nproc(a, v, &la->n);
    case F_NNODES: return parse_nnodes(a, v, &la->nnodes);
    case F_NODE_RANK:
        if (!parse_int(v, 0, 1 << 20, &la->node_rank)) {
            fprintf(stderr, "mtrain launch: error: %s %s: expected a node rank, 0 or more (below --nnodes)\n", a, v);
            return 0;
        }
        la->have_node_rank = 1;
        return 1;
    case F_MASTER_ADDR:
        if (!*v || strlen(v) >= sizeof la->master_addr) {
            fprintf(stderr, "mtrain launch: error: %s '%s': expected the host name or address of node 0\n", a, v);
            return 0;
        }
        snprintf(la->master_addr, sizeof la->master_addr, "%s", v);
        la->have_addr = 1;
        return 1;
    case F_MASTER_PORT:
        if (!parse_int(v, 1, 65535, &la->master_port)) {
            fprintf(stderr, "mtrain launch: error: %s %s: expected a port number in 1..65535\n", a, v);
            return 0;
        }
        la->have_port = 1;
        return 1;
    case F_STANDALONE: la->standalone = 1; return 1;
    case F_RDZV_BACKEND:
        if (strcmp(v, "static") && strcmp(v, "c10d")) {
            fprintf(stderr, "mtrain launch: error: %s %s: mtrain launch has a static rendezvous only (the ranks meet "
                            "at global rank 0's env:// store): use --rdzv-backend c10d or static with "
                            "--rdzv-endpoint HOST:PORT (or --master-addr / --master-port) and --node-rank on each "
                            "node\n", a, v);
            return 0;
        }
        la->rdzv_backend = v;
        return 1;
    case F_RDZV_ENDPOINT:
        if (!*v) return 1; /* torchrun's default: "" */
        if (strlen(v) >= sizeof la->rdzv_endpoint) return parse_endpoint(a, "(too long)", NULL, 0, &x);
        snprintf(la->rdzv_endpoint, sizeof la->rdzv_endpoint, "%s", v);
        return 1;
    case F_RDZV_ID: la->rdzv_id = v; return 1;
    case F_RDZV_CONF: note(a, v, "is ignored (no rendezvous options: parallel.timeout_s bounds the bootstrap)"); return 1;
    case F_MAX_RESTARTS:
        if (!parse_int(v, 0, 1000000, &la->max_restarts)) {
            fprintf(stderr, "mtrain launch: error: %s %s: expected a number of restarts in 0..1000000\n", a, v);
            return 0;
        }
        return 1;
    case F_MONITOR_INTERVAL:
        note(a, v, "is ignored: the launcher reacts to a rank's exit at once (SIGCHLD), it does not poll");
        return 1;
    case F_REDIRECTS:
    case F_TEE:
    case F_LOG_DIR:
        note(a, v, "is ignored: every rank's stdout / stderr is relayed to the launcher's, each line prefixed "
                   "\"[rR] \" (redirect the launcher's output to keep a log; mtrain --metrics writes a JSONL)");
        return 1;
    case F_ROLE: la->role = v; return 1;
    case F_START_METHOD:
        if (strcmp(v, "spawn") && strcmp(v, "fork") && strcmp(v, "forkserver")) {
            fprintf(stderr, "mtrain launch: error: %s %s: expected spawn, fork or forkserver\n", a, v);
            return 0;
        }
        note(a, v, "is ignored: every rank is a fresh mtrain process (fork + exec)");
        return 1;
    case F_LOCAL_ADDR: note(a, v, "is ignored (ranks reach rank 0's store at --master-addr)"); return 1;
    case F_USE_ENV: return 1; /* torch.distributed.launch's: the ranks always read their environment */
    case F_NO_PREFIX: la->prefix = 0; return 1;
    case F_OVERSUBSCRIBE: la->oversubscribe = 1; return 1;
    case F_REFUSED:
        fprintf(stderr, "mtrain launch: error: torchrun's %s is not supported: the ranks always run this mtrain; "
                        "write `mtrain launch [FLAGS] -- ARGS` with ARGS mtrain's own arguments\n", f->name);
        return 0;
    }
    return 0;
}

/* Parses the launcher's flags into *la; *first = the index of the ranks' ARGS. Returns 0 to go on,
 * else the exit code (2 after an error message, 0 after --help). Rule: with a `--`, everything
 * before it is a launcher flag (an unknown one is an error listing the known ones); without, the
 * first argument that is not a launcher flag starts ARGS (mtrain's own, e.g. --config), except a
 * near miss of a launcher flag (--nnode 2), which is an error too. */
static int parse_launch_args(int argc, char **argv, launch_args *la, int *first) {
    int dashdash = -1;
    for (int k = 0; k < argc; k++)
        if (!strcmp(argv[k], "--")) {
            dashdash = k;
            break;
        }
    int i = 0;
    while (i < argc) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            launch_usage(stdout);
            *first = -1; /* done: nothing to run */
            return 0;
        }
        const flag_def *f = NULL;
        const char *v = NULL;
        for (int k = 0; k < N_FLAGS && !f; k++)
            if (flag_matches(a, k_flags[k].name, &v) || flag_matches(a, k_flags[k].alias, &v)) f = &k_flags[k];
        if (!f) {
            if (a[0] == '-' && (dashdash > i || looks_like_launcher_flag(a))) {
                fprintf(stderr, "mtrain launch: error: unknown launcher flag '%s'; known: %s. mtrain's own arguments "
                                "go after `--`\n", a, k_known);
                return 2;
            }
            break; /* the first argument the launcher does not know starts the rank's ARGS */
        }
        int n_used = 1;
        if (f->takes_value && !v) {
            if (i + 1 >= argc || (dashdash >= 0 && i + 1 >= dashdash)) {
                fprintf(stderr, "mtrain launch: error: %s needs a value%s\n", a,
                        f->id == F_MAX_RESTARTS ? ": the number of restarts, 0 or more" : "");
                return 2;
            }
            v = argv[i + 1];
            n_used = 2;
        } else if (!f->takes_value && v) {
            fprintf(stderr, "mtrain launch: error: %s takes no value\n", a);
            return 2;
        }
        char shown[512];
        snprintf(shown, sizeof shown, "%.*s", (int)(v && n_used == 1 ? (size_t)(v - 1 - a) : strlen(a)), a);
        if (!take_flag(la, f, shown, v)) return 2;
        i += n_used;
    }
    *first = i;
    return 0;
}

/* the node layout once every flag is in: the checks that need several flags */
static int check_nodes(launch_args *la) {
    if (la->nnodes == 0) la->nnodes = 1;
    if (la->standalone && la->nnodes > 1) {
        fprintf(stderr, "mtrain launch: error: --standalone is a single-node job but --nnodes is %d: drop one\n",
                la->nnodes);
        return 2;
    }
    if (la->node_rank >= la->nnodes) {
        fprintf(stderr, "mtrain launch: error: --node-rank %d: expected 0..%d (--nnodes %d): each node gets its own "
                        "rank, node 0 being the one at --master-addr\n", la->node_rank, la->nnodes - 1, la->nnodes);
        return 2;
    }
    if (la->rdzv_endpoint[0]) {
        char addr[256];
        int port;
        if (!parse_endpoint("--rdzv-endpoint", la->rdzv_endpoint, addr, sizeof addr, &port)) return 2;
        if ((la->have_addr && strcmp(addr, la->master_addr)) || (la->have_port && port != la->master_port)) {
            fprintf(stderr, "mtrain launch: error: --rdzv-endpoint %s and --master-addr %s --master-port %d disagree: "
                            "they name the same thing here (global rank 0's store); give one\n",
                    la->rdzv_endpoint, la->have_addr ? la->master_addr : MT_LAUNCH_DEFAULT_ADDR,
                    la->have_port ? la->master_port : MT_LAUNCH_DEFAULT_PORT);
            return 2;
        }
        snprintf(la->master_addr, sizeof la->master_addr, "%s", addr);
        la->master_port = port;
        la->have_addr = la->have_port = 1;
    }
    if (la->nnodes > 1 && !la->have_node_rank && la->rdzv_backend && !strcmp(la->rdzv_backend, "c10d")) {
        fprintf(stderr, "mtrain launch: error: --rdzv-backend c10d with --nnodes %d: mtrain launch does not assign "
                        "node ranks at the rendezvous: give each node its --node-rank (0..%d)\n",
                la->nnodes, la->nnodes - 1);
        return 2;
    }
    if (!la->have_addr) snprintf(la->master_addr, sizeof la->master_addr, "%s", MT_LAUNCH_DEFAULT_ADDR);
    if (!la->have_port) la->master_port = MT_LAUNCH_DEFAULT_PORT;
    return 0;
}

int mt_cmd_launch(int argc, char **argv) {
    launch_args la = {.prefix = 1};
    int i = 0, rc = parse_launch_args(argc, argv, &la, &i);
    if (rc != 0 || i < 0) return rc;
    if (la.n == 0) {
        fprintf(stderr, "mtrain launch: error: -n N (--nproc-per-node N, the number of ranks on this node) is "
                        "required\n");
        launch_usage(stderr);
        return 2;
    }
    if ((rc = check_nodes(&la)) != 0) return rc;
    if (i >= argc) {
        fprintf(stderr, "mtrain launch: error: nothing to run after the launcher's options\n");
        launch_usage(stderr);
        return 2;
    }
    if (check_oversubscription(la.n, la.oversubscribe) != 0) return 2;
    char **child_argv = calloc((size_t)(argc - i + 2), sizeof *child_argv);
    if (!child_argv) {
        fprintf(stderr, "mtrain launch: error: out of memory\n");
        return 1;
    }
    child_argv[0] = "mtrain";
    for (int k = i; k < argc; k++) child_argv[k - i + 1] = argv[k];
    mt_launch_opts o = {.n_ranks = la.n, .argv = child_argv, .exe = NULL, .prefix = la.prefix, .kill_grace_s = 5,
                        .max_restarts = la.max_restarts, .n_nodes = la.nnodes, .node_rank = la.node_rank,
                        .master_addr = la.master_addr, .master_port = la.master_port, .run_id = la.rdzv_id,
                        .role = la.role};
    if (la.nnodes > 1)
        fprintf(stderr, "mtrain launch: node %d of %d: ranks %d..%d of %d, env:// rendezvous at %s:%d\n", la.node_rank,
                la.nnodes, la.node_rank * la.n, la.node_rank * la.n + la.n - 1, la.nnodes * la.n, la.master_addr,
                la.master_port);
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
        return st == MT_ERR_PEER ? MT_EXIT_PEER : 1; /* as the training ranks (cmd_ranks.c) */
    }
    bs.finalize(&bs);
    return 0;
}
