/* SPDX-License-Identifier: Apache-2.0 */
/* error.c - descriptions of the DL_E* codes. */
#include "dlaunch/error.h"

#include <stdarg.h>
#include <stdio.h>

const char *dl_strerror(int code)
{
	switch (code) {
	case DL_OK: return "success";
	case DL_ENOMEM: return "out of memory";
	case DL_EINVAL: return "invalid argument";
	case DL_ERANGE: return "value out of range";
	case DL_ELIMIT: return "limit exceeded";
	case DL_EIO: return "input/output error";
	case DL_ESYS: return "system call failed";
	case DL_ETIMEDOUT: return "timed out";
	case DL_ENOTFOUND: return "not found";
	case DL_ECONFLICT: return "conflicts with existing state";
	case DL_ESTALE: return "stale round";
	case DL_EAUTH: return "not authorized";
	case DL_ECLOSED: return "connection closed";
	case DL_ECORRUPT: return "data corrupt";
	case DL_EEXIST: return "already exists";
	case DL_EAGAIN: return "try again";
	case DL_EPROTO: return "protocol error";
	case DL_EGONE: return "job has ended";
	case DL_EBUSY: return "busy";
	case DL_ENOTSUP: return "not supported";
	}
	return "unknown error";
}

int dl_errorf(char *err, size_t err_size, int code, const char *fmt, ...)
{
	va_list ap;
	if (err && err_size) {
		va_start(ap, fmt);
		vsnprintf(err, err_size, fmt, ap);
		va_end(ap);
	}
	return code;
}
