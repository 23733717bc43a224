/* stop_request.h — a clean stop asked from outside the loop: SIGTERM, SIGUSR1 or SIGUSR2 (what
 * Slurm sends before preemption with --signal, what `mtrain launch` forwards), when
 * checkpoint.exit_signal_handler is on. The handler only records the signal; the training loop
 * reads it at the end of each iteration, the ranks agree on it collectively, save and exit 0.
 * The same signal again, some seconds after the first, takes the default action, so a stuck job can
 * still be killed; copies that arrive together (a signal to the process group that the launcher
 * also passes on) count once (stop_request.c). Rule: async-signal-safe handler, one flag. */
#ifndef MT_STOP_REQUEST_H
#define MT_STOP_REQUEST_H

/* Installs the handlers (idempotent); mt_stop_request_restore puts the previous ones back. */
void mt_stop_request_install(void);
void mt_stop_request_restore(void);
/* From here on the training loop reads the request at each iteration's end; before it, a stop
 * signal ends the process at once (the default action): nothing would read it. */
void mt_stop_request_arm(void);
/* The signal received (0 = none). */
int mt_stop_request_signal(void);

#endif
