/* cmd_preprocess.h — `mtrain preprocess`: JSON lines -> Megatron indexed dataset.
 * Rule kept: returns the process exit code (0 ok, 1 failed, 2 bad usage); cmd/mtrain.c
 * decides to exit. */
#ifndef MT_CMD_PREPROCESS_H
#define MT_CMD_PREPROCESS_H

/* argv[0 .. argc) are the flags after `mtrain preprocess` (call as
 * mt_cmd_preprocess(argc - 2, argv + 2)); a leading program name and/or "preprocess" word
 * is skipped, so (argc - 1, argv + 1) and (argc, argv) work too. */
int mt_cmd_preprocess(int argc, char **argv);

#endif
