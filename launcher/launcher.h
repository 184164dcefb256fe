/* SPDX-License-Identifier: Apache-2.0 */
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
#include <stdio.h>

#include "dlaunch/agent.h"
#include "dlaunch/parse.h"

#define LAUNCHER_MAX_SIGNALS  16
#define LAUNCHER_MAX_RANKS    256  /* --local-ranks-filter entries */
#define LAUNCHER_CONF_MAX     2048 /* --rdzv-conf, all keys together */
#define LAUNCHER_PASSWORD_MAX 4096 /* bytes of an etcd password_file */

struct opt_table;

/* --nproc-per-node: a number (in cfg.nproc) or one of these */
enum launcher_nproc {
	LAUNCHER_NPROC_N = 0,
	LAUNCHER_NPROC_GPU,
	LAUNCHER_NPROC_CPU,
	LAUNCHER_NPROC_AUTO,
};

/* --rdzv-backend (c10d is taken as dlaunch; etcd-v1, etcd-v2 and etcd-v3
 * are all LAUNCHER_BACKEND_ETCD) */
enum launcher_backend {
	LAUNCHER_BACKEND_STATIC = 0,
	LAUNCHER_BACKEND_C10D,
	LAUNCHER_BACKEND_DLAUNCH,
	LAUNCHER_BACKEND_ETCD,
};

/* What --rdzv-conf's etcd keys hold; cfg.etcd's strings point here (or to
 * constants). The files are checked readable when the key is read, and
 * password_file is read then: password holds its content. */
struct launcher_etcd_conf {
	char cacert[LAUNCHER_CONF_MAX];
	char cert[LAUNCHER_CONF_MAX];
	char key[LAUNCHER_CONF_MAX];
	char username[256];
	char password[LAUNCHER_PASSWORD_MAX + 1];
	char key_prefix[256];
	unsigned given; /* bit i: the i-th etcd key of --rdzv-conf was given */
};

/*
 * What dlaunch's command line sets. The agent's settings are parsed
 * straight into cfg (its defaults are agent_config_init's); the rest is
 * the launcher's own. cfg.node_id, cfg.ranks_filter, cfg.signals and
 * cfg.etcd's strings point into this struct, so it is not copied.
 */
struct launcher_options {
	struct agent_config cfg;
	int help;
	int standalone;
	int nproc_kind;	  /* enum launcher_nproc; LAUNCHER_NPROC_N: cfg.nproc */
	int rdzv_backend; /* enum launcher_backend */
	int module;
	int no_python;
	int run_path; /* --run-path: the program is a Python script */
	const char *python;
	const char *token_file;		  /* read into cfg.token by main */
	double monitor_interval_s;	  /* accepted for torchrun; unused */
	int start_method;		  /* accepted for torchrun; unused */
	char node_id[PARSE_NAME_MAX + 1]; /* --rdzv-conf node_id; "": default */
	struct launcher_etcd_conf etcd;	  /* --rdzv-conf's etcd keys */
	int ranks_filter[LAUNCHER_MAX_RANKS];
	int signals[LAUNCHER_MAX_SIGNALS + 1]; /* 0-terminated */
	char **program; /* program and its arguments; borrowed */
	int n_program;
};

/* launcher_options_init fills o with the defaults (those --help shows). */
void launcher_options_init(struct launcher_options *o);

/* launcher_option_table is dlaunch's option table (dlaunch/opt.h), whose
 * fields are those of struct launcher_options. */
const struct opt_table *launcher_option_table(void);

/*
 * launcher_parse_options fills o with the defaults, then reads the PET_*
 * variables of envp and argv (argv[0] is dlaunch) into it, and checks the
 * options against each other: with --rdzv-backend etcd the endpoint list is
 * parsed (agent_etcd_endpoints_parse), --rdzv-conf's cacert, cert and key
 * must be readable files and its password_file is read into o. Returns 0,
 * or DL_EINVAL with a message naming the option in err (a usage error: exit
 * status 2).
 */
int launcher_parse_options(int argc, char **argv, char **envp,
			   struct launcher_options *o, char *err,
			   size_t err_size);

/* launcher_usage prints --help: every option with its default. */
void launcher_usage(FILE *fp);

#define LAUNCHER_MAX_GPUS 64

/* launcher_visible_gpus: how many of the present GPUs a process may use
 * with CUDA_VISIBLE_DEVICES = visible (NULL: unset, all of them), read as
 * CUDA does: indices and GPU-/MIG- UUIDs up to the first item that is not
 * a device (so "" and Slurm's "NoDevFiles" give 0). Pure. */
int launcher_visible_gpus(int present, const char *visible);

/* launcher_count_gpus counts the NVIDIA GPUs this job may use: those of
 * /proc/driver/nvidia (or /dev, no CUDA needed) narrowed by
 * CUDA_VISIBLE_DEVICES; 0 when none. */
int launcher_count_gpus(void);

/* launcher_count_cpus: the CPUs this process may run on (its affinity,
 * which a scheduler's cpuset narrows), at most AGENT_MAX_NPROC. */
int launcher_count_cpus(void);

/* launcher_worker_argv builds the command run for each worker: `python3
 * -u script args` for *.py, and for any script with --run-path (even with
 * --no-python, as in torchrun), `python3 -u -m module args` with -m (where
 * PYTHON_EXEC or --python replace python3), else the program as given.
 * Returns a new NULL-terminated array (free the array only; strings are
 * borrowed from o and env) or NULL. */
char **launcher_worker_argv(const struct launcher_options *o,
			    const char *python_exec);

/* status_main runs `dlaunch status ...` (argv[0] is "status"); returns the
 * exit status. */
int status_main(int argc, char **argv);
/* dump_main runs `dlaunch dump ...` (argv[0] is "dump"): the hang report
 * of a live job (docs/hangs.md); returns the exit status */
int dump_main(int argc, char **argv);

#endif
