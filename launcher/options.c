/*
 * options.c - dlaunch's command line (see dlaunch/launcher.h).
 *
 * One table lists every option: its name, whether it takes a value, its
 * default and its help text, so parsing, PET_* lookup and --help cannot
 * drift apart. Options torchrun has but dlaunch does not support are in
 * the table too, and refused with a message naming them.
 */
#include <dirent.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "dlaunch/error.h"
#include "dlaunch/launcher.h"
#include "dlaunch/parse.h"
#include "dlaunch/spawn.h"

enum opt_id {
	OPT_HELP,
	OPT_NNODES,
	OPT_NPROC,
	OPT_RDZV_BACKEND,
	OPT_RDZV_ENDPOINT,
	OPT_RDZV_ID,
	OPT_RDZV_CONF,
	OPT_STANDALONE,
	OPT_MAX_RESTARTS,
	OPT_SHUTDOWN_TIMEOUT,
	OPT_PROGRESS_TIMEOUT,
	OPT_MONITOR_INTERVAL,
	OPT_START_METHOD,
	OPT_ROLE,
	OPT_MODULE,
	OPT_NO_PYTHON,
	OPT_PYTHON,
	OPT_RUN_PATH,
	OPT_LOG_DIR,
	OPT_REDIRECTS,
	OPT_TEE,
	OPT_LOCAL_RANKS_FILTER,
	OPT_LOGS_SPECS,
	OPT_NODE_RANK,
	OPT_MASTER_ADDR,
	OPT_MASTER_PORT,
	OPT_LOCAL_ADDR,
	OPT_SIGNALS,
	OPT_TOKEN_FILE,
	OPT_CA,
};

struct opt {
	const char *name; /* dashed spelling; underscores are accepted too */
	char short_name;
	int has_arg;
	enum opt_id id;
	const char *metavar;
	const char *def;  /* default shown by --help (NULL: none) */
	const char *help; /* NULL: refused (torchrun has it, dlaunch not) */
};

static const struct opt opts[] = {
    {"help", 'h', 0, OPT_HELP, NULL, NULL, "show this help and exit"},
    {"nnodes", 0, 1, OPT_NNODES, "N|MIN:MAX", "1:1",
     "number of nodes, or the range the job may run with"},
    {"nproc-per-node", 0, 1, OPT_NPROC, "N|gpu|cpu|auto", "1",
     "workers on this node; gpu: one per NVIDIA GPU, cpu: one per CPU, "
     "auto: gpu when there are GPUs, else cpu"},
    {"rdzv-backend", 0, 1, OPT_RDZV_BACKEND, "NAME", "static",
     "static (no server), or c10d/dlaunch: the dlaunch-rdzv server at "
     "--rdzv-endpoint (c10d is taken as dlaunch; etcd is not supported)"},
    {"rdzv-endpoint", 0, 1, OPT_RDZV_ENDPOINT, "HOST:PORT|URL", NULL,
     "the dlaunch-rdzv server (port 29400 when omitted; https:// or "
     "--rdzv-ca for TLS)"},
    {"rdzv-id", 0, 1, OPT_RDZV_ID, "ID", "none",
     "the job's name; every node of the job uses the same"},
    {"rdzv-conf", 0, 1, OPT_RDZV_CONF, "K=V,...", NULL,
     "join_timeout (600), last_call_timeout (5), heartbeat_interval (1), "
     "heartbeat_timeout (5), read_timeout (60), progress_timeout (0, as "
     "--progress-timeout): seconds, fractions or a unit such as 500ms "
     "allowed; node_id (DLAUNCH_NODE_ID, else HOST-PID)"},
    {"standalone", 0, 0, OPT_STANDALONE, NULL, NULL,
     "single node: run an embedded rendezvous on 127.0.0.1 at a free "
     "port (no server to start)"},
    {"max-restarts", 0, 1, OPT_MAX_RESTARTS, "N", "0",
     "restarts of the worker group (job-wide) before the job fails"},
    {"shutdown-timeout", 0, 1, OPT_SHUTDOWN_TIMEOUT, "DURATION", "30",
     "grace between SIGTERM and SIGKILL when stopping workers"},
    {"progress-timeout", 0, 1, OPT_PROGRESS_TIMEOUT, "DURATION", "0: off",
     "take a worker that shows no progress for this long as hung: it is "
     "reported as failed, its group stopped and restarted; progress is "
     "any output on stdout/stderr or a touch of $DLAUNCH_PROGRESS_FILE"},
    {"monitor-interval", 0, 1, OPT_MONITOR_INTERVAL, "SECONDS", "5",
     "accepted for torchrun compatibility; dlaunch learns of worker "
     "exits at once (SIGCHLD), so it has no effect"},
    {"start-method", 0, 1, OPT_START_METHOD, "spawn|fork|forkserver", "spawn",
     "accepted for torchrun compatibility; workers are always started "
     "as new processes (fork and exec)"},
    {"role", 0, 1, OPT_ROLE, "NAME", "default", "ROLE_NAME of the workers"},
    {"module", 'm', 0, OPT_MODULE, NULL, NULL,
     "run the program as a python module (python3 -u -m MODULE)"},
    {"no-python", 0, 0, OPT_NO_PYTHON, NULL, NULL,
     "run the program as given, even a *.py"},
    {"python", 0, 1, OPT_PYTHON, "PATH", "$PYTHON_EXEC or python3",
     "interpreter for *.py programs and -m"},
    {"run-path", 0, 0, OPT_RUN_PATH, NULL, NULL, NULL},
    {"log-dir", 0, 1, OPT_LOG_DIR, "DIR", "a temporary directory",
     "keeps attempt_K/rank_R/{stdout,stderr}.log and error.json of "
     "every worker (the console shows output unless --redirects)"},
    {"redirects", 'r', 1, OPT_REDIRECTS, "MODE|LR:MODE,...", "0",
     "send workers' output only to the log files: 1 stdout, 2 stderr, "
     "3 both; for all local ranks or per local rank"},
    {"tee", 't', 1, OPT_TEE, "MODE|LR:MODE,...", "0",
     "like --redirects, but also to the console"},
    {"local-ranks-filter", 0, 1, OPT_LOCAL_RANKS_FILTER, "LR,...", "all",
     "show only these local ranks' output on the console"},
    {"logs-specs", 0, 1, OPT_LOGS_SPECS, NULL, NULL, NULL},
    {"node-rank", 0, 1, OPT_NODE_RANK, "R", "0",
     "static mode: this node's rank"},
    {"master-addr", 0, 1, OPT_MASTER_ADDR, "ADDR", "127.0.0.1",
     "static mode: address of node rank 0"},
    {"master-port", 0, 1, OPT_MASTER_PORT, "PORT", "29500",
     "static mode: port on node rank 0"},
    {"local-addr", 0, 1, OPT_LOCAL_ADDR, "ADDR",
     "the address that reaches the server",
     "address other nodes reach this node at (MASTER_ADDR when it is "
     "node rank 0)"},
    {"signals-to-handle", 0, 1, OPT_SIGNALS, "SIG,...",
     "SIGTERM,SIGINT,SIGHUP,SIGQUIT",
     "signals forwarded to the workers, after which dlaunch leaves the "
     "job and exits 128+signal"},
    {"rdzv-token-file", 0, 1, OPT_TOKEN_FILE, "FILE", NULL,
     "bearer token for a dlaunch-rdzv started with --token-file"},
    {"rdzv-ca", 0, 1, OPT_CA, "FILE", NULL,
     "CA certificate to verify a TLS dlaunch-rdzv (implies https)"},
};

#define N_OPTS (sizeof(opts) / sizeof(opts[0]))
/* the longest timeout --rdzv-conf and --progress-timeout take: a week */
#define DURATION_MAX_MS (86400000ULL * 7)

/* same_name compares an option name allowing '_' for '-'. */
static int same_name(const char *given, size_t len, const char *name)
{
	size_t i;
	if (strlen(name) != len)
		return 0;
	for (i = 0; i < len; i++) {
		char c = given[i] == '_' ? '-' : given[i];
		if (c != name[i])
			return 0;
	}
	return 1;
}

static int parse_nnodes(const char *v, struct launcher_options *o, char *err,
			size_t es)
{
	char copy[64];
	char *colon;
	int lo, hi;
	if (strlen(v) >= sizeof(copy))
		return dl_errorf(err, es, DL_EINVAL,
				 "--nnodes '%s' is not N or MIN:MAX", v);
	snprintf(copy, sizeof(copy), "%s", v);
	colon = strchr(copy, ':');
	if (colon)
		*colon = '\0';
	if (parse_int(copy, 1, 65536, &lo) != 0 ||
	    parse_int(colon ? colon + 1 : copy, 1, 65536, &hi) != 0 || lo > hi)
		return dl_errorf(err, es, DL_EINVAL,
				 "--nnodes '%s' is not N or MIN:MAX with "
				 "1 <= MIN <= MAX",
				 v);
	o->min_nodes = lo;
	o->max_nodes = hi;
	return 0;
}

static int parse_rdzv_conf(const char *v, struct launcher_options *o, char *err,
			   size_t es)
{
	char copy[2048], *save = NULL, *tok;
	if (strlen(v) >= sizeof(copy))
		return dl_errorf(err, es, DL_EINVAL, "--rdzv-conf is too long");
	snprintf(copy, sizeof(copy), "%s", v);
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		uint64_t *dst = NULL, min = 1, max = DURATION_MAX_MS;
		if (!eq)
			return dl_errorf(err, es, DL_EINVAL,
					 "--rdzv-conf '%s' is not KEY=VALUE",
					 tok);
		*eq = '\0';
		const char *val = eq + 1;
		if (strcmp(tok, "join_timeout") == 0)
			dst = &o->join_timeout_ms;
		else if (strcmp(tok, "last_call_timeout") == 0)
			dst = &o->last_call_timeout_ms, min = 0;
		else if (strcmp(tok, "heartbeat_interval") == 0)
			dst = &o->heartbeat_interval_ms, min = 10;
		else if (strcmp(tok, "heartbeat_timeout") == 0)
			dst = &o->heartbeat_timeout_ms, min = 10;
		else if (strcmp(tok, "read_timeout") == 0)
			dst = &o->read_timeout_ms, min = 10;
		else if (strcmp(tok, "progress_timeout") == 0)
			dst = &o->progress_timeout_ms, min = 0;
		if (dst) {
			if (parse_duration_ms(val, 1000, min, max, dst) != 0)
				return dl_errorf(err, es, DL_EINVAL,
						 "--rdzv-conf %s='%s' is not a "
						 "duration (seconds, or with a "
						 "unit such as 500ms)",
						 tok, val);
			continue;
		}
		if (strcmp(tok, "node_id") == 0) {
			size_t n = strlen(val);
			if (n == 0 || n >= sizeof(o->node_id) ||
			    strspn(val, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijk"
					"lmnopqrstuvwxyz0123456789._:-") != n ||
			    val[0] == '.')
				return dl_errorf(
				    err, es, DL_EINVAL,
				    "--rdzv-conf node_id='%s' must be "
				    "1-128 of [A-Za-z0-9._:-], not "
				    "starting with '.'",
				    val);
			snprintf(o->node_id, sizeof(o->node_id), "%s", val);
			continue;
		}
		return dl_errorf(
		    err, es, DL_EINVAL,
		    "--rdzv-conf key '%s' is not supported (known: "
		    "join_timeout, last_call_timeout, "
		    "heartbeat_interval, heartbeat_timeout, "
		    "read_timeout, progress_timeout, node_id)",
		    tok);
	}
	return 0;
}

static int parse_signals(const char *v, struct launcher_options *o, char *err,
			 size_t es)
{
	char copy[512], *save = NULL, *tok;
	int n = 0;
	if (strlen(v) >= sizeof(copy))
		return dl_errorf(err, es, DL_EINVAL,
				 "--signals-to-handle is too long");
	snprintf(copy, sizeof(copy), "%s", v);
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		int sig;
		if (spawn_signal_parse(tok, &sig) != 0 || sig == SIGKILL ||
		    sig == SIGSTOP || sig == SIGCHLD)
			return dl_errorf(err, es, DL_EINVAL,
					 "--signals-to-handle: '%s' is not a "
					 "signal dlaunch can handle",
					 tok);
		if (n == LAUNCHER_MAX_SIGNALS)
			return dl_errorf(
			    err, es, DL_EINVAL,
			    "--signals-to-handle: more than %d signals",
			    LAUNCHER_MAX_SIGNALS);
		o->signals[n++] = sig;
	}
	o->signals[n] = 0;
	return 0;
}

static int set_opt(const struct opt *op, const char *v,
		   struct launcher_options *o, char *err, size_t es)
{
	char msg[256];
	double d;
	if (!op->help)
		return dl_errorf(err, es, DL_EINVAL,
				 "option --%s is not supported by dlaunch",
				 op->name);
	switch (op->id) {
	case OPT_HELP: o->help = 1; break;
	case OPT_NNODES: return parse_nnodes(v, o, err, es);
	case OPT_NPROC: {
		int n;
		if (strcmp(v, "gpu") && strcmp(v, "cpu") && strcmp(v, "auto") &&
		    parse_int(v, 1, AGENT_MAX_NPROC, &n) != 0)
			return dl_errorf(
			    err, es, DL_EINVAL,
			    "--nproc-per-node '%s' is not 1-%d, gpu, "
			    "cpu or auto",
			    v, AGENT_MAX_NPROC);
		o->nproc_spec = v;
		break;
	}
	case OPT_RDZV_BACKEND:
		if (strcmp(v, "static") && strcmp(v, "c10d") &&
		    strcmp(v, "dlaunch"))
			return dl_errorf(err, es, DL_EINVAL,
					 "--rdzv-backend '%s' is not supported "
					 "(static, c10d or dlaunch)",
					 v);
		o->rdzv_backend = v;
		break;
	case OPT_RDZV_ENDPOINT: o->rdzv_endpoint = *v ? v : NULL; break;
	case OPT_RDZV_ID: {
		size_t n = strlen(v);
		if (n == 0 || n > 128 || v[0] == '.' ||
		    strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstu"
			      "vwxyz0123456789._:-") != n)
			return dl_errorf(
			    err, es, DL_EINVAL,
			    "--rdzv-id '%s' must be 1-128 of "
			    "[A-Za-z0-9._:-], not starting with '.'",
			    v);
		o->rdzv_id = v;
		break;
	}
	case OPT_RDZV_CONF: return parse_rdzv_conf(v, o, err, es);
	case OPT_STANDALONE: o->standalone = 1; break;
	case OPT_MAX_RESTARTS:
		if (parse_int(v, 0, 1000000, &o->max_restarts) != 0)
			return dl_errorf(err, es, DL_EINVAL,
					 "--max-restarts '%s' is not 0-1000000",
					 v);
		break;
	case OPT_SHUTDOWN_TIMEOUT:
		if (parse_duration_ms(v, 1000, 0, 86400000,
				      &o->shutdown_timeout_ms) != 0)
			return dl_errorf(
			    err, es, DL_EINVAL,
			    "--shutdown-timeout '%s' is not a duration", v);
		break;
	case OPT_PROGRESS_TIMEOUT:
		if (parse_duration_ms(v, 1000, 0, DURATION_MAX_MS,
				      &o->progress_timeout_ms) != 0)
			return dl_errorf(err, es, DL_EINVAL,
					 "--progress-timeout '%s' is not a "
					 "duration (seconds, or with a unit "
					 "such as 500ms; 0: off)",
					 v);
		break;
	case OPT_MONITOR_INTERVAL:
		if (parse_double(v, 0, 86400, &d) != 0)
			return dl_errorf(
			    err, es, DL_EINVAL,
			    "--monitor-interval '%s' is not a number of "
			    "seconds",
			    v);
		break;
	case OPT_START_METHOD:
		if (strcmp(v, "spawn") && strcmp(v, "fork") &&
		    strcmp(v, "forkserver"))
			return dl_errorf(
			    err, es, DL_EINVAL,
			    "--start-method '%s' is not spawn, fork or "
			    "forkserver",
			    v);
		break;
	case OPT_ROLE:
		if (!*v || strlen(v) > 128)
			return dl_errorf(err, es, DL_EINVAL,
					 "--role must be 1-128 bytes");
		o->role = v;
		break;
	case OPT_MODULE: o->module = 1; break;
	case OPT_NO_PYTHON: o->no_python = 1; break;
	case OPT_PYTHON: o->python = v; break;
	case OPT_LOG_DIR: o->log_dir = *v ? v : NULL; break;
	case OPT_REDIRECTS:
	case OPT_TEE:
		if (agent_std_parse(v,
				    op->id == OPT_TEE ? &o->tee : &o->redirects,
				    msg, sizeof(msg)) != 0)
			return dl_errorf(err, es, DL_EINVAL, "--%s: %s",
					 op->name, msg);
		break;
	case OPT_LOCAL_RANKS_FILTER:
		if (agent_ranks_parse(v, o->ranks_filter, 256,
				      &o->n_ranks_filter, msg,
				      sizeof(msg)) != 0)
			return dl_errorf(err, es, DL_EINVAL,
					 "--local-ranks-filter: %s", msg);
		break;
	case OPT_NODE_RANK:
		if (parse_int(v, 0, 65535, &o->node_rank) != 0)
			return dl_errorf(err, es, DL_EINVAL,
					 "--node-rank '%s' is not 0-65535", v);
		break;
	case OPT_MASTER_ADDR:
		if (!*v || strlen(v) > 255)
			return dl_errorf(err, es, DL_EINVAL,
					 "--master-addr must be 1-255 bytes");
		o->master_addr = v;
		break;
	case OPT_MASTER_PORT: {
		int p;
		if (parse_int(v, 1, 65535, &p) != 0)
			return dl_errorf(err, es, DL_EINVAL,
					 "--master-port '%s' is not 1-65535",
					 v);
		o->master_port = (unsigned)p;
		break;
	}
	case OPT_LOCAL_ADDR:
		if (!*v || strlen(v) > 255)
			return dl_errorf(err, es, DL_EINVAL,
					 "--local-addr must be 1-255 bytes");
		o->local_addr = v;
		break;
	case OPT_SIGNALS: return parse_signals(v, o, err, es);
	case OPT_TOKEN_FILE: o->token_file = v; break;
	case OPT_CA: o->ca_file = v; break;
	case OPT_RUN_PATH:
	case OPT_LOGS_SPECS: break; /* refused above */
	}
	return 0;
}

static void defaults(struct launcher_options *o)
{
	memset(o, 0, sizeof(*o));
	o->min_nodes = o->max_nodes = 1;
	o->nproc_spec = "1";
	o->rdzv_backend = "static";
	o->rdzv_id = "none";
	o->join_timeout_ms = 600000;
	o->last_call_timeout_ms = 5000;
	o->heartbeat_interval_ms = 1000;
	o->heartbeat_timeout_ms = 5000;
	o->read_timeout_ms = 60000;
	o->shutdown_timeout_ms = 30000;
	o->role = "default";
	o->redirects.all = -1;
	o->tee.all = -1;
	o->master_addr = "127.0.0.1";
	o->master_port = 29500;
	o->signals[0] = SIGTERM;
	o->signals[1] = SIGINT;
	o->signals[2] = SIGHUP;
	o->signals[3] = SIGQUIT;
	o->signals[4] = 0;
}

/* pet_name: "PET_" + the option's name upper-cased with '_' for '-'. */
static void pet_name(const char *name, char *out, size_t size)
{
	size_t k = (size_t)snprintf(out, size, "PET_");
	for (; *name && k + 1 < size; name++)
		out[k++] = *name == '-' ? '_'
					: (char)(*name >= 'a' && *name <= 'z'
						     ? *name - 32
						     : *name);
	out[k] = '\0';
}

static const char *env_get(char **envp, const char *name)
{
	size_t n = strlen(name);
	for (; envp && *envp; envp++)
		if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
			return *envp + n + 1;
	return NULL;
}

int launcher_parse_options(int argc, char **argv, char **envp,
			   struct launcher_options *o, char *err,
			   size_t err_size)
{
	char pet[64];
	size_t i;
	int k, rc;

	defaults(o);
	/* PET_* first: the command line overrides them; a refused option
	 * is refused from its variable too (set_opt names it) */
	for (i = 0; i < N_OPTS; i++) {
		const char *v;
		if (opts[i].id == OPT_HELP)
			continue;
		pet_name(opts[i].name, pet, sizeof(pet));
		v = env_get(envp, pet);
		if (!v)
			continue;
		if (!opts[i].has_arg) {
			int on;
			if (parse_bool(v, &on) != 0)
				return dl_errorf(err, err_size, DL_EINVAL,
						 "%s='%s' is not true or false",
						 pet, v);
			if (!on)
				continue;
		}
		rc = set_opt(&opts[i], v, o, err, err_size);
		if (rc) {
			char inner[256];
			snprintf(inner, sizeof(inner), "%s", err);
			return dl_errorf(err, err_size, DL_EINVAL,
					 "%s (from %s)", inner, pet);
		}
	}
	for (k = 1; k < argc; k++) {
		const char *arg = argv[k], *val = NULL, *name;
		const struct opt *op = NULL;
		size_t len;
		if (strcmp(arg, "--") == 0) {
			k++;
			break;
		}
		if (arg[0] != '-' || arg[1] == '\0')
			break;
		if (arg[1] != '-') {
			/* short: -m, -r VALUE, -rVALUE, -h */
			for (i = 0; i < N_OPTS; i++)
				if (opts[i].short_name == arg[1])
					op = &opts[i];
			if (!op)
				return dl_errorf(err, err_size, DL_EINVAL,
						 "unknown option '%s' (dlaunch "
						 "--help lists the options)",
						 arg);
			if (op->has_arg && arg[2])
				val = arg + 2;
			else if (!op->has_arg && arg[2])
				return dl_errorf(err, err_size, DL_EINVAL,
						 "option -%c takes no value",
						 arg[1]);
		} else {
			name = arg + 2;
			const char *eq = strchr(name, '=');
			len = eq ? (size_t)(eq - name) : strlen(name);
			for (i = 0; i < N_OPTS; i++)
				if (same_name(name, len, opts[i].name))
					op = &opts[i];
			if (!op)
				return dl_errorf(
				    err, err_size, DL_EINVAL,
				    "unknown option '--%.*s' (dlaunch "
				    "--help lists the options)",
				    (int)len, name);
			if (eq) {
				if (!op->has_arg)
					return dl_errorf(err, err_size,
							 DL_EINVAL,
							 "option --%s takes no "
							 "value",
							 op->name);
				val = eq + 1;
			}
		}
		if (op->has_arg && !val) {
			if (k + 1 >= argc)
				return dl_errorf(
				    err, err_size, DL_EINVAL,
				    "option --%s needs a value (%s)", op->name,
				    op->metavar);
			val = argv[++k];
		}
		rc = set_opt(op, val, o, err, err_size);
		if (rc)
			return rc;
		if (o->help)
			return 0;
	}
	o->program = argv + k;
	o->n_program = argc - k;
	if (o->n_program == 0)
		return dl_errorf(err, err_size, DL_EINVAL,
				 "no program to run (dlaunch [OPTIONS] PROGRAM "
				 "[ARGS...]; see dlaunch --help)");
	if (o->module && o->no_python)
		return dl_errorf(
		    err, err_size, DL_EINVAL,
		    "-m/--module and --no-python exclude each other");
	if (o->standalone && (o->min_nodes != 1 || o->max_nodes != 1))
		return dl_errorf(
		    err, err_size, DL_EINVAL,
		    "--standalone runs a single node; --nnodes must "
		    "be 1");
	if (o->standalone && o->rdzv_endpoint)
		return dl_errorf(err, err_size, DL_EINVAL,
				 "--standalone runs its own rendezvous; drop "
				 "--rdzv-endpoint");
	if (o->rdzv_endpoint && strcmp(o->rdzv_backend, "static") == 0)
		o->rdzv_backend = "dlaunch";
	if (!o->standalone && strcmp(o->rdzv_backend, "static") != 0 &&
	    !o->rdzv_endpoint)
		return dl_errorf(err, err_size, DL_EINVAL,
				 "--rdzv-backend %s needs --rdzv-endpoint",
				 o->rdzv_backend);
	if (!o->standalone && !o->rdzv_endpoint) {
		if (o->min_nodes != o->max_nodes)
			return dl_errorf(err, err_size, DL_EINVAL,
					 "--nnodes %d:%d needs a rendezvous "
					 "(--rdzv-endpoint); static mode takes "
					 "a fixed number of nodes",
					 o->min_nodes, o->max_nodes);
		if (o->node_rank >= o->max_nodes)
			return dl_errorf(
			    err, err_size, DL_EINVAL,
			    "--node-rank %d is not below --nnodes %d",
			    o->node_rank, o->max_nodes);
	}
	if (o->heartbeat_timeout_ms <= o->heartbeat_interval_ms)
		return dl_errorf(err, err_size, DL_EINVAL,
				 "--rdzv-conf heartbeat_timeout must exceed "
				 "heartbeat_interval");
	return 0;
}

int launcher_count_gpus(void)
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
	for (int i = 0; i < 64; i++) {
		char path[32];
		snprintf(path, sizeof(path), "/dev/nvidia%d", i);
		if (access(path, F_OK) == 0)
			n++;
	}
	return n;
}

char **launcher_worker_argv(const struct launcher_options *o,
			    const char *python_exec)
{
	const char *prog = o->program[0];
	size_t len = strlen(prog);
	int python =
	    !o->no_python &&
	    (o->module || (len > 3 && strcmp(prog + len - 3, ".py") == 0));
	int n = 0, i;
	char **argv = calloc((size_t)o->n_program + 4, sizeof(*argv));
	if (!argv)
		return NULL;
	if (python) {
		argv[n++] = (char *)(o->python			   ? o->python
				     : python_exec && *python_exec ? python_exec
								   : "python3");
		argv[n++] = (char *)"-u";
		if (o->module)
			argv[n++] = (char *)"-m";
	}
	for (i = 0; i < o->n_program; i++)
		argv[n++] = o->program[i];
	argv[n] = NULL;
	return argv;
}

void launcher_usage(void *fpv)
{
	FILE *fp = fpv;
	size_t i;
	fprintf(
	    fp,
	    "usage: dlaunch [OPTIONS] PROGRAM [ARGS...]\n"
	    "       dlaunch status --rdzv-endpoint HOST:PORT [--rdzv-id ID]\n"
	    "\n"
	    "Runs PROGRAM as --nproc-per-node workers on this node, as part "
	    "of a job\nthat may span nodes, with the environment torchrun "
	    "gives its workers\n(RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, "
	    "...). A *.py PROGRAM runs\nunder python3 -u. Modes: "
	    "--standalone (one node, embedded rendezvous),\n"
	    "--rdzv-endpoint (a dlaunch-rdzv server), or static "
	    "(--nnodes N --node-rank R\n--master-addr A --master-port P, "
	    "no server).\n\n"
	    "Options (torchrun's names; '_' may replace '-'; each also "
	    "read from\nPET_<NAME>, e.g. PET_NPROC_PER_NODE):\n");
	for (i = 0; i < N_OPTS; i++) {
		char head[96];
		if (!opts[i].help)
			continue;
		if (opts[i].short_name)
			snprintf(head, sizeof(head), "-%c, --%s%s%s",
				 opts[i].short_name, opts[i].name,
				 opts[i].metavar ? " " : "",
				 opts[i].metavar ? opts[i].metavar : "");
		else
			snprintf(head, sizeof(head), "--%s%s%s", opts[i].name,
				 opts[i].metavar ? " " : "",
				 opts[i].metavar ? opts[i].metavar : "");
		fprintf(fp, "  %s\n      %s", head, opts[i].help);
		if (opts[i].def)
			fprintf(fp, " (default: %s)", opts[i].def);
		fprintf(fp, "\n");
	}
	fprintf(fp, "\nNot supported (refused): --run-path, --logs-specs, "
		    "etcd rendezvous backends.\n"
		    "Exit status: 0 job succeeded, 1 job failed (after the "
		    "root-cause report),\n2 usage error, 128+N stopped by "
		    "signal N.\n");
}
