/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kv.c - a job's key-value store: a sorted array searched by bisection.
 * At most a few thousand keys per job, so the array never grows large and
 * iteration in key order (for snapshots) comes for free.
 */
#include "kv.h"

#include <stdlib.h>
#include <string.h>

#include "dlaunch/error.h"

struct kv_entry {
	char *key;
	unsigned char *data;
	size_t len;
};

struct rdzv_kv {
	struct kv_entry *entries;
	size_t n, cap;
};

struct rdzv_kv *rdzv_kv_new(void)
{
	return calloc(1, sizeof(struct rdzv_kv));
}

void rdzv_kv_free(struct rdzv_kv *kv)
{
	if (!kv)
		return;
	for (size_t i = 0; i < kv->n; i++) {
		free(kv->entries[i].key);
		free(kv->entries[i].data);
	}
	free(kv->entries);
	free(kv);
}

/* find returns the index of key, or where it would be inserted with
 * *found = 0. */
static size_t find(const struct rdzv_kv *kv, const char *key, int *found)
{
	size_t lo = 0, hi = kv->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(kv->entries[mid].key, key);
		if (c == 0) {
			*found = 1;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = 0;
	return lo;
}

int rdzv_kv_set(struct rdzv_kv *kv, const char *key, const void *data,
		size_t len, size_t max_keys)
{
	int found;
	size_t at = find(kv, key, &found);
	/* malloc(0) may return NULL: always allocate at least one byte */
	unsigned char *copy = malloc(len ? len : 1);
	char *kcopy;

	if (!copy)
		return DL_ENOMEM;
	if (len)
		memcpy(copy, data, len);
	if (found) {
		free(kv->entries[at].data);
		kv->entries[at].data = copy;
		kv->entries[at].len = len;
		return 0;
	}
	if (kv->n >= max_keys) {
		free(copy);
		return DL_ELIMIT;
	}
	if (kv->n == kv->cap) {
		size_t cap = kv->cap ? kv->cap * 2 : 8;
		struct kv_entry *e = realloc(kv->entries, cap * sizeof(*e));
		if (!e) {
			free(copy);
			return DL_ENOMEM;
		}
		kv->entries = e;
		kv->cap = cap;
	}
	kcopy = strdup(key);
	if (!kcopy) {
		free(copy);
		return DL_ENOMEM;
	}
	memmove(&kv->entries[at + 1], &kv->entries[at],
		(kv->n - at) * sizeof(kv->entries[0]));
	kv->entries[at].key = kcopy;
	kv->entries[at].data = copy;
	kv->entries[at].len = len;
	kv->n++;
	return 0;
}

int rdzv_kv_lookup(const struct rdzv_kv *kv, const char *key, const void **data,
		   size_t *len)
{
	int found;
	size_t at = find(kv, key, &found);
	if (!found)
		return DL_ENOTFOUND;
	*data = kv->entries[at].data;
	*len = kv->entries[at].len;
	return 0;
}

size_t rdzv_kv_count(const struct rdzv_kv *kv)
{
	return kv->n;
}

int rdzv_kv_foreach(const struct rdzv_kv *kv,
		    int (*fn)(void *ctx, const char *key, const void *data,
			      size_t len),
		    void *ctx)
{
	for (size_t i = 0; i < kv->n; i++) {
		int rc = fn(ctx, kv->entries[i].key, kv->entries[i].data,
			    kv->entries[i].len);
		if (rc)
			return rc;
	}
	return 0;
}
