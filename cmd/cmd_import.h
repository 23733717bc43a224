/* cmd_import.h — `mtrain import` (cmd_import.c). Returns the process exit code; cmd/mtrain.c exits. */
#ifndef MT_CMD_IMPORT_H
#define MT_CMD_IMPORT_H

int mt_cmd_import(int argc, char **argv);

#endif
