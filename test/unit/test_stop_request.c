/* test_stop_request.c — the stop-request handlers (train/stop_request.h), each case in a forked
 * child so a signal's default action can be observed:
 *   - installed but not armed (a run still loading or starting): one SIGTERM ends the process
 *     (killed by SIGTERM), as timeout(1) expects — it used to be recorded and never read;
 *   - armed (the training loop runs): SIGTERM is recorded, the process lives; the same signal
 *     again at once (a launcher's forwarded copy) counts once; SIGUSR1 likewise;
 *   - restore: the default action again. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test/test.h"
#include "train/stop_request.h"

/* runs body() in a child; returns its wait status */
static int in_child(int (*body)(void)) {
    pid_t p = fork();
    if (p == 0) _exit(body());
    int ws = 0;
    waitpid(p, &ws, 0);
    return ws;
}

static int unarmed_term(void) {
    mt_stop_request_install();
    raise(SIGTERM);
    return 3; /* not reached when SIGTERM ends the process */
}

static int armed_term(void) {
    mt_stop_request_install();
    mt_stop_request_arm();
    raise(SIGTERM);
    raise(SIGTERM); /* a copy at once: the same request */
    return mt_stop_request_signal() == SIGTERM ? 0 : 4;
}

static int armed_usr1(void) {
    mt_stop_request_install();
    mt_stop_request_arm();
    raise(SIGUSR1);
    return mt_stop_request_signal() == SIGUSR1 ? 0 : 5;
}

static int restored_term(void) {
    mt_stop_request_install();
    mt_stop_request_arm();
    mt_stop_request_restore();
    raise(SIGTERM);
    return 6;
}

int main(void) {
    int ws = in_child(unarmed_term);
    CHECKF(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGTERM, "not armed: SIGTERM did not end the process (status %#x)", ws);
    ws = in_child(armed_term);
    CHECKF(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "armed: SIGTERM twice at once (status %#x)", ws);
    ws = in_child(armed_usr1);
    CHECKF(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "armed: SIGUSR1 (status %#x)", ws);
    ws = in_child(restored_term);
    CHECKF(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGTERM, "restored: SIGTERM did not end the process (status %#x)", ws);
    TEST_MAIN_END();
}
