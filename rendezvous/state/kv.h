/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kv.h - a job's small key-value store (private to rendezvous/state/).
 *
 * Keys are validated names; values are opaque bytes copied in. The store
 * enforces a key count; the caller enforces the value size.
 */
#ifndef DLAUNCH_RDZV_KV_H
#define DLAUNCH_RDZV_KV_H

#include <stddef.h>

struct rdzv_kv;

struct rdzv_kv *rdzv_kv_new(void);
void rdzv_kv_free(struct rdzv_kv *kv); /* NULL is allowed */

/* rdzv_kv_set copies key and value; replacing a key never counts against
 * max_keys. Returns 0, DL_ELIMIT (a new key past max_keys) or DL_ENOMEM. */
int rdzv_kv_set(struct rdzv_kv *kv, const char *key, const void *data,
		size_t len, size_t max_keys);
/* rdzv_kv_lookup borrows the value; DL_ENOTFOUND when absent. */
int rdzv_kv_lookup(const struct rdzv_kv *kv, const char *key, const void **data,
		   size_t *len);
size_t rdzv_kv_count(const struct rdzv_kv *kv);
/* rdzv_kv_foreach calls fn in key order until it returns non-zero, which
 * is then returned. */
int rdzv_kv_foreach(const struct rdzv_kv *kv,
		    int (*fn)(void *ctx, const char *key, const void *data,
			      size_t len),
		    void *ctx);

#endif
