/* cmd_checkpoint.h — `mtrain checkpoint inspect DIR [--iteration N]`. */
#ifndef MT_CMD_CHECKPOINT_H
#define MT_CMD_CHECKPOINT_H

int mt_cmd_checkpoint(int argc, char **argv);

#endif
