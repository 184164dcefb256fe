/*
 * fsutil.h - durable file operations.
 *
 * Durable writes follow one recipe: write a temporary file in the same
 * directory, fsync it, rename it over the target, fsync the directory.
 */
#ifndef DLAUNCH_FSUTIL_H
#define DLAUNCH_FSUTIL_H

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

#endif
