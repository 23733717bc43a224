/* cmd_plan.h — `mtrain plan`: memory, FLOPs, bubble, communication and days of a recipe's
 * layout, or --search for the best layout on N GPUs (plan/plan.h does the arithmetic).
 * Rule kept: returns the process exit code (0 fits, 1 error or inconsistent layout, 2 bad
 * usage, 3 does not fit); cmd/mtrain.c decides to exit. */
#ifndef MT_CMD_PLAN_H
#define MT_CMD_PLAN_H

/* argv[0 .. argc) are the arguments after `mtrain plan`. */
int mt_cmd_plan(int argc, char **argv);

#endif
