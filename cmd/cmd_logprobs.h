/* cmd_logprobs.h — `mtrain logprobs` (cmd_logprobs.c). Returns the process exit code; cmd/mtrain.c exits. */
#ifndef MT_CMD_LOGPROBS_H
#define MT_CMD_LOGPROBS_H

int mt_cmd_logprobs(int argc, char **argv);

#endif
