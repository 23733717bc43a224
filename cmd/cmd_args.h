/* cmd_args.h — helpers every command uses: the "--flag value" / "--flag=value" reader of the
 * argument loops, and the one-line error exit. Nothing here exits: the commands return codes. */
#ifndef MT_CMD_ARGS_H
#define MT_CMD_ARGS_H

/* Value of argv[*i] when it is "NAME value" (then *i moves onto the value) or "NAME=value";
 * NULL when argv[*i] is another flag. "NAME" as the last word: NULL and *missing = 1. */
const char *mt_flag_value(int argc, char **argv, int *i, const char *name, int *missing);

/* Where a command's flags start: argv normally holds just the flags (cmd/mtrain.c passes argv + 2);
 * a leading program name and/or the command's word `name` (words before the first flag) are
 * skipped. */
int mt_cmd_first_flag(int argc, char **argv, const char *name);

/* Prints "TOOL: error: <mt_last_error()>" on stderr; returns exit code 1. */
int mt_cmd_fail(const char *tool);

#endif
