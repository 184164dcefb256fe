/* SPDX-License-Identifier: Apache-2.0 */
/*
 * error.h - the one error-code enum every dlaunch module returns.
 *
 * Functions return 0 (DL_OK) or a negative DL_E* code; detail meant for the
 * user goes into a caller-supplied message buffer or the log, never into
 * the code itself.
 */
#ifndef DLAUNCH_ERROR_H
#define DLAUNCH_ERROR_H

#include <stddef.h>

enum dl_error {
	DL_OK = 0,
	DL_ENOMEM = -1,	   /* allocation failed */
	DL_EINVAL = -2,	   /* malformed input or argument */
	DL_ERANGE = -3,	   /* a number out of its allowed range */
	DL_ELIMIT = -4,	   /* a size or count limit was exceeded */
	DL_EIO = -5,	   /* a read, write or fsync failed */
	DL_ESYS = -6,	   /* another system call failed (see errno/log) */
	DL_ETIMEDOUT = -7, /* a deadline passed */
	DL_ENOTFOUND = -8, /* no such job, node, key or file */
	DL_ECONFLICT = -9, /* disagrees with existing state */
	DL_ESTALE = -10,   /* names an old round or incarnation (fenced) */
	DL_EAUTH = -11,	   /* missing or wrong credentials */
	DL_ECLOSED = -12,  /* the peer or the object has gone away */
	DL_ECORRUPT = -13, /* checksum or format check failed */
	DL_EEXIST = -14,   /* already exists */
	DL_EAGAIN = -15,   /* not now; try again later */
	DL_EPROTO = -16,   /* a peer broke the protocol */
	DL_EGONE = -17,	   /* the job has ended */
	DL_EBUSY = -18,	   /* overloaded or in use */
	DL_ENOTSUP = -19,  /* not supported in this build or mode */
};

/* dl_strerror returns a static lowercase description of code (0 or a
 * DL_E* value); unknown codes get "unknown error". */
const char *dl_strerror(int code);

/* dl_errorf writes a message for the user into err (err_size bytes; err
 * may be NULL or err_size 0 to drop it) and returns code, so a failing path
 * reads `return dl_errorf(err, err_size, DL_EINVAL, "bad %s", what);`. */
int dl_errorf(char *err, size_t err_size, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
