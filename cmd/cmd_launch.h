/* cmd_launch.h — `mtrain launch` (the local torchrun-style launcher, parallel/launch.h) and
 * `mtrain bootstrap-check` (a diagnostic: bootstrap every rank, allgather who is who, check it).
 * Rule kept: both return the process exit code; cmd/mtrain.c decides to exit (the launcher
 * itself _exits on a rank failure, see parallel/launch.h). */
#ifndef MT_CMD_LAUNCH_H
#define MT_CMD_LAUNCH_H

/* argv[0 .. argc) are the arguments after `mtrain launch` / `mtrain bootstrap-check`
 * (call as mt_cmd_launch(argc - 2, argv + 2)). */
int mt_cmd_launch(int argc, char **argv);
int mt_cmd_bootstrap_check(int argc, char **argv);

#endif
