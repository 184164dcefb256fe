/* SPDX-License-Identifier: Apache-2.0 */
/* fsutil.c - durable file operations (tmp, fsync, rename, fsync dir). */
#include "dlaunch/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dlaunch/error.h"

int fs_mkdir_p(const char *dir, mode_t mode)
{
	char path[PATH_MAX];
	size_t n = strlen(dir);

	if (n == 0 || n >= sizeof(path))
		return DL_EINVAL;
	memcpy(path, dir, n + 1);
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, mode) != 0 && errno != EEXIST)
			return DL_ESYS;
		*p = '/';
	}
	if (mkdir(path, mode) != 0 && errno != EEXIST)
		return DL_ESYS;
	return 0;
}

int fs_fsync_dir(const char *path)
{
	char dir[PATH_MAX];
	struct stat st;
	int fd, rc = 0;

	if (strlen(path) >= sizeof(dir))
		return DL_EINVAL;
	strcpy(dir, path);
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		char *slash = strrchr(dir, '/');
		if (!slash)
			strcpy(dir, ".");
		else if (slash == dir)
			dir[1] = '\0';
		else
			*slash = '\0';
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return DL_ESYS;
	if (fsync(fd) != 0)
		rc = DL_EIO;
	close(fd);
	return rc;
}

int fs_write_all(int fd, const void *data, size_t n)
{
	const char *p = data;
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return DL_EIO;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int fs_read_all(int fd, void *data, size_t n, size_t *got)
{
	char *p = data;
	size_t done = 0;
	while (done < n) {
		ssize_t r = read(fd, p + done, n - done);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			*got = done;
			return DL_EIO;
		}
		if (r == 0)
			break;
		done += (size_t)r;
	}
	*got = done;
	return 0;
}

int fs_write_file_atomic(const char *path, const void *data, size_t len,
			 mode_t mode)
{
	char tmp[PATH_MAX];
	int fd, rc;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path,
			     (long)getpid()) >= sizeof(tmp))
		return DL_EINVAL;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return DL_ESYS;
	rc = fs_write_all(fd, data, len);
	if (rc == 0 && fsync(fd) != 0)
		rc = DL_EIO;
	if (close(fd) != 0 && rc == 0)
		rc = DL_EIO;
	if (rc == 0 && rename(tmp, path) != 0)
		rc = DL_ESYS;
	if (rc != 0) {
		unlink(tmp);
		return rc;
	}
	return fs_fsync_dir(path);
}

int fs_read_file(const char *path, size_t max_bytes, char **out, size_t *len)
{
	struct stat st;
	size_t got;
	char *data;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? DL_ENOTFOUND : DL_ESYS;
	if (fstat(fd, &st) != 0) {
		close(fd);
		return DL_ESYS;
	}
	if ((uint64_t)st.st_size > max_bytes) {
		close(fd);
		return DL_ELIMIT;
	}
	data = malloc((size_t)st.st_size + 1);
	if (!data) {
		close(fd);
		return DL_ENOMEM;
	}
	rc = fs_read_all(fd, data, (size_t)st.st_size, &got);
	close(fd);
	if (rc) {
		free(data);
		return rc;
	}
	data[got] = '\0';
	*out = data;
	*len = got;
	return 0;
}

int fs_pwrite_all(int fd, const void *data, size_t n, off_t off)
{
	const char *p = data;
	while (n > 0) {
		ssize_t w = pwrite(fd, p, n, off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return DL_EIO;
		}
		p += w;
		off += (off_t)w;
		n -= (size_t)w;
	}
	return 0;
}

void fs_writeback_start(int fd, off_t off, off_t len)
{
#if defined(__linux__) && defined(SYNC_FILE_RANGE_WRITE)
	int saved = errno;

	(void)sync_file_range(fd, off, len, SYNC_FILE_RANGE_WRITE);
	errno = saved;
#else
	(void)fd;
	(void)off;
	(void)len;
#endif
}

int fs_atomic_open(struct fs_atomic_file *f, const char *path, mode_t mode)
{
	f->fd = -1;
	f->path = path;
	if ((size_t)snprintf(f->tmp, sizeof(f->tmp), "%s.tmp.%ld", path,
			     (long)getpid()) >= sizeof(f->tmp))
		return DL_EINVAL;
	f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	return f->fd < 0 ? DL_ESYS : 0;
}

int fs_atomic_commit(struct fs_atomic_file *f)
{
	int rc = 0, saved;

	if (fsync(f->fd) != 0)
		rc = DL_EIO;
	saved = errno;
	if (close(f->fd) != 0 && rc == 0) {
		rc = DL_EIO;
		saved = errno;
	}
	f->fd = -1;
	if (rc == 0 && rename(f->tmp, f->path) != 0) {
		rc = DL_ESYS;
		saved = errno;
	}
	if (rc != 0) {
		unlink(f->tmp);
		errno = saved;
		return rc;
	}
	return fs_fsync_dir(f->path);
}

void fs_atomic_abort(struct fs_atomic_file *f)
{
	int saved = errno;

	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
	unlink(f->tmp);
	errno = saved;
}

int fs_read_token(const char *path, char **out, char *err, size_t err_size)
{
	char *data = NULL, *start, *end, *p;
	size_t len;
	int rc = fs_read_file(path, 4096, &data, &len);

	*out = NULL;
	if (rc)
		return dl_errorf(err, err_size, rc,
				 "cannot read token file %s: %s", path,
				 rc == DL_ELIMIT      ? "larger than 4 KiB"
				 : rc == DL_ENOTFOUND ? "no such file"
						      : strerror(errno));
	if (len != strlen(data)) { /* a NUL byte inside */
		free(data);
		return dl_errorf(err, err_size, DL_EINVAL,
				 "token file %s holds a NUL byte", path);
	}
	start = data + strspn(data, " \t");
	end = start + strcspn(start, "\r\n");
	/* whatever follows the first line must be blank */
	if (end[strspn(end, " \t\r\n")] != '\0') {
		free(data);
		return dl_errorf(err, err_size, DL_EINVAL,
				 "token file %s has more than one line", path);
	}
	while (end > start && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	*end = '\0';
	for (p = start; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f) {
			free(data);
			return dl_errorf(err, err_size, DL_EINVAL,
					 "token file %s holds a control "
					 "character",
					 path);
		}
	if (!*start) {
		free(data);
		return dl_errorf(err, err_size, DL_EINVAL,
				 "token file %s is empty", path);
	}
	memmove(data, start, (size_t)(end - start) + 1);
	*out = data;
	return 0;
}
