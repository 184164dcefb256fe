/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent.h - the per-node agent of dlaunch.
 *
 * One agent runs the workers of one node on the caller's event loop: it
 * joins the rendezvous (or, in static mode, computes its place from the
 * command line), spawns the node's workers with the worker environment of
 * DESIGN.md section 1, forwards their output, watches them through SIGCHLD
 * (and, with a progress timeout, for hangs), reports failures and
 * successes and restarts them on a new round. It ends
 * by calling event_base_loopexit; agent_exit_status then says how.
 *
 * Besides the agent itself this header offers the pure pieces the
 * launcher uses: --redirects/--tee specs, the local-ranks filter and the
 * loopback test of an address. The agent's own pieces (the worker
 * environment, output lines, the error-file parser, the announced
 * address) are declared in agent/ (env.h, output.h, report.h, addr.h).
 */
#ifndef DLAUNCH_AGENT_H
#define DLAUNCH_AGENT_H
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct agent;

#define AGENT_MAX_NPROC 4096
/* bits of a std spec: which streams go to files */
#define AGENT_STD_OUT 1
#define AGENT_STD_ERR 2

/* A --redirects/--tee value: "3" for every local rank, or "0:1,1:2". */
struct agent_std_spec {
	int all; /* mask for ranks not listed; -1: none given */
	int n;	 /* entries in rank/mask */
	int rank[64];
	int mask[64];
};

enum agent_mode {
	AGENT_MODE_STATIC = 0, /* no server: --nnodes/--node-rank/--master-* */
	AGENT_MODE_RDZV = 1,   /* a dlaunch-rdzv server (or the embedded one) */
	AGENT_MODE_ETCD = 2,   /* an etcd cluster (docs/etcd.md) */
};

#define AGENT_ETCD_MAX_ENDPOINTS 16
#define AGENT_ETCD_URL_MAX	 300

/* What --rdzv-conf says about etcd (AGENT_MODE_ETCD); the endpoints are
 * agent_config.endpoint, a comma-separated list. */
struct agent_etcd_config {
	const char *protocol; /* "http" or "https" for bare host:port items;
				 NULL: http */
	const char *cacert;   /* CA bundle for https, or NULL */
	const char *cert;     /* client certificate and key, or NULL */
	const char *key;
	const char *username;	/* etcd authentication, or NULL */
	const char *password;	/* read from password_file; borrowed */
	const char *key_prefix; /* default "/dlaunch" */
	unsigned lease_ttl_s;	/* 0: heartbeat_timeout rounded up, >= 2 */
	/* rerun_after: a join this long after the job ended starts a new
	 * run of its id (as dlaunch-rdzv --rerun-after; 0: never); the
	 * default (AGENT_ETCD_RERUN_AFTER_MS) unless rerun_after_set */
	uint64_t rerun_after_ms;
	int rerun_after_set;
};
#define AGENT_ETCD_RERUN_AFTER_MS 30000

struct agent_config {
	enum agent_mode mode;
	char *const *argv; /* worker command, resolved; borrowed */
	int nproc;	   /* workers on this node */
	const char *role;  /* ROLE_NAME */
	int max_restarts;
	uint64_t shutdown_timeout_ms;
	/* a worker with no output and no touch of its DLAUNCH_PROGRESS_FILE
	 * for this long is taken as hung (failed); 0: never */
	uint64_t progress_timeout_ms;
	/* stall: no rank of the node moved its step (control channel) or
	 * touched its progress file for this long, after one did once: a
	 * hang diagnosis, then as a hung worker; 0: never (docs/hangs.md) */
	uint64_t hang_timeout_ms;
	/* a rank more than this many steps behind the node's median while
	 * the others move is logged as a straggler (not stopped); 0: off */
	int straggler_steps;
	/* each step of an in-place re-form (docs/worker-protocol.md): abort
	 * to aborted, rejoin to the new round, membership to reformed */
	uint64_t reform_timeout_ms;
	/* SIGTERM to an agent whose workers declared preempt stops the job
	 * at one step (docs/worker-protocol.md) within this grace; 0: off,
	 * the signal is forwarded as before */
	uint64_t preempt_grace_ms;
	const char *run_id; /* TORCHELASTIC_RUN_ID / job id */
	const char *node_id;
	/* static mode */
	int nnodes;
	int node_rank;
	const char *master_addr;
	uint16_t master_port;
	/* rendezvous mode */
	const char *endpoint; /* "host:port" or an http(s):// URL */
	const char *token;    /* bearer token or NULL; borrowed */
	const char *ca_file;  /* CA bundle for https or NULL */
	int min_nodes, max_nodes;
	const char *local_addr; /* address announced to others or NULL */
	uint64_t join_timeout_ms;
	uint64_t last_call_timeout_ms;
	uint64_t heartbeat_interval_ms;
	uint64_t heartbeat_timeout_ms;
	uint64_t read_timeout_ms;
	struct agent_etcd_config etcd;
	/* output */
	const char *log_dir; /* NULL: a temporary one, removed at exit */
	struct agent_std_spec redirects;
	struct agent_std_spec tee;
	const int *ranks_filter; /* global ranks shown on the console */
	int n_ranks_filter;	 /* 0: all */
	/* signals forwarded to workers (then dlaunch stops); 0-terminated */
	const int *signals;
};

/* agent_config_init fills the defaults (static, 1 node, 1 worker, role
 * "default", shutdown 30 s, no progress timeout, hang timeout 5 min,
 * stragglers 5 steps behind, re-form 30 s, heartbeat 1 s/5
 * s, join 600 s, last call 5 s, read 60 s, master 127.0.0.1:29500). They are
 * the one source of dlaunch's defaults: the command line is parsed onto a
 * config this function filled, and `dlaunch --help` prints each default
 * from it (launcher_options_init). */
void agent_config_init(struct agent_config *cfg);

/* agent_new prepares an agent on base; nothing starts until agent_start.
 * cfg is copied (its strings and arrays must outlive the agent).
 * *out is owned by the caller (agent_free). */
int agent_new(struct event_base *base, const struct agent_config *cfg,
	      struct agent **out, char *err, size_t err_size);

/* agent_start begins the first round (join or spawn). Run the loop after. */
int agent_start(struct agent *a, char *err, size_t err_size);

/* agent_exit_status: 0 job succeeded, 1 failed, 128+sig stopped by a
 * signal. Meaningful once the loop has exited. */
int agent_exit_status(const struct agent *a);

/* agent_free stops what is left (SIGKILL to any remaining worker group),
 * and frees everything. NULL is allowed. */
void agent_free(struct agent *a);

/* ---- pure helpers (agent/env.c, agent/output.c, agent/report.c) ---- */

/* etcd endpoints as base URLs ("http://127.0.0.1:2379", no trailing /). */
struct agent_etcd_endpoints {
	size_t n;
	char url[AGENT_ETCD_MAX_ENDPOINTS][AGENT_ETCD_URL_MAX];
};

/* agent_etcd_endpoints_parse reads a comma-separated list of etcd client
 * addresses: host, host:port, [v6]:port or http(s)://host[:port]; port
 * 2379 when omitted; bare items take protocol ("http" or "https"; NULL:
 * "http"). The message names the bad item. */
int agent_etcd_endpoints_parse(const char *list, const char *protocol,
			       struct agent_etcd_endpoints *out, char *err,
			       size_t err_size);

/* agent_etcd_status reads the records of the jobs led through etcd
 * (cfg's endpoints, credentials and key prefix) and returns what
 * dlaunch-rdzv answers GET /v1/jobs/JOB (job given) or GET /v1/jobs with
 * (json_decref it). DL_ENOTFOUND when job has no record; otherwise the
 * etcd client's codes (agent/etcd/etcd_client.h), with a message. */
struct json_t;
int agent_etcd_status(const struct agent_config *cfg, const char *job,
		      struct json_t **out, char *err, size_t err_size);

/* agent_etcd_dump opens a hang trigger of kind "dump" for job in etcd
 * (cfg's endpoints, credentials and key prefix; docs/hangs.md) and reads
 * the nodes' reports for it until every member of the job's round has
 * one or timeout_ms; *out is {"trigger", "complete", "reports"} (a new
 * reference, also when incomplete). 0 complete, 1 incomplete, or a
 * negative code with a message (*out may then be NULL). */
int agent_etcd_dump(const struct agent_config *cfg, const char *job,
		    uint64_t timeout_ms, struct json_t **out, char *err,
		    size_t err_size);

/* agent_etcd_lease_ttl_s: the lease TTL the agent asks for (cfg's, else
 * heartbeat_timeout rounded up to whole seconds, at least 2). */
unsigned agent_etcd_lease_ttl_s(const struct agent_config *cfg);
/* agent_etcd_rerun_after_ms: cfg's rerun_after, else the default */
uint64_t agent_etcd_rerun_after_ms(const struct agent_config *cfg);

/* agent_std_parse parses a --redirects/--tee value into spec; the message
 * names the bad part. */
int agent_std_parse(const char *s, struct agent_std_spec *spec, char *err,
		    size_t err_size);
/* agent_ranks_parse parses "0,2,5" (global ranks; at most max entries)
 * into ranks; *n is the count. */
int agent_ranks_parse(const char *s, int *ranks, int max, int *n, char *err,
		      size_t err_size);

/* agent_addr_is_loopback: addr is a numeric address in 127/8, ::1 or
 * ::ffff:127/104 (agent/addr.c; the rest of it is agent/addr.h). */
int agent_addr_is_loopback(const char *addr);

#endif
