/* SPDX-License-Identifier: Apache-2.0 */
/*
 * env.h - a worker's environment (env.c); private to agent/.
 */
#ifndef DLAUNCH_AGENT_ENV_H
#define DLAUNCH_AGENT_ENV_H
#include <stdint.h>

/* What one worker's environment is made of. */
struct agent_worker_env {
	int rank, local_rank, world_size, local_world_size;
	int group_rank, group_world_size;
	int role_rank, role_world_size;
	const char *role_name;
	const char *master_addr;
	unsigned master_port;
	int restart_count, max_restarts;
	const char *run_id;
	const char *error_file;
	const char *job_id;
	uint64_t round;
	const char *node_id;
	const char *progress_file; /* DLAUNCH_PROGRESS_FILE; NULL: unset */
	/* GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME, each where base lacks
	 * it (agent_addr_socket_ifname); NULL: neither */
	const char *socket_ifname;
	/* the worker's end of its control channel (DLAUNCH_CONTROL_FD and
	 * DLAUNCH_CONTROL_VERSION); <= 2: no channel, neither is set */
	int control_fd;
	unsigned control_version;
	/* dlaunch's sitecustomize directory, put first on PYTHONPATH (the
	 * old value after it), and the file its SIGUSR2 handler writes the
	 * Python stacks to (DLAUNCH_PYSTACK_FILE); NULL: neither */
	const char *site_dir;
	const char *pystack_file;
};

/*
 * agent_env_build returns a new NULL-terminated environment: base (the
 * agent's own, NULL-terminated) with the variables of DESIGN.md section 1
 * set from e (replacing inherited ones; DLAUNCH_PROGRESS_FILE only when
 * e->progress_file is set), plus
 * TORCH_NCCL_ASYNC_ERROR_HANDLING=1 when base lacks it and
 * OMP_NUM_THREADS=1 when base lacks it and local_world_size > 1, and
 * GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME = e->socket_ifname, each when
 * base lacks it and e->socket_ifname is set, and DLAUNCH_CONTROL_FD /
 * DLAUNCH_CONTROL_VERSION when e->control_fd > 2 (replacing inherited
 * ones; removed from base otherwise, so a worker never takes its agent's
 * channel for its own), and, with e->site_dir, PYTHONPATH = site_dir
 * followed by base's PYTHONPATH and DLAUNCH_PYSTACK_FILE (docs/hangs.md).
 * Free with agent_env_free. Returns 0 or DL_ENOMEM.
 */
int agent_env_build(char *const *base, const struct agent_worker_env *e,
		    char ***out);
void agent_env_free(char **env);

#endif
