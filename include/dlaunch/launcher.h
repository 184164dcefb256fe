/*
 * launcher.h - dlaunch's command line: torchrun-compatible options.
 *
 * Options take torchrun's names in both spellings (--nproc-per-node,
 * --nproc_per_node), "--opt value" or "--opt=value", and fall back to the
 * PET_* environment variables torchrun reads (PET_NPROC_PER_NODE, ...).
 * Parsing stops at the first argument that is not an option: the worker
 * program and its arguments.
 */
#ifndef DLAUNCH_LAUNCHER_H
#define DLAUNCH_LAUNCHER_H
#include <stddef.h>
#include <stdint.h>

#include "dlaunch/agent.h"

#define LAUNCHER_MAX_SIGNALS 16

struct launcher_options {
	int help;
	int standalone;
	int min_nodes, max_nodes;
	const char *nproc_spec;	  /* N, gpu, cpu or auto */
	int nproc;		  /* resolved */
	const char *rdzv_backend; /* static, c10d or dlaunch */
	const char *rdzv_endpoint;
	const char *rdzv_id;
	/* --rdzv-conf */
	uint64_t join_timeout_ms, last_call_timeout_ms;
	uint64_t heartbeat_interval_ms, heartbeat_timeout_ms, read_timeout_ms;
	char node_id[129];
	/* --progress-timeout (or --rdzv-conf progress_timeout); 0: off */
	uint64_t progress_timeout_ms;
	int max_restarts;
	uint64_t shutdown_timeout_ms;
	const char *role;
	int module;
	int no_python;
	const char *python;
	const char *log_dir;
	struct agent_std_spec redirects, tee;
	int ranks_filter[256];
	int n_ranks_filter;
	int node_rank;
	const char *master_addr;
	unsigned master_port;
	const char *local_addr;
	const char *token_file;
	const char *ca_file;
	int signals[LAUNCHER_MAX_SIGNALS + 1]; /* 0-terminated */
	char **program; /* program and its arguments; borrowed */
	int n_program;
};

/*
 * launcher_parse_options reads argv (argv[0] is dlaunch) and the PET_*
 * variables of envp into o. Returns 0, or DL_EINVAL with a message naming
 * the option in err (a usage error: exit status 2).
 */
int launcher_parse_options(int argc, char **argv, char **envp,
			   struct launcher_options *o, char *err,
			   size_t err_size);

/* launcher_usage prints every option with its default to fp (a FILE *). */
void launcher_usage(void *fp);

/* launcher_count_gpus counts NVIDIA GPUs from /proc and /dev (no CUDA
 * needed); 0 when none. */
int launcher_count_gpus(void);

/* launcher_worker_argv builds the command run for each worker: `python3
 * -u script args` for *.py (PYTHON_EXEC or --python override python3),
 * `python3 -u -m module args` with -m, else the program as given. Returns
 * a new NULL-terminated array (free the array only; strings are borrowed
 * from o and env) or NULL. */
char **launcher_worker_argv(const struct launcher_options *o,
			    const char *python_exec);

/* status_main runs `dlaunch status ...` (argv[0] is "status"); returns the
 * exit status. */
int status_main(int argc, char **argv);

#endif
