/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsutil.h - durable file operations.
 *
 * Durable writes follow one recipe: write a temporary file in the same
 * directory, fsync it, rename it over the target, fsync the directory.
 */
#ifndef DLAUNCH_FSUTIL_H
#define DLAUNCH_FSUTIL_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

/* fs_mkdir_p creates dir and its parents (mode for new ones). */
int fs_mkdir_p(const char *dir, mode_t mode);
/* fs_fsync_dir fsyncs the directory holding path (or path itself when it
 * is a directory). */
int fs_fsync_dir(const char *path);
/* fs_write_all writes n bytes to fd, retrying on EINTR and short writes. */
int fs_write_all(int fd, const void *data, size_t n);
/* fs_read_all reads up to n bytes; *got is what was read before EOF. */
int fs_read_all(int fd, void *data, size_t n, size_t *got);
/* fs_write_file_atomic replaces path with data durably (recipe above). */
int fs_write_file_atomic(const char *path, const void *data, size_t len,
			 mode_t mode);
/* fs_read_file reads a whole file of at most max_bytes into a new
 * NUL-terminated buffer (*out, free() it). DL_ELIMIT when larger. */
int fs_read_file(const char *path, size_t max_bytes, char **out, size_t *len);

/* fs_read_token reads a bearer token: the file's one line without the
 * blanks around it (a final newline is fine, blank lines after it too).
 * An empty file, a second non-blank line, a control character or a file
 * over 4 KiB is refused with a message in err. Both dlaunch-rdzv's
 * --token-file and dlaunch's --rdzv-token-file read through it, so one
 * file means one token to both. *out: free() it. */
int fs_read_token(const char *path, char **out, char *err, size_t err_size);

/* fs_pwrite_all writes n bytes to fd at offset off (the file offset is left
 * alone), retrying on EINTR and short writes. DL_EIO with errno set. */
int fs_pwrite_all(int fd, const void *data, size_t n, off_t off);
/* fs_writeback_start asks the kernel to start writing len bytes of fd at
 * off to the disk now, without waiting, so that a large file's writeback
 * overlaps the writing of the rest instead of all landing on the final
 * fsync. Only a hint: it guarantees nothing and reports nothing. */
void fs_writeback_start(int fd, off_t off, off_t len);

/*
 * A durable replacement of a file written piece by piece, for contents too
 * large to hold in one buffer (same recipe as fs_write_file_atomic):
 * fs_atomic_open creates PATH.tmp.PID beside path; the caller writes it
 * through f->fd (write, pwrite, ...); fs_atomic_commit fsyncs, closes and
 * renames it over path, then fsyncs the directory; fs_atomic_abort closes
 * and removes it. Exactly one of commit and abort follows a successful
 * open. path is borrowed: it must outlive the commit.
 */
struct fs_atomic_file {
	int fd;		    /* the temporary file, open for writing */
	const char *path;   /* the final name */
	char tmp[PATH_MAX]; /* the temporary name */
};
/* fs_atomic_open returns 0, DL_EINVAL (name too long) or DL_ESYS (errno). */
int fs_atomic_open(struct fs_atomic_file *f, const char *path, mode_t mode);
/* fs_atomic_commit returns 0 or DL_EIO / DL_ESYS with errno from the call
 * that failed; the temporary file is removed when the rename did not
 * happen (a failing directory fsync after it leaves path replaced). */
int fs_atomic_commit(struct fs_atomic_file *f);
/* fs_atomic_abort discards the temporary file; errno is preserved. */
void fs_atomic_abort(struct fs_atomic_file *f);

#endif
