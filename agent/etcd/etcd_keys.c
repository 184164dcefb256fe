/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_keys.c - the key layout of a job in etcd (etcd_keys.h): every
 * key of a job is built, and a node id read back out of one, here.
 */
#include "etcd_keys.h"

#include <stdio.h>
#include <string.h>

int etcd_job_prefix(char *out, size_t size, const char *key_prefix,
		    const char *job)
{
	return snprintf(out, size, "%s/%s", key_prefix, job);
}

int etcd_key(char *out, size_t size, const char *prefix, const char *what,
	     const char *id)
{
	return snprintf(out, size, "%s%s%s", prefix, what, id ? id : "");
}

const char *etcd_key_id(const char *key, size_t key_len, const char *prefix,
			const char *what, char *out, size_t size)
{
	size_t plen = strlen(prefix), wlen = strlen(what);
	if (key_len <= plen + wlen || key_len - plen - wlen >= size ||
	    memcmp(key, prefix, plen) != 0 ||
	    memcmp(key + plen, what, wlen) != 0)
		return NULL;
	memcpy(out, key + plen + wlen, key_len - plen - wlen);
	out[key_len - plen - wlen] = '\0';
	return out;
}
