/* SPDX-License-Identifier: Apache-2.0 */
/* backend_nocuda.c - the GPU backend's entry points in builds without CUDA
 * (NO_CUDA=1, sanitizer builds, no nvcc): no device is ever available. */
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "dlaunch/error.h"

int train_backend_cuda_available(void)
{
	return 0;
}

int train_backend_cuda(struct train_backend *be, int device, char *err,
		       size_t err_size)
{
	memset(be, 0, sizeof(*be));
	snprintf(err, err_size,
		 "cuda device %d: this dlaunch-train was built without CUDA",
		 device);
	return DL_ENOTSUP;
}
