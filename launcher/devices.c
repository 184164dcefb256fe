/* SPDX-License-Identifier: Apache-2.0 */
/*
 * devices.c - how many workers --nproc-per-node gpu|cpu|auto means on this
 * node: the GPUs this job may use (the host's, narrowed by
 * CUDA_VISIBLE_DEVICES, which Slurm and other schedulers set to the
 * job's GPUs) and the CPUs it may run on (its affinity mask, which a
 * scheduler's cpuset narrows). launcher_visible_gpus is the pure rule.
 */
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlaunch/agent.h"
#include "launcher.h"

int launcher_visible_gpus(int present, const char *visible)
{
	unsigned char seen[LAUNCHER_MAX_GPUS] = {0};
	int n = 0;
	const char *p = visible;
	if (!visible)
		return present;
	/* as CUDA reads it: items in order, up to the first one that is not
	 * a device of this host (an index out of range, a repeat, a word
	 * such as Slurm's "NoDevFiles", an empty item) */
	while (*p && n < present) {
		size_t len = strcspn(p, ",");
		if (len == 0)
			break;
		if (p[0] >= '0' && p[0] <= '9') {
			int idx = 0;
			size_t i;
			for (i = 0; i < len && p[i] >= '0' && p[i] <= '9' &&
				    idx < LAUNCHER_MAX_GPUS;
			     i++)
				idx = idx * 10 + (p[i] - '0');
			if (i != len || idx >= present || seen[idx])
				break;
			seen[idx] = 1;
		} else if (!(len > 4 && (strncmp(p, "GPU-", 4) == 0 ||
					 strncmp(p, "MIG-", 4) == 0))) {
			break;
		}
		n++;
		p += len;
		if (*p == ',')
			p++;
	}
	return n;
}

/* present_gpus: NVIDIA GPUs on this host, from the driver's /proc (no
 * CUDA needed), else its /dev nodes. */
static int present_gpus(void)
{
	DIR *d = opendir("/proc/driver/nvidia/gpus");
	struct dirent *de;
	int n = 0;
	if (d) {
		while ((de = readdir(d)))
			if (de->d_name[0] != '.')
				n++;
		closedir(d);
		return n;
	}
	for (int i = 0; i < LAUNCHER_MAX_GPUS; i++) {
		char path[32];
		snprintf(path, sizeof(path), "/dev/nvidia%d", i);
		if (access(path, F_OK) == 0)
			n++;
	}
	return n;
}

int launcher_count_gpus(void)
{
	return launcher_visible_gpus(present_gpus(),
				     getenv("CUDA_VISIBLE_DEVICES"));
}

int launcher_count_cpus(void)
{
	cpu_set_t set;
	long n = 0;
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		n = CPU_COUNT(&set);
	if (n <= 0)
		n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n <= 0)
		return 1;
	return n > AGENT_MAX_NPROC ? AGENT_MAX_NPROC : (int)n;
}
