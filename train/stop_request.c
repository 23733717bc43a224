/* stop_request.c — the stop-request signal handlers of stop_request.h. */
#include "train/stop_request.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t pending;
static int installed;
static const int sigs[3] = {SIGTERM, SIGUSR1, SIGUSR2};
static struct sigaction saved[3];

static void on_stop_signal(int sig) {
    if (pending == sig) { /* the second one: the default action (terminate) */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
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

void mt_stop_request_restore(void) {
    if (!installed) return;
    for (int i = 0; i < 3; i++) sigaction(sigs[i], &saved[i], NULL);
    installed = 0;
}

int mt_stop_request_signal(void) { return (int)pending; }
