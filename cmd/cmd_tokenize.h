/* cmd_tokenize.h — `mtrain tokenize`: text lines in, token ids out (one line per line), and
 * back with --decode. Rule kept: returns the process exit code (0 ok, 1 failed, 2 bad
 * usage); cmd/mtrain.c decides to exit. */
#ifndef MT_CMD_TOKENIZE_H
#define MT_CMD_TOKENIZE_H

/* argv[0 .. argc) are the flags after `mtrain tokenize` (call as
 * mt_cmd_tokenize(argc - 2, argv + 2)); a leading program name and/or "tokenize" word is
 * skipped. */
int mt_cmd_tokenize(int argc, char **argv);

#endif
