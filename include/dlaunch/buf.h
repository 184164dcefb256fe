/* SPDX-License-Identifier: Apache-2.0 */
/*
 * buf.h - growable byte buffers with a hard maximum.
 *
 * Every buffer fed from outside has a ceiling: appends that would take it
 * past max_bytes fail with DL_ELIMIT and leave it unchanged. The content is
 * always followed by a NUL byte (not counted in len) so text can be used as
 * a C string.
 */
#ifndef DLAUNCH_BUF_H
#define DLAUNCH_BUF_H

#include <stdarg.h>
#include <stddef.h>

struct buf {
	char *data;	  /* owned; NULL until the first append */
	size_t len;	  /* bytes in use */
	size_t cap;	  /* bytes allocated (including the NUL) */
	size_t max_bytes; /* ceiling for len */
};

/* buf_init prepares an embedded buffer; nothing is allocated yet. */
void buf_init(struct buf *b, size_t max_bytes);
/* buf_release frees the storage; the buffer may be used again (empty). */
void buf_release(struct buf *b);

/* buf_reserve makes room for extra more bytes; 0, DL_ELIMIT or DL_ENOMEM. */
int buf_reserve(struct buf *b, size_t extra);
int buf_append(struct buf *b, const void *data, size_t n);
int buf_append_str(struct buf *b, const char *s);
int buf_printf(struct buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int buf_vprintf(struct buf *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* buf_consume drops the first n bytes (all of them if n >= len). */
void buf_consume(struct buf *b, size_t n);
/* buf_reset empties the buffer, keeping its storage. */
void buf_reset(struct buf *b);
/* buf_cstr returns the content as a C string ("" when empty); borrowed. */
const char *buf_cstr(const struct buf *b);
/* buf_steal hands the storage to the caller (free() it) and empties b;
 * returns NULL when empty. */
char *buf_steal(struct buf *b, size_t *len);

#endif
