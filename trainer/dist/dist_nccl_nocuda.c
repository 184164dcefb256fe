/* SPDX-License-Identifier: Apache-2.0 */
/* dist_nccl_nocuda.c - the NCCL backend's entry point in builds without
 * CUDA (NO_CUDA=1, sanitizer builds, no nvcc): there is no NCCL table, and
 * asking for it says so. */
#include "dist_priv.h"
#include "dlaunch/error.h"

int dist_nccl_ops(const struct dist_ops **out, char *err, size_t err_size)
{
	*out = NULL;
	set_err(err, err_size,
		"the nccl backend is not available: this dlaunch-train was "
		"built without CUDA (use the tcp backend)");
	return DL_ENOTSUP;
}
