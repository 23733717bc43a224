/* cmd_generate.h — `mtrain generate`: text from a checkpoint (train/generate.h). */
#ifndef MT_CMD_GENERATE_H
#define MT_CMD_GENERATE_H

int mt_cmd_generate(int argc, char **argv);

#endif
