/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jsonflat.h - an allocation-free reader of flat JSON objects, for request
 * paths too hot for a general parser (the rendezvous heartbeat).
 *
 * It reads only the plainest documents: one object whose members are
 * strings of printable ASCII without escapes, or non-negative integers of
 * at most 18 digits, with distinct keys, JSON whitespace anywhere between
 * tokens. Every such document is valid JSON that jansson (with
 * JSON_REJECT_DUPLICATES) reads to the same keys and values; anything
 * else, valid or not, is refused, and the caller reads it with jansson
 * (jsonh_parse), which gives the errors. A refusal is never an error by
 * itself.
 */
#ifndef DLAUNCH_JSONFLAT_H
#define DLAUNCH_JSONFLAT_H

#include <stddef.h>
#include <stdint.h>

/* members beyond this many are refused (the caller falls back) */
#define JSONFLAT_MAX_FIELDS 16

enum jsonflat_type {
	JSONFLAT_STRING,
	JSONFLAT_INTEGER,
};

/* One member. key and str point into the document (not NUL-terminated). */
struct jsonflat_field {
	const char *key;
	size_t key_len;
	enum jsonflat_type type;
	const char *str; /* JSONFLAT_STRING */
	size_t str_len;
	uint64_t num; /* JSONFLAT_INTEGER: at most 10^18 - 1 */
};

struct jsonflat {
	struct jsonflat_field fields[JSONFLAT_MAX_FIELDS];
	size_t count;
};

/* jsonflat_read reads the len bytes at data into out (which borrows from
 * data). Returns 0, or -1 when the document is not one of those described
 * above (out is then undefined). */
int jsonflat_read(const char *data, size_t len, struct jsonflat *out);

/* jsonflat_get returns the member named key, or NULL. */
const struct jsonflat_field *jsonflat_get(const struct jsonflat *obj,
					  const char *key);

/* jsonflat_copy_str copies string member f into out (out_size bytes,
 * NUL-terminated). Returns 0, or -1 when f is missing, not a string or
 * does not fit. */
int jsonflat_copy_str(const struct jsonflat_field *f, char *out,
		      size_t out_size);

#endif
