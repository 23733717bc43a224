/* data_path.c — diagnoses a data.path prefix that has no PREFIX.idx (see data_path.h): the
 * message names the path as written, says what it is, and proposes the prefix to write.
 * A .bin without .idx is left to mt_indexed_open (it may be mid-publish). */
#include "core/data/data_path.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static int is_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Up to 3 dataset prefixes in folder `dir` whose name starts with `start` ("" = any), as
 * "'dir/a', 'dir/b'" into out; the count found. */
static int find_datasets(const char *dir, const char *start, char *out, size_t n_out) {
    out[0] = 0;
    DIR *d = opendir(dir[0] ? dir : ".");
    if (!d) return 0;
    int found = 0;
    size_t at = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && found < 3) {
        const char *nm = e->d_name;
        size_t n = strlen(nm);
        if (n <= 4 || !ends_with(nm, ".idx") || strncmp(nm, start, strlen(start)) != 0) continue;
        int w = snprintf(out + at, n_out - at, "%s'%s%s%.*s'", found ? ", " : "", dir,
                         dir[0] && !ends_with(dir, "/") ? "/" : "", (int)(n - 4), nm);
        if (w < 0 || (size_t)w >= n_out - at) break;
        at += (size_t)w;
        found++;
    }
    closedir(d);
    return found;
}

mt_status mt_data_path_check(const char *prefix) {
    char idx[4200], bin[4200], dir[4200], hint[1024];
    snprintf(idx, sizeof idx, "%s.idx", prefix);
    snprintf(bin, sizeof bin, "%s.bin", prefix);
    if (is_file(idx)) return MT_OK;
    struct stat sb;
    if (stat(prefix, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        int n = find_datasets(prefix, "", hint, sizeof hint);
        return mt_errorf(MT_ERR_CONFIG, "data.path '%s' is a folder: data.path is a dataset "
                         "prefix, the path of a .bin/.idx pair without the extension (e.g. "
                         "'data/kjv_text_document')%s%s", prefix,
                         n ? "; in this folder: " : "; this folder holds no .idx file",
                         hint);
    }
    if (ends_with(prefix, ".bin") || ends_with(prefix, ".idx")) {
        size_t n = strlen(prefix) - 4;
        return mt_errorf(MT_ERR_CONFIG, "data.path '%s' names the %s file: data.path is the "
                         "prefix without extension, '%.*s'", prefix, prefix + n, (int)n, prefix);
    }
    /* The --output-prefix of mtrain preprocess instead of the dataset name it wrote? */
    char guess[4300];
    snprintf(guess, sizeof guess, "%s_text_document.idx", prefix);
    if (is_file(guess)) {
        return mt_errorf(MT_ERR_CONFIG, "data.path '%s': no %s, but %s is there: data.path is "
                         "the dataset name that mtrain preprocess wrote (--output-prefix + "
                         "_<key>_document): write '%s_text_document'", prefix, idx, guess,
                         prefix);
    }
    /* A .bin without its .idx may be a publish in progress: mt_indexed_open waits for it
     * (the rule in indexed.h) and names both files if the .idx never comes. */
    if (is_file(bin)) return MT_OK;
    const char *slash = strrchr(prefix, '/');
    const char *base = slash ? slash + 1 : prefix;
    if (slash) snprintf(dir, sizeof dir, "%.*s", (int)(slash - prefix + (slash == prefix)), prefix);
    else dir[0] = 0;
    if (slash && !(stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode))) {
        return mt_errorf(MT_ERR_IO, "data.path '%s': no folder %s (%s): data.path is the "
                         "prefix of a .bin/.idx pair made by mtrain preprocess, e.g. "
                         "'data/kjv_text_document'", prefix, dir, strerror(errno ? errno : ENOENT));
    }
    int n = find_datasets(dir, base, hint, sizeof hint);
    if (!n) n = find_datasets(dir, "", hint, sizeof hint);
    return mt_errorf(MT_ERR_IO, "data.path '%s': no dataset there (neither %s nor %s exists): "
                     "data.path is the prefix of a .bin/.idx pair made by mtrain preprocess%s%s",
                     prefix, idx, bin, n ? "; datasets in that folder: " : "", hint);
}
