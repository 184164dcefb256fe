/* SPDX-License-Identifier: Apache-2.0 */
/*
 * env.c - the worker environment, the contract of DESIGN.md section 1:
 * the agent's environment plus exactly the variables torchrun sets (its
 * values replace inherited ones), two defaults that only apply when unset,
 * and dlaunch's own DLAUNCH_* variables.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/agent.h"
#include "dlaunch/error.h"
#include "env.h"

/* the most set() calls below: torchrun's 16, 3 defaults, 2 interfaces,
 * 6 DLAUNCH_*, PYTHONPATH and DLAUNCH_PYSTACK_FILE
 * (test_env_every_variable sets them all) */
#define ENV_OWN_MAX 29

struct env_var {
	const char *name;
	/* the longest: PYTHONPATH, a path under --log-dir and the user's */
	char value[2 * PATH_MAX + 64];
};

/* base_value: the value of name in base, or NULL */
static const char *base_value(char *const *base, const char *name)
{
	size_t n = strlen(name);
	for (; base && *base; base++)
		if (strncmp(*base, name, n) == 0 && (*base)[n] == '=')
			return *base + n + 1;
	return NULL;
}

/* has_name tells whether "NAME=..." entry is for name. */
static int has_name(const char *entry, const char *name)
{
	size_t n = strlen(name);
	return strncmp(entry, name, n) == 0 && entry[n] == '=';
}

static int in_base(char *const *base, const char *name)
{
	for (; base && *base; base++)
		if (has_name(*base, name))
			return 1;
	return 0;
}

static void set(struct env_var *v, int *n, const char *name, const char *fmt,
		...) __attribute__((format(printf, 4, 5)));
static void set(struct env_var *v, int *n, const char *name, const char *fmt,
		...)
{
	va_list ap;
	if (*n >= ENV_OWN_MAX)
		return; /* not reached: ENV_OWN_MAX counts every call */
	v[*n].name = name;
	va_start(ap, fmt);
	vsnprintf(v[*n].value, sizeof(v[*n].value), fmt, ap);
	va_end(ap);
	(*n)++;
}

int agent_env_build(char *const *base, const struct agent_worker_env *e,
		    char ***out)
{
	struct env_var own[ENV_OWN_MAX];
	const char *old_path;
	int n_own = 0, i;
	size_t n_base = 0, k = 0;
	char **env;

	set(own, &n_own, "RANK", "%d", e->rank);
	set(own, &n_own, "LOCAL_RANK", "%d", e->local_rank);
	set(own, &n_own, "WORLD_SIZE", "%d", e->world_size);
	set(own, &n_own, "LOCAL_WORLD_SIZE", "%d", e->local_world_size);
	set(own, &n_own, "GROUP_RANK", "%d", e->group_rank);
	set(own, &n_own, "GROUP_WORLD_SIZE", "%d", e->group_world_size);
	set(own, &n_own, "ROLE_RANK", "%d", e->role_rank);
	set(own, &n_own, "ROLE_NAME", "%s", e->role_name);
	set(own, &n_own, "ROLE_WORLD_SIZE", "%d", e->role_world_size);
	set(own, &n_own, "MASTER_ADDR", "%s", e->master_addr);
	set(own, &n_own, "MASTER_PORT", "%u", e->master_port);
	set(own, &n_own, "TORCHELASTIC_RESTART_COUNT", "%d", e->restart_count);
	set(own, &n_own, "TORCHELASTIC_MAX_RESTARTS", "%d", e->max_restarts);
	set(own, &n_own, "TORCHELASTIC_RUN_ID", "%s", e->run_id);
	set(own, &n_own, "TORCHELASTIC_ERROR_FILE", "%s", e->error_file);
	/* the workers rendezvous through MASTER_ADDR/PORT, not a store the
	 * agent hosts */
	set(own, &n_own, "TORCHELASTIC_USE_AGENT_STORE", "False");
	if (!in_base(base, "TORCH_NCCL_ASYNC_ERROR_HANDLING"))
		set(own, &n_own, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
	/* PyTorch before 2.2 reads the old name; torchrun of those versions
	 * sets it, so a drop-in must too */
	if (!in_base(base, "NCCL_ASYNC_ERROR_HANDLING"))
		set(own, &n_own, "NCCL_ASYNC_ERROR_HANDLING", "1");
	if (e->local_world_size > 1 && !in_base(base, "OMP_NUM_THREADS"))
		set(own, &n_own, "OMP_NUM_THREADS", "1");
	/* gloo and NCCL's bootstrap bind what the host name resolves to;
	 * where that is loopback only, the interface of the node's address */
	if (e->socket_ifname && !in_base(base, "GLOO_SOCKET_IFNAME"))
		set(own, &n_own, "GLOO_SOCKET_IFNAME", "%s", e->socket_ifname);
	if (e->socket_ifname && !in_base(base, "NCCL_SOCKET_IFNAME"))
		set(own, &n_own, "NCCL_SOCKET_IFNAME", "%s", e->socket_ifname);
	set(own, &n_own, "DLAUNCH_JOB_ID", "%s", e->job_id);
	set(own, &n_own, "DLAUNCH_ROUND", "%llu", (unsigned long long)e->round);
	set(own, &n_own, "DLAUNCH_NODE_ID", "%s", e->node_id);
	if (e->progress_file)
		set(own, &n_own, "DLAUNCH_PROGRESS_FILE", "%s",
		    e->progress_file);
	old_path = base_value(base, "PYTHONPATH");
	/* a PYTHONPATH set but empty, or one too long to carry ours too,
	 * is left alone: no Python stacks on SIGUSR2 then */
	if (e->site_dir && e->pystack_file && (!old_path || *old_path) &&
	    strlen(e->site_dir) + (old_path ? strlen(old_path) : 0) + 2 <
		sizeof(own[0].value)) {
		/* the sitecustomize puts the old value back in os.environ */
		set(own, &n_own, "PYTHONPATH", "%s%s%s", e->site_dir,
		    old_path ? ":" : "", old_path ? old_path : "");
		set(own, &n_own, "DLAUNCH_PYSTACK_FILE", "%s", e->pystack_file);
	}
	if (e->control_fd > 2) {
		set(own, &n_own, "DLAUNCH_CONTROL_FD", "%d", e->control_fd);
		set(own, &n_own, "DLAUNCH_CONTROL_VERSION", "%u",
		    e->control_version);
	}

	while (base && base[n_base])
		n_base++;
	env = calloc(n_base + (size_t)n_own + 1, sizeof(*env));
	if (!env)
		return DL_ENOMEM;
	for (size_t b = 0; b < n_base; b++) {
		int replaced = 0;
		for (i = 0; i < n_own; i++)
			if (has_name(base[b], own[i].name))
				replaced = 1;
		/* the agent's own channel (a dlaunch run by a worker) is
		 * no channel of this worker's */
		if (replaced || has_name(base[b], "DLAUNCH_CONTROL_FD") ||
		    has_name(base[b], "DLAUNCH_CONTROL_VERSION"))
			continue;
		env[k] = strdup(base[b]);
		if (!env[k])
			goto nomem;
		k++;
	}
	for (i = 0; i < n_own; i++) {
		size_t len = strlen(own[i].name) + strlen(own[i].value) + 2;
		env[k] = malloc(len);
		if (!env[k])
			goto nomem;
		snprintf(env[k], len, "%s=%s", own[i].name, own[i].value);
		k++;
	}
	env[k] = NULL;
	*out = env;
	return 0;
nomem:
	agent_env_free(env);
	return DL_ENOMEM;
}

void agent_env_free(char **env)
{
	if (!env)
		return;
	for (char **p = env; *p; p++)
		free(*p);
	free(env);
}
