/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jsonflat.c - the allocation-free reader of flat JSON objects
 * (dlaunch/jsonflat.h). It accepts a strict subset of what jansson
 * accepts, so that every document it reads means the same to both; it
 * refuses the rest without saying why (the caller's jansson path does).
 */
#include "dlaunch/jsonflat.h"

#include <string.h>

/* the longest integer read: 18 digits stay below 2^63 (jansson's
 * json_int_t), so no value can mean something else there */
#define MAX_DIGITS 18

struct cursor {
	const char *p, *end;
};

static void skip_ws(struct cursor *c)
{
	/* JSON's whitespace, exactly: no form feed, no vertical tab */
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' ||
				 *c->p == '\n' || *c->p == '\r'))
		c->p++;
}

/* read_string reads "..." of printable ASCII without escapes; c->p is at
 * the opening quote. */
static int read_string(struct cursor *c, const char **s, size_t *len)
{
	const char *start, *end;
	if (c->p >= c->end || *c->p != '"')
		return -1;
	start = ++c->p;
	end = memchr(start, '"', (size_t)(c->end - start));
	if (!end)
		return -1;
	for (const char *q = start; q < end; q++)
		if ((unsigned char)(*q - 0x20) > 0x7e - 0x20 || *q == '\\')
			return -1;
	*s = start;
	*len = (size_t)(end - start);
	c->p = end + 1;
	return 0;
}

/* read_integer reads 0 or [1-9][0-9]* (at most MAX_DIGITS digits) that
 * ends where a number must: no fraction, exponent or sign. */
static int read_integer(struct cursor *c, uint64_t *out)
{
	uint64_t v = 0;
	size_t n = 0;
	if (c->p >= c->end || *c->p < '0' || *c->p > '9')
		return -1;
	if (*c->p == '0') {
		c->p++;
		n = 1;
	} else {
		while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
			if (++n > MAX_DIGITS)
				return -1;
			v = v * 10 + (uint64_t)(*c->p - '0');
			c->p++;
		}
	}
	/* "01", "1.5", "1e3", "1x": jansson's business */
	if (c->p < c->end && ((*c->p >= '0' && *c->p <= '9') || *c->p == '.' ||
			      *c->p == 'e' || *c->p == 'E'))
		return -1;
	*out = v;
	return 0;
}

static int is_duplicate(const struct jsonflat *o, const char *key, size_t len)
{
	for (size_t i = 0; i < o->count; i++)
		if (o->fields[i].key_len == len &&
		    memcmp(o->fields[i].key, key, len) == 0)
			return 1;
	return 0;
}

static int read_member(struct cursor *c, struct jsonflat *out)
{
	struct jsonflat_field *f;
	if (out->count == JSONFLAT_MAX_FIELDS)
		return -1;
	f = &out->fields[out->count];
	if (read_string(c, &f->key, &f->key_len) != 0 ||
	    is_duplicate(out, f->key, f->key_len))
		return -1;
	skip_ws(c);
	if (c->p >= c->end || *c->p != ':')
		return -1;
	c->p++;
	skip_ws(c);
	if (c->p < c->end && *c->p == '"') {
		f->type = JSONFLAT_STRING;
		f->num = 0;
		if (read_string(c, &f->str, &f->str_len) != 0)
			return -1;
	} else {
		f->type = JSONFLAT_INTEGER;
		f->str = NULL;
		f->str_len = 0;
		if (read_integer(c, &f->num) != 0)
			return -1;
	}
	out->count++;
	return 0;
}

int jsonflat_read(const char *data, size_t len, struct jsonflat *out)
{
	struct cursor c = {data, data + len};
	out->count = 0;
	if (!data)
		return -1;
	skip_ws(&c);
	if (c.p >= c.end || *c.p != '{')
		return -1;
	c.p++;
	skip_ws(&c);
	if (c.p < c.end && *c.p == '}') {
		c.p++;
	} else {
		for (;;) {
			if (read_member(&c, out) != 0)
				return -1;
			skip_ws(&c);
			if (c.p >= c.end)
				return -1;
			if (*c.p == '}') {
				c.p++;
				break;
			}
			if (*c.p != ',')
				return -1;
			c.p++;
			skip_ws(&c);
		}
	}
	skip_ws(&c);
	return c.p == c.end ? 0 : -1;
}

const struct jsonflat_field *jsonflat_get(const struct jsonflat *obj,
					  const char *key)
{
	size_t len = strlen(key);
	for (size_t i = 0; i < obj->count; i++)
		if (obj->fields[i].key_len == len &&
		    memcmp(obj->fields[i].key, key, len) == 0)
			return &obj->fields[i];
	return NULL;
}

int jsonflat_copy_str(const struct jsonflat_field *f, char *out,
		      size_t out_size)
{
	if (!f || f->type != JSONFLAT_STRING || f->str_len >= out_size)
		return -1;
	memcpy(out, f->str, f->str_len);
	out[f->str_len] = '\0';
	return 0;
}
