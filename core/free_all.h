/* free_all.h — MT_FREE_ALL(p, q, ...): free() each of a list of pointers (any may be NULL), for
 * the release functions of structures that own many separately allocated buffers. The pointers
 * are read before the first free(), so a list may end with the structure that held them. */
#ifndef MT_FREE_ALL_H
#define MT_FREE_ALL_H

#include <stdlib.h>

static inline void mt_free_all_(void *const *p, size_t n) {
    for (size_t i = 0; i < n; i++) free(p[i]);
}

#define MT_FREE_ALL(...) \
    mt_free_all_((void *const[]){__VA_ARGS__}, sizeof((void *const[]){__VA_ARGS__}) / sizeof(void *))

#endif
