/* SPDX-License-Identifier: Apache-2.0 */
/*
 * options.c - dlaunch's command line (see dlaunch/launcher.h).
 *
 * One table (dlaunch/opt.h) lists every option: its names, the field of
 * struct launcher_options it fills (the agent's settings go straight into
 * its agent_config), its PET_* variable, metavar and help line. The
 * defaults are launcher_options_init's (agent_config_init for the agent's
 * settings) and --help prints them from there. Options torchrun has but
 * dlaunch does not support are in the table too, refused by name. The
 * value of --rdzv-conf is read by rdzv_conf.c, the etcd backend's keys
 * and checks are in etcd_options.c.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlaunch/error.h"
#include "launcher.h"
#include "dlaunch/opt.h"
#include "dlaunch/parse.h"
#include "dlaunch/spawn.h"
#include "etcd_options.h"
#include "rdzv_conf.h"

#define LO(f) OPT_FIELD(struct launcher_options, f)

static struct launcher_options *lo(void *base)
{
	return base;
}

static const struct launcher_options *clo(const void *base)
{
	return base;
}

static int set_nnodes(const struct opt_spec *s, void *base, const char *v,
		      char *err, size_t es)
{
	struct agent_config *cfg = &lo(base)->cfg;
	char copy[64];
	char *colon;
	int lo_n, hi_n;
	(void)s;
	snprintf(copy, sizeof(copy), "%s", v);
	colon = strchr(copy, ':');
	if (colon)
		*colon = '\0';
	if (strlen(v) >= sizeof(copy) || parse_int(copy, 1, 65536, &lo_n) ||
	    parse_int(colon ? colon + 1 : copy, 1, 65536, &hi_n) || lo_n > hi_n)
		return dl_errorf(err, es, DL_EINVAL,
				 "--nnodes '%s' is not N or MIN:MAX with "
				 "1 <= MIN <= MAX",
				 v);
	cfg->min_nodes = lo_n;
	cfg->max_nodes = cfg->nnodes = hi_n;
	return 0;
}

static void format_nnodes(const struct opt_spec *s, const void *base, char *out,
			  size_t size)
{
	(void)s;
	snprintf(out, size, "%d:%d", clo(base)->cfg.min_nodes,
		 clo(base)->cfg.max_nodes);
}

static const char *const nproc_kinds[] = {"", "gpu", "cpu", "auto", NULL};

static int set_nproc(const struct opt_spec *s, void *base, const char *v,
		     char *err, size_t es)
{
	struct launcher_options *o = lo(base);
	(void)s;
	for (int k = LAUNCHER_NPROC_GPU; nproc_kinds[k]; k++)
		if (strcmp(v, nproc_kinds[k]) == 0) {
			o->nproc_kind = k;
			return 0;
		}
	if (parse_int(v, 1, AGENT_MAX_NPROC, &o->cfg.nproc) != 0)
		return dl_errorf(err, es, DL_EINVAL,
				 "--nproc-per-node '%s' is not 1-%d, gpu, "
				 "cpu or auto",
				 v, AGENT_MAX_NPROC);
	o->nproc_kind = LAUNCHER_NPROC_N;
	return 0;
}

static void format_nproc(const struct opt_spec *s, const void *base, char *out,
			 size_t size)
{
	const struct launcher_options *o = clo(base);
	(void)s;
	if (o->nproc_kind == LAUNCHER_NPROC_N)
		snprintf(out, size, "%d", o->cfg.nproc);
	else
		snprintf(out, size, "%s", nproc_kinds[o->nproc_kind]);
}

static int set_rdzv_conf(const struct opt_spec *s, void *base, const char *v,
			 char *err, size_t es)
{
	(void)s;
	return launcher_rdzv_conf_apply(lo(base), v, err, es);
}

static void format_rdzv_conf(const struct opt_spec *s, const void *base,
			     char *out, size_t size)
{
	(void)s;
	launcher_rdzv_conf_format(clo(base), out, size);
}

static int set_std(const struct opt_spec *s, void *base, const char *v,
		   char *err, size_t es)
{
	char msg[256];
	if (agent_std_parse(v,
			    (struct agent_std_spec *)((char *)base + s->offset),
			    msg, sizeof(msg)) != 0)
		return dl_errorf(err, es, DL_EINVAL, "--%s: %s", s->name, msg);
	return 0;
}

static int set_ranks(const struct opt_spec *s, void *base, const char *v,
		     char *err, size_t es)
{
	struct launcher_options *o = lo(base);
	char msg[256];
	(void)s;
	if (agent_ranks_parse(v, o->ranks_filter, LAUNCHER_MAX_RANKS,
			      &o->cfg.n_ranks_filter, msg, sizeof(msg)) != 0)
		return dl_errorf(err, es, DL_EINVAL, "--local-ranks-filter: %s",
				 msg);
	return 0;
}

static int set_signals(const struct opt_spec *s, void *base, const char *v,
		       char *err, size_t es)
{
	struct launcher_options *o = lo(base);
	char copy[512], *save = NULL, *tok;
	int n = 0, sig;
	(void)s;
	if (strlen(v) >= sizeof(copy))
		return dl_errorf(err, es, DL_EINVAL,
				 "--signals-to-handle is too long");
	snprintf(copy, sizeof(copy), "%s", v);
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
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
	memset(o->signals + n, 0, sizeof(o->signals) - (size_t)n * sizeof(int));
	return 0;
}

static void format_signals(const struct opt_spec *s, const void *base,
			   char *out, size_t size)
{
	const int *sig = clo(base)->signals;
	size_t k = 0;
	(void)s;
	out[0] = '\0';
	for (int i = 0; sig[i] && k < size; i++) {
		char tmp[16];
		k += (size_t)snprintf(
		    out + k, size - k, "%s%s", i ? "," : "",
		    spawn_signal_name(sig[i], tmp, sizeof(tmp)));
	}
}

/* --rdzv-backend's names (what it accepts, and the words completion
 * offers) and, at the same index, the backend each means; the first name
 * of each backend is the one shown. torchrun's etcd backends are all
 * taken as dlaunch's etcd backend (etcd's v3 API), so their command lines
 * work unchanged. */
static const char *const backend_words[] = {
    "static", "c10d", "dlaunch", "etcd", "etcd-v1", "etcd-v2", "etcd-v3", NULL};
static const struct backend_name {
	enum launcher_backend backend;
	enum agent_mode mode; /* with --rdzv-endpoint */
} backend_names[] = {
    {LAUNCHER_BACKEND_STATIC, AGENT_MODE_STATIC},
    {LAUNCHER_BACKEND_C10D, AGENT_MODE_RDZV},
    {LAUNCHER_BACKEND_DLAUNCH, AGENT_MODE_RDZV},
    {LAUNCHER_BACKEND_ETCD, AGENT_MODE_ETCD},
    {LAUNCHER_BACKEND_ETCD, AGENT_MODE_ETCD},
    {LAUNCHER_BACKEND_ETCD, AGENT_MODE_ETCD},
    {LAUNCHER_BACKEND_ETCD, AGENT_MODE_ETCD},
};
#define N_BACKEND_NAMES (sizeof(backend_names) / sizeof(backend_names[0]))
_Static_assert(sizeof(backend_words) / sizeof(backend_words[0]) ==
		   N_BACKEND_NAMES + 1,
	       "one backend for each --rdzv-backend name");

/* backend_index: the index of the first name of backend */
static size_t backend_index(int backend)
{
	size_t i;
	for (i = 0; i + 1 < N_BACKEND_NAMES; i++)
		if ((int)backend_names[i].backend == backend)
			break;
	return i;
}

static int set_backend(const struct opt_spec *s, void *base, const char *v,
		       char *err, size_t es)
{
	char list[256];
	size_t n = 0;
	for (size_t i = 0; i < N_BACKEND_NAMES; i++) {
		if (strcmp(v, backend_words[i]) == 0) {
			lo(base)->rdzv_backend = (int)backend_names[i].backend;
			return 0;
		}
		n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s",
				      i == 0			 ? ""
				      : i + 1 == N_BACKEND_NAMES ? " or "
								 : ", ",
				      backend_words[i]);
	}
	return dl_errorf(err, es, DL_EINVAL, "--%s '%s' is not %s", s->name, v,
			 list);
}

static void format_backend(const struct opt_spec *s, const void *base,
			   char *out, size_t size)
{
	(void)s;
	snprintf(out, size, "%s",
		 backend_words[backend_index(clo(base)->rdzv_backend)]);
}

/* the whole-group modes --redirects and --tee take (or LR:MODE,...) */
static const char *const std_modes[] = {"0", "1", "2", "3", NULL};

static const char *const start_methods[] = {"spawn", "fork", "forkserver",
					    NULL};

static const struct opt_spec launcher_specs[] = {
    {.name = "help",
     .short_name = 'h',
     .type = OPT_FLAG,
     .flags = OPT_STOP,
     LO(help),
     .help = "show this help and exit"},
    {.name = "nnodes",
     .type = OPT_CALLBACK,
     LO(cfg.nnodes),
     .set = set_nnodes,
     .format = format_nnodes,
     .env = "PET_NNODES",
     .metavar = "N|MIN:MAX",
     .help = "number of nodes, or the range the job may run with"},
    {.name = "nproc-per-node",
     .type = OPT_CALLBACK,
     LO(cfg.nproc),
     .set = set_nproc,
     .format = format_nproc,
     .choices = nproc_kinds + 1,
     .env = "PET_NPROC_PER_NODE",
     .metavar = "N|gpu|cpu|auto",
     .help = "workers on this node; gpu: one per NVIDIA GPU the job may use "
	     "(CUDA_VISIBLE_DEVICES narrows them), cpu: one per CPU it may "
	     "run on (its affinity), auto: gpu when there are GPUs, else cpu"},
    {.name = "rdzv-backend",
     .type = OPT_CALLBACK,
     LO(rdzv_backend),
     .set = set_backend,
     .format = format_backend,
     .choices = backend_words,
     .env = "PET_RDZV_BACKEND",
     .metavar = "NAME",
     .help = "static (no server); c10d or dlaunch: the dlaunch-rdzv server "
	     "at --rdzv-endpoint (c10d is taken as dlaunch); etcd (etcd-v1, "
	     "etcd-v2 and etcd-v3 are taken as etcd): the etcd cluster at "
	     "--rdzv-endpoint, through its v3 API"},
    {.name = "rdzv-endpoint",
     .type = OPT_STRING,
     .flags = OPT_EMPTY_UNSET,
     LO(cfg.endpoint),
     .env = "PET_RDZV_ENDPOINT",
     .metavar = "HOST:PORT|URL[,...]",
     .help = "the dlaunch-rdzv server (port 29400 when omitted; https:// "
	     "or --rdzv-ca for TLS); with --rdzv-backend etcd, the etcd "
	     "members, comma-separated, each HOST[:PORT], [IPV6]:PORT or "
	     "http(s)://HOST[:PORT] (port 2379 when omitted; requests fail "
	     "over between them)"},
    {.name = "rdzv-id",
     .type = OPT_NAME,
     LO(cfg.run_id),
     .max = PARSE_NAME_MAX,
     .env = "PET_RDZV_ID",
     .metavar = "ID",
     .help = "the job's name; every node of the job uses the same"},
    {.name = "rdzv-conf",
     .type = OPT_CALLBACK,
     LO(cfg.join_timeout_ms),
     .set = set_rdzv_conf,
     .format = format_rdzv_conf,
     .env = "PET_RDZV_CONF",
     .metavar = "K=V,...",
     .help =
	 "join_timeout, last_call_timeout, heartbeat_interval, "
	 "heartbeat_timeout, read_timeout, progress_timeout (as "
	 "--progress-timeout): seconds, fractions or a unit such as "
	 "500ms; node_id (DLAUNCH_NODE_ID, else HOST-PID). With "
	 "--rdzv-backend etcd also: protocol (http or https, for "
	 "endpoints without a scheme; default http), cacert (CA file), "
	 "cert and key (client certificate and key files), username and "
	 "password_file (etcd authentication; the file holds the password), "
	 "key_prefix (where the job's keys live; default /dlaunch), "
	 "lease_ttl (whole seconds, 2-3600; default heartbeat_timeout "
	 "rounded up, at least 2), rerun_after (a join this long after the "
	 "job ended starts a new run of its id, as dlaunch-rdzv "
	 "--rerun-after; default 30s, 0: never)"},
    {.name = "standalone",
     .type = OPT_FLAG,
     LO(standalone),
     .env = "PET_STANDALONE",
     .help = "single node: run an embedded rendezvous on 127.0.0.1 at a "
	     "free port (no server to start)"},
    {.name = "max-restarts",
     .type = OPT_INT,
     LO(cfg.max_restarts),
     .max = 1000000,
     .env = "PET_MAX_RESTARTS",
     .metavar = "N",
     .help = "restarts of the worker group (job-wide) before the job "
	     "fails"},
    {.name = "shutdown-timeout",
     .type = OPT_DURATION,
     LO(cfg.shutdown_timeout_ms),
     .max = 86400000,
     .env = "PET_SHUTDOWN_TIMEOUT",
     .metavar = "DURATION",
     .help = "grace between SIGTERM and SIGKILL when stopping workers; "
	     "none after a hang diagnosis' verdict: SIGKILL at once"},
    {.name = "progress-timeout",
     .type = OPT_DURATION,
     LO(cfg.progress_timeout_ms),
     .max = LAUNCHER_DURATION_MAX_MS,
     .env = "PET_PROGRESS_TIMEOUT",
     .metavar = "DURATION",
     .unset = "0: off",
     .help = "take a worker that shows no progress for this long as hung: "
	     "it is reported as failed, its group stopped and restarted; "
	     "progress is any output on stdout/stderr, a touch of "
	     "$DLAUNCH_PROGRESS_FILE or a step on the control channel; "
	     "the stacks of every rank are collected first, and the group "
	     "is then killed at once (SIGKILL, no --shutdown-timeout) "
	     "(docs/hangs.md)"},
    {.name = "hang-timeout",
     .type = OPT_DURATION,
     LO(cfg.hang_timeout_ms),
     .max = LAUNCHER_DURATION_MAX_MS,
     .env = "PET_HANG_TIMEOUT",
     .metavar = "DURATION",
     .unset = "0: off",
     .help = "take the node as stalled when no rank has moved its step "
	     "(control channel) or touched $DLAUNCH_PROGRESS_FILE for this "
	     "long, after one did: every node collects its ranks' stacks, "
	     "the report names the stuck rank, then the workers are "
	     "killed and restarted as for --progress-timeout "
	     "(docs/hangs.md)"},
    {.name = "straggler-steps",
     .type = OPT_INT,
     LO(cfg.straggler_steps),
     .max = 1000000000,
     .env = "PET_STRAGGLER_STEPS",
     .metavar = "N",
     .unset = "0: off",
     .help = "log a rank more than N steps behind the median of its "
	     "node's ranks while they move as a straggler (counted, not "
	     "stopped)"},
    {.name = "reform-timeout",
     .type = OPT_DURATION,
     LO(cfg.reform_timeout_ms),
     .min = 1,
     .max = 86400000,
     .env = "PET_REFORM_TIMEOUT",
     .metavar = "DURATION",
     .help = "bound of each step of an in-place re-form (abort to "
	     "aborted, rejoin, membership to reformed) for workers that "
	     "speak the control channel; a miss restarts the node's "
	     "workers"},
    {.name = "preempt-grace",
     .type = OPT_DURATION,
     LO(cfg.preempt_grace_ms),
     .max = 86400000,
     .env = "PET_PREEMPT_GRACE",
     .metavar = "DURATION",
     .unset = "0: off",
     .help = "on SIGTERM, when every worker of the node declared preempt, "
	     "stop the whole job at one step picked by the rendezvous: "
	     "every worker completes that step, saves it and exits 0; what "
	     "is not done within this grace is stopped as without it "
	     "(SIGTERM, --shutdown-timeout, SIGKILL); 0: off, the SIGTERM "
	     "is forwarded"},
    {.name = "monitor-interval",
     .type = OPT_DOUBLE,
     LO(monitor_interval_s),
     .dmax = 86400,
     .env = "PET_MONITOR_INTERVAL",
     .metavar = "SECONDS",
     .help = "accepted for torchrun compatibility; dlaunch learns of worker "
	     "exits at once (SIGCHLD), so it has no effect"},
    {.name = "start-method",
     .type = OPT_CHOICE,
     LO(start_method),
     .choices = start_methods,
     .env = "PET_START_METHOD",
     .metavar = "spawn|fork|forkserver",
     .help = "accepted for torchrun compatibility; workers are always "
	     "started as new processes (fork and exec)"},
    {.name = "role",
     .type = OPT_STRING,
     LO(cfg.role),
     .min = 1,
     .max = 128,
     .env = "PET_ROLE",
     .metavar = "NAME",
     .help = "ROLE_NAME of the workers"},
    {.name = "module",
     .short_name = 'm',
     .type = OPT_FLAG,
     LO(module),
     .env = "PET_MODULE",
     .help = "run the program as a python module (python3 -u -m MODULE)"},
    {.name = "no-python",
     .type = OPT_FLAG,
     LO(no_python),
     .env = "PET_NO_PYTHON",
     .help = "run the program as given, even a *.py"},
    {.name = "python",
     .type = OPT_STRING,
     LO(python),
     .env = "PET_PYTHON",
     .metavar = "PATH",
     .unset = "$PYTHON_EXEC or python3",
     .help = "interpreter for *.py programs and -m"},
    {.name = "run-path",
     .type = OPT_FLAG,
     LO(run_path),
     .env = "PET_RUN_PATH",
     .help = "run the program as a Python script whatever its name, "
	     "even with --no-python (torchrun's runpy.run_path; each worker "
	     "is a fresh python3 -u SCRIPT)"},
    {.name = "log-dir",
     .type = OPT_STRING,
     .flags = OPT_EMPTY_UNSET,
     LO(cfg.log_dir),
     .env = "PET_LOG_DIR",
     .metavar = "DIR",
     .unset = "a temporary directory",
     .help = "keeps attempt_K/rank_R/{stdout,stderr}.log and error.json of "
	     "every worker (the console shows output unless --redirects)"},
    {.name = "redirects",
     .short_name = 'r',
     .type = OPT_CALLBACK,
     LO(cfg.redirects),
     .set = set_std,
     .choices = std_modes,
     .env = "PET_REDIRECTS",
     .metavar = "MODE|LR:MODE,...",
     .unset = "0",
     .help = "send workers' output only to the log files: 1 stdout, 2 "
	     "stderr, 3 both; for all local ranks or per local rank"},
    {.name = "tee",
     .short_name = 't',
     .type = OPT_CALLBACK,
     LO(cfg.tee),
     .set = set_std,
     .choices = std_modes,
     .env = "PET_TEE",
     .metavar = "MODE|LR:MODE,...",
     .unset = "0",
     .help = "like --redirects, but also to the console"},
    {.name = "local-ranks-filter",
     .type = OPT_CALLBACK,
     LO(cfg.n_ranks_filter),
     .set = set_ranks,
     .env = "PET_LOCAL_RANKS_FILTER",
     .metavar = "LR,...",
     .unset = "all",
     .help = "show only these local ranks' output on the console"},
    {.name = "logs-specs", .type = OPT_REFUSED, .env = "PET_LOGS_SPECS"},
    {.name = "node-rank",
     .type = OPT_INT,
     LO(cfg.node_rank),
     .max = 65535,
     .env = "PET_NODE_RANK",
     .metavar = "R",
     .help = "static mode: this node's rank"},
    {.name = "master-addr",
     .type = OPT_STRING,
     LO(cfg.master_addr),
     .min = 1,
     .max = 255,
     .env = "PET_MASTER_ADDR",
     .metavar = "ADDR",
     .help = "static mode: address of node rank 0"},
    {.name = "master-port",
     .type = OPT_UINT,
     LO(cfg.master_port),
     .min = 1,
     .max = 65535,
     .env = "PET_MASTER_PORT",
     .metavar = "PORT",
     .help = "static mode: port on node rank 0"},
    {.name = "local-addr",
     .type = OPT_STRING,
     LO(cfg.local_addr),
     .min = 1,
     .max = 255,
     .env = "PET_LOCAL_ADDR",
     .metavar = "ADDR",
     .unset = "$DLAUNCH_ADDR, else the address that reaches the server "
	      "unless it is loopback, then an interface's",
     .help = "address other nodes reach this node at (MASTER_ADDR when it "
	     "is node rank 0); a name is resolved once"},
    {.name = "signals-to-handle",
     .type = OPT_CALLBACK,
     LO(signals),
     .set = set_signals,
     .format = format_signals,
     .env = "PET_SIGNALS_TO_HANDLE",
     .metavar = "SIG,...",
     .help = "signals forwarded to the workers, after which dlaunch leaves "
	     "the job and exits 128+signal"},
    {.name = "rdzv-token-file",
     .type = OPT_STRING,
     LO(token_file),
     .env = "PET_RDZV_TOKEN_FILE",
     .metavar = "FILE",
     .help = "bearer token for a dlaunch-rdzv started with --token-file"},
    {.name = "rdzv-ca",
     .type = OPT_STRING,
     LO(cfg.ca_file),
     .env = "PET_RDZV_CA",
     .metavar = "FILE",
     .help = "CA certificate to verify a TLS dlaunch-rdzv (implies https)"},
    {.name = NULL},
};

static const struct opt_table launcher_table = {
    .prog = "dlaunch",
    .usage =
	"usage: dlaunch [OPTIONS] PROGRAM [ARGS...]\n"
	"       dlaunch status --rdzv-endpoint HOST:PORT [--rdzv-id ID]\n"
	"\n"
	"Runs PROGRAM as --nproc-per-node workers on this node, as part of a "
	"job\nthat may span nodes, with the environment torchrun gives its "
	"workers\n(RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, ...). A *.py "
	"PROGRAM runs\nunder python3 -u. Modes: --standalone (one node, "
	"embedded rendezvous),\n--rdzv-endpoint (a dlaunch-rdzv server), "
	"--rdzv-backend etcd --rdzv-endpoint\n(an etcd cluster), or static "
	"(--nnodes N --node-rank R --master-addr A\n--master-port P, no "
	"server).\n\n"
	"Options (torchrun's names; '_' may replace '-'; each also read "
	"from\nPET_<NAME>, e.g. PET_NPROC_PER_NODE):\n",
    .footer = "Exit status: 0 job succeeded, 1 job failed (after the "
	      "root-cause report),\n2 usage error, 128+N stopped by signal "
	      "N.\n",
    .specs = launcher_specs,
};

const struct opt_table *launcher_option_table(void)
{
	return &launcher_table;
}

void launcher_options_init(struct launcher_options *o)
{
	static const int default_signals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
	memset(o, 0, sizeof(*o));
	agent_config_init(&o->cfg);
	o->nproc_kind = LAUNCHER_NPROC_N;
	o->rdzv_backend = LAUNCHER_BACKEND_STATIC;
	o->monitor_interval_s = 5;
	memcpy(o->signals, default_signals, sizeof(default_signals));
	o->cfg.node_id = o->node_id;
	o->cfg.ranks_filter = o->ranks_filter;
	o->cfg.signals = o->signals;
}

/* check_modes checks the options against each other and settles the
 * rendezvous mode. */
static int check_modes(struct launcher_options *o, char *err, size_t es)
{
	struct agent_config *cfg = &o->cfg;
	int rc;
	if (o->module && o->no_python)
		return dl_errorf(err, es, DL_EINVAL,
				 "-m/--module and --no-python exclude each "
				 "other");
	if (o->run_path && o->module)
		return dl_errorf(err, es, DL_EINVAL,
				 "--run-path runs a Python script by its path; "
				 "it excludes -m/--module");
	rc = launcher_etcd_check(o, err, es);
	if (rc)
		return rc;
	if (o->standalone && (cfg->min_nodes != 1 || cfg->max_nodes != 1))
		return dl_errorf(err, es, DL_EINVAL,
				 "--standalone runs a single node; --nnodes "
				 "must be 1");
	if (o->standalone && cfg->endpoint)
		return dl_errorf(err, es, DL_EINVAL,
				 "--standalone runs its own rendezvous; drop "
				 "--rdzv-endpoint");
	if (cfg->endpoint && o->rdzv_backend == LAUNCHER_BACKEND_STATIC)
		o->rdzv_backend = LAUNCHER_BACKEND_DLAUNCH;
	if (!o->standalone && o->rdzv_backend != LAUNCHER_BACKEND_STATIC &&
	    !cfg->endpoint)
		return dl_errorf(err, es, DL_EINVAL,
				 "--rdzv-backend %s needs --rdzv-endpoint",
				 backend_words[backend_index(o->rdzv_backend)]);
	if (!o->standalone && !cfg->endpoint) {
		if (cfg->min_nodes != cfg->max_nodes)
			return dl_errorf(err, es, DL_EINVAL,
					 "--nnodes %d:%d needs a rendezvous "
					 "(--rdzv-endpoint); static mode takes "
					 "a fixed number of nodes",
					 cfg->min_nodes, cfg->max_nodes);
		if (cfg->node_rank >= cfg->max_nodes)
			return dl_errorf(
			    err, es, DL_EINVAL,
			    "--node-rank %d is not below --nnodes %d",
			    cfg->node_rank, cfg->max_nodes);
	}
	if (cfg->heartbeat_timeout_ms <= cfg->heartbeat_interval_ms)
		return dl_errorf(err, es, DL_EINVAL,
				 "--rdzv-conf heartbeat_timeout must exceed "
				 "heartbeat_interval");
	if (cfg->endpoint)
		cfg->mode = backend_names[backend_index(o->rdzv_backend)].mode;
	return 0;
}

int launcher_parse_options(int argc, char **argv, char **envp,
			   struct launcher_options *o, char *err,
			   size_t err_size)
{
	int next = argc, rc;

	launcher_options_init(o);
	rc = opt_parse(&launcher_table, o, argc, argv, envp, &next, err,
		       err_size);
	if (rc)
		return DL_EINVAL;
	if (o->help)
		return 0;
	o->program = argv + next;
	o->n_program = argc - next;
	if (o->n_program == 0)
		return dl_errorf(err, err_size, DL_EINVAL,
				 "no program to run (dlaunch [OPTIONS] PROGRAM "
				 "[ARGS...]; see dlaunch --help)");
	return check_modes(o, err, err_size);
}

char **launcher_worker_argv(const struct launcher_options *o,
			    const char *python_exec)
{
	const char *prog = o->program[0];
	size_t len = strlen(prog);
	/* --run-path takes precedence over --no-python, as in torchrun */
	int python =
	    o->run_path ||
	    (!o->no_python &&
	     (o->module || (len > 3 && strcmp(prog + len - 3, ".py") == 0)));
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

void launcher_usage(FILE *fp)
{
	struct launcher_options defaults;
	launcher_options_init(&defaults);
	opt_usage(&launcher_table, &defaults, fp);
}
