/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jsonh.h - strict typed access to JSON objects (over jansson).
 *
 * Requests are parsed with limits (size, nesting depth) and read field by
 * field with exact types: a string where a number belongs, a negative count
 * or an unknown type is an error with a message naming the field, written
 * into err (err_size bytes, may be 0).
 */
#ifndef DLAUNCH_JSONH_H
#define DLAUNCH_JSONH_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/*
 * jsonh_parse parses len bytes as one JSON value that must be an object,
 * refusing input nested deeper than max_depth. On success *out is a new
 * reference the caller must json_decref. Returns 0, DL_EINVAL or DL_ELIMIT.
 */
int jsonh_parse(const char *data, size_t len, int max_depth, json_t **out,
		char *err, size_t err_size);

/* jsonh_depth returns the deepest nesting of arrays/objects in data,
 * scanning bytes only (strings are skipped); stops counting past limit. */
int jsonh_depth(const char *data, size_t len, int limit);

/*
 * Typed getters. When the key is absent: required → DL_EINVAL, otherwise
 * *out is left as it is and 0 returned (so callers preset defaults).
 * Strings are borrowed from obj and must be at most max_len bytes and
 * valid for the caller's own charset checks.
 */
int jsonh_get_str(json_t *obj, const char *key, int required, size_t max_len,
		  const char **out, char *err, size_t err_size);
int jsonh_get_u64(json_t *obj, const char *key, int required, uint64_t min,
		  uint64_t max, uint64_t *out, char *err, size_t err_size);
int jsonh_get_bool(json_t *obj, const char *key, int required, int *out,
		   char *err, size_t err_size);
/* jsonh_get_duration_ms accepts a number of seconds (fractions allowed) or
 * a string such as "500ms" or "30s". */
int jsonh_get_duration_ms(json_t *obj, const char *key, int required,
			  uint64_t min_ms, uint64_t max_ms, uint64_t *out,
			  char *err, size_t err_size);

/* jsonh_dump appends the compact encoding of v to b; 0 or a DL_E* code. */
int jsonh_dump(json_t *v, struct buf *b);

#endif
