/* cpu_threads.c — can this process start the OpenMP team it is asked for? libgomp ends the
 * process with only "Thread creation failed" when the system refuses a thread (an address-space
 * limit, ulimit -v, against each thread's stack; a process limit, ulimit -u or the cgroup's
 * pids.max). Before the first parallel region the CPU backend starts the same number of threads,
 * with the stack size libgomp would give them, all alive at once, and turns a refusal into an
 * error naming training.threads and the count that could be started. */
#include "core/cpu/cpu_backend.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t go;
    int released;
} probe_gate;

static void *probe_wait(void *arg) {
    probe_gate *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->released) pthread_cond_wait(&g->go, &g->mu);
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

/* OMP_STACKSIZE (or GOMP_STACKSIZE) as libgomp reads it: a number with an optional B/K/M/G
 * suffix, kilobytes when none; 0 when unset or unreadable (the system's default stack then) */
static size_t omp_stack_bytes(void) {
    const char *s = getenv("OMP_STACKSIZE");
    if (!s) s = getenv("GOMP_STACKSIZE");
    if (!s) return 0;
    char *end;
    errno = 0;
    const unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s) return 0;
    while (isspace((unsigned char)*end)) end++;
    const int unit = toupper((unsigned char)*end);
    const unsigned long long mul = unit == 'B' ? 1 : unit == 'M' ? 1ull << 20 : unit == 'G' ? 1ull << 30 : 1ull << 10;
    return (size_t)(v * mul);
}

mt_status mt_cpu_threads_probe(int n_threads, int n_cpus) {
    if (n_threads <= 1) return MT_OK;
    pthread_t *tids = calloc((size_t)n_threads, sizeof *tids);
    if (!tids) return mt_errorf(MT_ERR_OOM, "cpu backend: cannot allocate the thread probe for %d threads", n_threads);
    probe_gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    const size_t stack = omp_stack_bytes();
    if (stack) pthread_attr_setstacksize(&attr, stack);
    int started = 0, err = 0;
    for (; started < n_threads - 1; started++) /* the calling thread is the team's first */
        if ((err = pthread_create(&tids[started], &attr, probe_wait, &g)) != 0) break;
    pthread_attr_destroy(&attr);
    pthread_mutex_lock(&g.mu);
    g.released = 1;
    pthread_cond_broadcast(&g.go);
    pthread_mutex_unlock(&g.mu);
    for (int k = 0; k < started; k++) pthread_join(tids[k], NULL);
    free(tids);
    if (!err) return MT_OK;
    return mt_errorf(MT_ERR_CONFIG,
                     "training.threads (--threads) = %d: this process could start only %d thread%s (pthread_create: "
                     "%s; a limit on address space, ulimit -v, against each thread's stack, or on processes, "
                     "ulimit -u or the cgroup's pids.max); use --threads %d or fewer (this process may run on %d "
                     "CPU%s; 0 or auto uses them all)",
                     n_threads, started + 1, started ? "s" : "", strerror(err), started + 1, n_cpus,
                     n_cpus == 1 ? "" : "s");
}
