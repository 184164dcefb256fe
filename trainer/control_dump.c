/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control_dump.c - the worker's answer to the agent's `dump`
 * (docs/worker-protocol.md): the dump file, written whole or not at all
 * (a temporary name, then rename), and the `dumped` line. What the file
 * holds besides the pid comes from the caller's hook (dlaunch-train: its
 * rank, the collective flight recorder and where its training thread is;
 * main.c), so this file knows nothing of the collective library.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "control.h"
#include "dlaunch/buf.h"
#include "dlaunch/error.h"

#define DUMP_MAX_BYTES (4u << 20) /* far above what a recorder holds */

/* utf8_len: the length of the valid UTF-8 sequence at s (n bytes left),
 * or 0 when it is not one (overlong, surrogate, past U+10FFFF, cut) */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned cp;
	size_t len;

	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, cp = s[0] & 0x1fu;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, cp = s[0] & 0x0fu;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, cp = s[0] & 0x07u;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3fu);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return len;
}

int control_json_string(struct buf *out, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);
	int rc = buf_append_str(out, "\"");

	while (rc == 0 && n > 0) {
		size_t k;

		if (*p == '"' || *p == '\\') {
			rc = buf_printf(out, "\\%c", *p);
			k = 1;
		} else if (*p == '\n') {
			rc = buf_append_str(out, "\\n");
			k = 1;
		} else if (*p < 0x20 || *p == 0x7f) {
			rc = buf_printf(out, "\\u%04x", *p);
			k = 1;
		} else if (*p < 0x80) {
			rc = buf_append(out, p, 1);
			k = 1;
		} else if ((k = utf8_len(p, n)) > 0) {
			rc = buf_append(out, p, k);
		} else {
			rc = buf_append_str(out, "\\ufffd");
			k = 1;
		}
		p += k;
		n -= k;
	}
	if (rc == 0)
		rc = buf_append_str(out, "\"");
	return rc;
}

int control_format_dumped(char *out, size_t size, const char *id,
			  const char *error)
{
	struct buf b;
	int rc, len = -1;

	buf_init(&b, size);
	rc = buf_append_str(&b, "{\"type\":\"dumped\",\"id\":");
	if (rc == 0)
		rc = control_json_string(&b, id);
	if (rc == 0 && error != NULL) {
		rc = buf_append_str(&b, ",\"error\":");
		if (rc == 0)
			rc = control_json_string(&b, error);
	}
	if (rc == 0)
		rc = buf_append_str(&b, "}\n");
	if (rc == 0 && b.len < size) {
		memcpy(out, b.data, b.len + 1);
		len = (int)b.len;
	}
	buf_release(&b);
	return len;
}

/* write_all: the whole of data to fd */
static int write_all(int fd, const char *data, size_t n)
{
	while (n > 0) {
		ssize_t k = write(fd, data, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		data += k;
		n -= (size_t)k;
	}
	return 0;
}

int control_dump_write(const char *path, control_dump_fn fn, void *ctx,
		       char *err, size_t err_size)
{
	char tmp[CONTROL_DUMP_PATH_MAX + 8];
	struct buf b;
	int fd = -1, rc;

	if (path[0] != '/')
		return dl_errorf(err, err_size, DL_EINVAL,
				 "dump path '%s' is not absolute", path);
	if (strlen(path) + 5 > CONTROL_DUMP_PATH_MAX)
		return dl_errorf(err, err_size, DL_ELIMIT,
				 "dump path is too long");
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	buf_init(&b, DUMP_MAX_BYTES);
	rc = buf_printf(&b, "{\"pid\":%ld", (long)getpid());
	if (rc == 0 && fn != NULL)
		rc = fn(ctx, &b);
	if (rc == 0)
		rc = buf_append_str(&b, "}\n");
	if (rc != 0) {
		rc = dl_errorf(err, err_size, rc, "cannot build the dump: %s",
			       dl_strerror(rc));
		goto out;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		  0600);
	if (fd < 0 || write_all(fd, b.data, b.len) != 0) {
		rc = dl_errorf(err, err_size, DL_ESYS, "cannot write %s: %s",
			       tmp, strerror(errno));
		goto out;
	}
	if (close(fd) != 0) {
		fd = -1;
		rc = dl_errorf(err, err_size, DL_ESYS, "cannot write %s: %s",
			       tmp, strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(tmp, path) != 0)
		rc = dl_errorf(err, err_size, DL_ESYS,
			       "cannot rename %s to %s: %s", tmp, path,
			       strerror(errno));
out:
	if (fd >= 0)
		close(fd);
	if (rc != 0)
		unlink(tmp);
	buf_release(&b);
	return rc;
}
