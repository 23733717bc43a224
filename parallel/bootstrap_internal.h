/* bootstrap_internal.h — what bootstrap.c (detection, single rank) shares with the two
 * launcher-specific implementations, bootstrap_pmix.c and bootstrap_env.c. Not a public
 * interface: everything outside parallel/bootstrap*.c uses parallel/bootstrap.h. */
#ifndef MT_BOOTSTRAP_INTERNAL_H
#define MT_BOOTSTRAP_INTERNAL_H

#include "parallel/bootstrap.h"

#include <stddef.h>
#include <stdint.h>

/* seconds used when mt_bootstrap_init is given timeout_s <= 0 */
#define MT_BOOTSTRAP_DEFAULT_TIMEOUT_S 300

/* PMIx client. Returns MT_OK and fills bs, or MT_ERR_UNSUPPORTED when PMIx_Init answers
 * PMIX_ERR_UNREACH (no PMIx server: the caller falls through to env:// / single), or
 * MT_ERR_PMIX with a message naming the PMIx call and its status string. */
mt_status mt_bootstrap_pmix_init(mt_bootstrap *bs, int timeout_s);

/* env:// (RANK, WORLD_SIZE, ...; see bootstrap_env.c). */
mt_status mt_bootstrap_env_init(mt_bootstrap *bs, int timeout_s);

/* Parses an environment variable as a decimal integer in [lo, hi]. Returns MT_OK with *out,
 * or MT_ERR_CONFIG "NAME=VALUE is not <what>" when it is set but malformed, or
 * MT_ERR_CONFIG "NAME is not set (...)" when unset and required. */
mt_status mt_bootstrap_env_int(const char *name, long lo, long hi, const char *what, int required, long *out,
                               int *was_set);

/* The env:// store's job secret (see bootstrap_secret.c for where it comes from): at most
 * MT_STORE_SECRET_MAX bytes into key, and a few words naming its source ("MT_STORE_SECRET",
 * "MT_STORE_SECRET_FILE=PATH", "~/.mtrain/store_secret" as a path) for messages. */
#define MT_STORE_SECRET_MAX 4096
mt_status mt_bootstrap_store_secret(uint8_t *key, size_t *n_key, char *source, size_t n_source);

#endif
