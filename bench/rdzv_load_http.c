/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdzv_load_http.c - what rdzv_load reads of the server's answers: one
 * HTTP/1.1 response (status, headers, a body whole or chunked) at the
 * front of a buffer, and an integer member of a JSON object. No I/O.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dlaunch/clock.h"
#include "dlaunch/parse.h"

#include "rdzv_load.h"

/* json_top_int finds "key" among the members of the top-level object of
 * body (nested objects and arrays skipped, strings with escapes handled)
 * and parses its integer value. 0 when found, -1 otherwise. Linear: a join
 * answer may list every member, and this runs once per node. */
int json_top_int(const char *body, size_t len, const char *key, long long *out)
{
	size_t klen = strlen(key);
	int depth = 0;
	size_t i = 0;
	while (i < len) {
		char ch = body[i];
		if (ch == '"') {
			size_t start = ++i;
			while (i < len && body[i] != '"') {
				if (body[i] == '\\')
					i++;
				i++;
			}
			if (i >= len)
				return -1;
			size_t slen = i - start;
			i++;
			if (depth != 1 || slen != klen ||
			    memcmp(body + start, key, klen) != 0)
				continue;
			while (i < len && (body[i] == ' ' || body[i] == '\t' ||
					   body[i] == '\r' || body[i] == '\n'))
				i++;
			if (i >= len || body[i] != ':')
				continue;
			i++;
			while (i < len && (body[i] == ' ' || body[i] == '\t'))
				i++;
			char num[32];
			size_t n = 0;
			while (i < len && n + 1 < sizeof(num) &&
			       (body[i] == '-' ||
				(body[i] >= '0' && body[i] <= '9')))
				num[n++] = body[i++];
			num[n] = '\0';
			int64_t v;
			if (parse_i64(num, INT64_MIN, INT64_MAX, &v) != 0)
				return -1;
			*out = v;
			return 0;
		}
		if (ch == '{' || ch == '[')
			depth++;
		else if (ch == '}' || ch == ']')
			depth--;
		i++;
	}
	return -1;
}

/* http_parse looks for one complete response at the start of buf.
 * Returns the number of bytes it spans (0: incomplete, -1: malformed) and
 * sets *status, the body (decoded in place when chunked) and *close. */
long http_parse(char *buf, size_t len, int *status, char **body,
		size_t *body_len, int *close_after)
{
	char *end = memmem(buf, len, "\r\n\r\n", 4);
	if (end == NULL)
		return len > 65536 ? -1 : 0;
	size_t hdr_len = (size_t)(end - buf) + 4;
	if (len < 12 || memcmp(buf, "HTTP/1.", 7) != 0)
		return -1;
	char code[4] = {buf[9], buf[10], buf[11], '\0'};
	int st;
	if (parse_int(code, 100, 599, &st) != 0)
		return -1;
	*status = st;
	*close_after = 0;
	long long clen = -1;
	int chunked = 0;
	char *line = memchr(buf, '\n', hdr_len);
	while (line != NULL && line + 1 < end) {
		line++;
		char *eol = memchr(line, '\r', (size_t)(end + 2 - line));
		if (eol == NULL)
			break;
		size_t ll = (size_t)(eol - line);
		if (ll > 15 && strncasecmp(line, "content-length:", 15) == 0) {
			char num[24];
			size_t k = 15;
			while (k < ll && line[k] == ' ')
				k++;
			size_t nl =
			    ll - k < sizeof(num) - 1 ? ll - k : sizeof(num) - 1;
			memcpy(num, line + k, nl);
			num[nl] = '\0';
			uint64_t v;
			if (parse_u64(num, 0, LOAD_MAX_RESPONSE_BYTES, &v) != 0)
				return -1;
			clen = (long long)v;
		} else if (ll > 18 &&
			   strncasecmp(line, "transfer-encoding:", 18) == 0) {
			if (memmem(line, ll, "chunked", 7) != NULL)
				chunked = 1;
		} else if (ll > 11 &&
			   strncasecmp(line, "connection:", 11) == 0) {
			if (memmem(line, ll, "close", 5) != NULL)
				*close_after = 1;
		}
		line = memchr(eol, '\n', (size_t)(end + 4 - eol));
	}
	if (!chunked) {
		if (clen < 0)
			clen =
			    0; /* no body framing: none (keep-alive server) */
		if (len - hdr_len < (size_t)clen)
			return 0;
		*body = buf + hdr_len;
		*body_len = (size_t)clen;
		return (long)(hdr_len + (size_t)clen);
	}
	/* Chunked: first make sure every chunk is here (without touching the
	 * buffer, which is read again when more bytes arrive), then decode
	 * in place behind the headers. */
	size_t pos = hdr_len, total = 0;
	for (int pass = 0; pass < 2; pass++) {
		size_t out = hdr_len;
		pos = hdr_len;
		for (;;) {
			char *crlf = memmem(buf + pos, len - pos, "\r\n", 2);
			if (crlf == NULL)
				return 0;
			unsigned long long csize = 0;
			for (char *p = buf + pos; p < crlf && *p != ';'; p++) {
				int d;
				if (*p >= '0' && *p <= '9')
					d = *p - '0';
				else if (*p >= 'a' && *p <= 'f')
					d = *p - 'a' + 10;
				else if (*p >= 'A' && *p <= 'F')
					d = *p - 'A' + 10;
				else
					return -1;
				csize = csize * 16 + (unsigned)d;
				if (csize > LOAD_MAX_RESPONSE_BYTES)
					return -1;
			}
			size_t data = (size_t)(crlf - buf) + 2;
			if (csize == 0) {
				if (len - data < 2)
					return 0;
				total = data + 2;
				*body = buf + hdr_len;
				*body_len = out - hdr_len;
				break;
			}
			if (len - data < csize + 2)
				return 0;
			if (pass == 1)
				memmove(buf + out, buf + data, csize);
			out += csize;
			pos = data + csize + 2;
		}
	}
	return (long)total;
}
