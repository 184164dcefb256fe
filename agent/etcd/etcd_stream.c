/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_stream.c - the splitter of a stream of JSON objects (a watch, a
 * keepalive) into whole objects (etcd_proto.h). No I/O.
 *
 * It does not parse: it follows strings, escapes and nesting, enough to
 * find where each object ends, and keeps at most one object's bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "dlaunch/error.h"
#include "etcd_proto.h"

/* ------------------------------------------------------------ splitter */

void etcd_splitter_init(struct etcd_splitter *s, size_t max_object_bytes)
{
	memset(s, 0, sizeof(*s));
	s->max_object_bytes = max_object_bytes;
}

void etcd_splitter_release(struct etcd_splitter *s)
{
	free(s->buf);
	etcd_splitter_init(s, s->max_object_bytes);
}

void etcd_splitter_reset(struct etcd_splitter *s)
{
	/* the storage is kept for the next stream */
	s->len = 0;
	s->depth = 0;
	s->in_string = 0;
	s->escaped = 0;
	s->failed = 0;
}

size_t etcd_splitter_pending(const struct etcd_splitter *s)
{
	return s->len;
}

/* keep appends n bytes of the object begun; the limit was checked */
static int keep(struct etcd_splitter *s, const char *p, size_t n)
{
	if (n == 0)
		return 0;
	if (s->len + n > s->cap) {
		size_t cap = s->cap ? s->cap : 4096;
		char *nb;
		while (cap < s->len + n)
			cap *= 2;
		if (cap > s->max_object_bytes)
			cap = s->max_object_bytes;
		nb = realloc(s->buf, cap);
		if (!nb)
			return DL_ENOMEM;
		s->buf = nb;
		s->cap = cap;
	}
	memcpy(s->buf + s->len, p, n);
	s->len += n;
	return 0;
}

static int stop(struct etcd_splitter *s, int rc)
{
	s->failed = rc;
	s->len = 0;
	return rc;
}

int etcd_splitter_feed(struct etcd_splitter *s, const char *data, size_t len,
		       etcd_object_fn fn, void *arg, char *err, size_t err_size)
{
	size_t seg = 0; /* where this chunk's part of the object begins */
	int rc;

	if (s->failed)
		return dl_errorf(err, err_size, s->failed,
				 "etcd stream: stopped by an earlier error");
	for (size_t i = 0; i < len; i++) {
		char c = data[i];

		if (s->depth == 0) {
			if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
				continue;
			if (c != '{')
				return dl_errorf(err, err_size,
						 stop(s, DL_EPROTO),
						 "etcd stream: byte 0x%02x "
						 "between objects",
						 (unsigned char)c);
			seg = i;
			s->depth = 1;
		} else if (s->in_string) {
			if (s->escaped)
				s->escaped = 0;
			else if (c == '\\')
				s->escaped = 1;
			else if (c == '"')
				s->in_string = 0;
		} else if (c == '"') {
			s->in_string = 1;
		} else if (c == '{' || c == '[') {
			s->depth++;
		} else if (c == '}' || c == ']') {
			/* inner mismatches are the parser's to find; the
			 * object itself ends with the brace it began with */
			if (--s->depth == 0 && c != '}')
				return dl_errorf(err, err_size,
						 stop(s, DL_EPROTO),
						 "etcd stream: an object "
						 "closed by ']'");
		}
		if (s->len + (i + 1 - seg) > s->max_object_bytes)
			return dl_errorf(err, err_size, stop(s, DL_ELIMIT),
					 "etcd stream: an object over %zu "
					 "bytes",
					 s->max_object_bytes);
		if (s->depth > 0)
			continue;
		/* whole: straight from data when none of it was kept */
		if (s->len == 0) {
			rc = fn(arg, data + seg, i + 1 - seg);
		} else {
			rc = keep(s, data + seg, i + 1 - seg);
			if (rc == 0)
				rc = fn(arg, s->buf, s->len);
		}
		s->len = 0;
		if (rc != 0)
			return stop(s, rc);
	}
	if (s->depth > 0) {
		rc = keep(s, data + seg, len - seg);
		if (rc != 0)
			return stop(s, rc);
	}
	return 0;
}
