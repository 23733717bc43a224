/* stop_request.c — the stop-request signal handlers of stop_request.h.
 * A repeat of the pending signal counts as the same request when it comes within
 * MT_STOP_REPEAT_MS of the first: one stop often arrives twice, e.g. a SIGTERM to the job's
 * process group (timeout(1), kill -- -PGID, a scheduler signalling every process of a step)
 * reaches each rank directly and again as forwarded by its launcher (`mtrain launch`, mpirun's
 * copy 1 s later, torchrun), and killing the rank on that copy would lose the save. Only a
 * repeat after the window restores the default action (a stuck job can still be killed).
 * Until the training loop arms it (mt_stop_request_arm), a stop signal takes its default action
 * at once: a run still loading a checkpoint or starting up has nothing to save and would not read
 * the request, so one SIGTERM (timeout(1)'s) must end it there. */
#include "train/stop_request.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define MT_STOP_REPEAT_MS 3000

static volatile sig_atomic_t pending;
static volatile sig_atomic_t armed; /* the training loop reads the request: before that, nobody would */
static _Atomic int64_t pending_since_ms; /* when `pending` was set (CLOCK_MONOTONIC) */
static int installed;
static const int sigs[3] = {SIGTERM, SIGUSR1, SIGUSR2};
static struct sigaction saved[3];

static int64_t now_ms(void) { /* clock_gettime is async-signal-safe */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_stop_signal(int sig) {
    const int64_t now = now_ms();
    if (!armed) { /* loading or starting: nothing to save, and nothing would read the request */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    if (pending == sig) {
        if (now - atomic_load(&pending_since_ms) < MT_STOP_REPEAT_MS) return; /* the same request again */
        signal(sig, SIG_DFL); /* a later one: the default action (terminate) */
        raise(sig);
        return;
    }
    atomic_store(&pending_since_ms, now);
    pending = sig;
}

void mt_stop_request_install(void) {
    if (installed) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (int i = 0; i < 3; i++) sigaction(sigs[i], &sa, &saved[i]);
    installed = 1;
}

void mt_stop_request_arm(void) { armed = 1; }

void mt_stop_request_restore(void) {
    armed = 0;
    if (!installed) return;
    for (int i = 0; i < 3; i++) sigaction(sigs[i], &saved[i], NULL);
    installed = 0;
}

int mt_stop_request_signal(void) { return (int)pending; }
