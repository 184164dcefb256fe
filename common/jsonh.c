/* SPDX-License-Identifier: Apache-2.0 */
/* jsonh.c - strict typed access to JSON objects (over jansson). */
#include "dlaunch/jsonh.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dlaunch/error.h"
#include "dlaunch/parse.h"

int jsonh_depth(const char *data, size_t len, int limit)
{
	int depth = 0, deepest = 0, in_str = 0;
	for (size_t i = 0; i < len; i++) {
		char c = data[i];
		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = 0;
			continue;
		}
		if (c == '"') {
			in_str = 1;
		} else if (c == '{' || c == '[') {
			if (++depth > deepest) {
				deepest = depth;
				if (deepest > limit)
					return deepest;
			}
		} else if (c == '}' || c == ']') {
			depth--;
		}
	}
	return deepest;
}

int jsonh_parse(const char *data, size_t len, int max_depth, json_t **out,
		char *err, size_t err_size)
{
	json_error_t jerr;
	json_t *v;

	if (jsonh_depth(data, len, max_depth) > max_depth)
		return dl_errorf(err, err_size, DL_ELIMIT,
				 "json nested deeper than %d levels",
				 max_depth);
	v = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!v)
		return dl_errorf(err, err_size, DL_EINVAL,
				 "malformed json at line %d column %d: %s",
				 jerr.line, jerr.column, jerr.text);
	if (!json_is_object(v)) {
		json_decref(v);
		return dl_errorf(err, err_size, DL_EINVAL,
				 "json body must be an object");
	}
	*out = v;
	return 0;
}

static json_t *field(json_t *obj, const char *key, int required, int *rc,
		     char *err, size_t err_size)
{
	json_t *v = json_object_get(obj, key);
	*rc = 0;
	if (!v || json_is_null(v)) {
		if (required)
			*rc = dl_errorf(err, err_size, DL_EINVAL,
					"missing field '%s'", key);
		return NULL;
	}
	return v;
}

int jsonh_get_str(json_t *obj, const char *key, int required, size_t max_len,
		  const char **out, char *err, size_t err_size)
{
	int rc;
	json_t *v = field(obj, key, required, &rc, err, err_size);
	if (!v)
		return rc;
	if (!json_is_string(v))
		return dl_errorf(err, err_size, DL_EINVAL,
				 "field '%s' must be a string", key);
	if (json_string_length(v) > max_len)
		return dl_errorf(err, err_size, DL_ELIMIT,
				 "field '%s' is longer than %zu bytes", key,
				 max_len);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return dl_errorf(err, err_size, DL_EINVAL,
				 "field '%s' contains a NUL byte", key);
	*out = json_string_value(v);
	return 0;
}

int jsonh_get_u64(json_t *obj, const char *key, int required, uint64_t min,
		  uint64_t max, uint64_t *out, char *err, size_t err_size)
{
	int rc;
	json_int_t i;
	json_t *v = field(obj, key, required, &rc, err, err_size);
	if (!v)
		return rc;
	if (!json_is_integer(v))
		return dl_errorf(err, err_size, DL_EINVAL,
				 "field '%s' must be an integer", key);
	i = json_integer_value(v);
	if (i < 0 || (uint64_t)i < min || (uint64_t)i > max)
		return dl_errorf(err, err_size, DL_ERANGE,
				 "field '%s' must be between %llu and %llu",
				 key, (unsigned long long)min,
				 (unsigned long long)max);
	*out = (uint64_t)i;
	return 0;
}

int jsonh_get_bool(json_t *obj, const char *key, int required, int *out,
		   char *err, size_t err_size)
{
	int rc;
	json_t *v = field(obj, key, required, &rc, err, err_size);
	if (!v)
		return rc;
	if (!json_is_boolean(v))
		return dl_errorf(err, err_size, DL_EINVAL,
				 "field '%s' must be true or false", key);
	*out = json_is_true(v);
	return 0;
}

int jsonh_get_duration_ms(json_t *obj, const char *key, int required,
			  uint64_t min_ms, uint64_t max_ms, uint64_t *out,
			  char *err, size_t err_size)
{
	int rc;
	double secs, ms;
	uint64_t parsed;
	json_t *v = field(obj, key, required, &rc, err, err_size);
	if (!v)
		return rc;
	if (json_is_string(v)) {
		rc = parse_duration_ms(json_string_value(v), 1000, min_ms,
				       max_ms, &parsed);
		if (rc)
			return dl_errorf(
			    err, err_size, rc,
			    "field '%s' must be a duration between "
			    "%llums and %llums",
			    key, (unsigned long long)min_ms,
			    (unsigned long long)max_ms);
		*out = parsed;
		return 0;
	}
	if (!json_is_number(v))
		return dl_errorf(err, err_size, DL_EINVAL,
				 "field '%s' must be a number of seconds", key);
	secs = json_number_value(v);
	ms = nearbyint(secs * 1000.0);
	if (!isfinite(ms) || ms < (double)min_ms || ms > (double)max_ms)
		return dl_errorf(err, err_size, DL_ERANGE,
				 "field '%s' must be between %llums and %llums",
				 key, (unsigned long long)min_ms,
				 (unsigned long long)max_ms);
	*out = (uint64_t)ms;
	return 0;
}

static int dump_cb(const char *chunk, size_t size, void *data)
{
	return buf_append(data, chunk, size) == 0 ? 0 : -1;
}

int jsonh_dump(json_t *v, struct buf *b)
{
	size_t before = b->len;
	if (json_dump_callback(v, dump_cb, b, JSON_COMPACT) != 0) {
		b->len = before;
		if (b->data)
			b->data[before] = '\0';
		return DL_ELIMIT;
	}
	return 0;
}
