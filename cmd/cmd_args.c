/* cmd_args.c — see cmd_args.h. */
#include "cmd/cmd_args.h"

#include <stdio.h>
#include <string.h>

#include "core/status.h"

const char *mt_flag_value(int argc, char **argv, int *i, const char *name, int *missing) {
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n) != 0) return NULL;
    if (a[n] == '=') return a + n + 1;
    if (a[n] != 0) return NULL;
    if (*i + 1 >= argc) {
        *missing = 1;
        return NULL;
    }
    return argv[++*i];
}

int mt_cmd_fail(const char *tool) {
    fprintf(stderr, "%s: error: %s\n", tool, mt_last_error());
    return 1;
}

int mt_cmd_first_flag(int argc, char **argv, const char *name) {
    int i = 0;
    if (i < argc && argv[i][0] != '-' && strcmp(argv[i], name) != 0) i++;
    if (i < argc && strcmp(argv[i], name) == 0) i++;
    return i;
}
