/* cmd_export.h — `mtrain export` (cmd_export.c). Returns the process exit code; cmd/mtrain.c exits. */
#ifndef MT_CMD_EXPORT_H
#define MT_CMD_EXPORT_H

int mt_cmd_export(int argc, char **argv);

#endif
