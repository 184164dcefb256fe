/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_load.h - what the files of etcd_load share (etcd_load.c says what
 * the program does): the command line, the lines on the pipes between
 * its processes, etcd's counters and the driver's state.
 *
 *   etcd_load.c           the command line, the pipes' lines, main
 *   etcd_load_sim.c       a process of simulated nodes (a child)
 *   etcd_load_counters.c  etcd's /metrics counters
 *   etcd_load_driver.c    the driver: the children, the phases
 *   etcd_load_report.c    the result, one JSON object
 */
#ifndef DLAUNCH_BENCH_ETCD_LOAD_H
#define DLAUNCH_BENCH_ETCD_LOAD_H

#include <event2/event.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../agent/etcd/etcd_client.h"
#include "../agent/etcd/rdzv_etcd.h"
#include "../agent/fsm.h"
#include "dlaunch/log.h"

#define MAX_NODES     100000
#define MAX_PROCS     64
#define ENDPOINTS_MAX 4096
#define FDS_PER_NODE  17 /* 13.5 measured, and room for the leader's */
#define LINE_MAX_LEN  256

/* What the command line says; the same in every process. */
struct opts {
	char endpoints[ENDPOINTS_MAX];
	struct agent_etcd_endpoints eps;
	char job[129];
	char prefix[256];
	int nodes, min_nodes, procs;
	unsigned lease_ttl_s;
	uint64_t last_call_ms;
	double timeout_s;
	int takeover, rotate;
	uint64_t idle_ms;
	int n_etcd_pids;
	pid_t etcd_pids[16];
	enum log_level level;
};

/* Lines from a pipe, split as they arrive. */
struct lines {
	char buf[64 * 1024];
	size_t len;
};

/* ---- etcd_load.c ---- */

/* die: the message on stderr, exit status 1. */
void die(const char *msg);
/* write_line writes one line whole (a pipe write under PIPE_BUF is) */
void write_line(int fd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* read_lines reads what fd has and calls fn on each whole line; returns
 * 0, or -1 at the end of the stream */
int read_lines(int fd, struct lines *in, void (*fn)(void *, char *), void *arg);

/* ---- etcd_load_sim.c: the simulated nodes ---- */

/* base_config: what the command line of a real agent would give */
void base_config(const struct opts *o, struct agent_config *cfg);
/* child_main: a child process running the simulated nodes [lo, hi):
 * reads commands on cmd_fd, reports on rep_fd; its exit status. */
int child_main(const struct opts *o, int lo, int hi, int cmd_fd, int rep_fd);

/* ---- etcd_load_counters.c: etcd's counters ---- */

#define MAX_COUNTERS 64
struct counters {
	size_t n;
	char name[MAX_COUNTERS][96];
	double value[MAX_COUNTERS];
};

/* scrape reads every member's /metrics (blocking: between phases, while
 * the nodes' loops run in their own processes) */
int scrape(const struct opts *o, struct counters *c);
/* counters_delta: b - a per counter, a new JSON object. */
json_t *counters_delta(const struct counters *a, const struct counters *b);

/* ---- etcd_load_driver.c: the driver ---- */

enum phase { PH_FIRST = 1, PH_IDLE = 2, PH_TAKEOVER = 3, PH_DONE = 4 };

struct proc {
	pid_t pid;
	int lo, hi;
	int cmd_fd, rep_fd;
	struct lines in;
	struct event *ev;
	long hwm_bytes;
	int fds;
};

struct node_seen {
	uint64_t round;
	int rank, world;
	uint64_t join_ns; /* first round, from t0 */
	int reformed;
	int over;	  /* told in the takeover that its round is over */
	int failed_phase; /* the phase its loop ended in; 0: it did not */
};

struct driver {
	const struct opts *o;
	struct event_base *base;
	struct proc procs[MAX_PROCS];
	int nprocs;
	struct node_seen *nodes;
	enum phase phase;
	int failed;
	char why[512];
	uint64_t t0_ns;
	int n_joined;
	int n_failed; /* nodes whose loop ended */
	uint64_t first_round;
	int world; /* of the first round */
	struct counters before, after;
	/* idle window, after a warm-up of one lease TTL (idle_warm: in it) */
	struct counters idle_before, idle_after;
	uint64_t idle_t0_ns, idle_t1_ns;
	int idle_warm;
	/* CPU seconds at the start, the first round, the idle window's end
	 * and its start */
	double etcd_cpu[4], load_cpu[4];
	int idle_rounds; /* nodes given a new round while idle */
	/* takeover */
	struct agent_config obs_cfg;
	struct etcd_client *obs;
	struct etcd_call *obs_call;
	struct etcd_watch *obs_watch;
	int killed;
	char new_leader[64];
	uint64_t t_kill_ns, t_gone_ns, t_elected_ns, t_reformed_ns;
	/* the takeover's waves: the first and the last survivor told that
	 * its round is over (its workers stopped), the first survivor in the
	 * new round */
	uint64_t t_over_first_ns, t_over_last_ns, t_reformed_first_ns;
	int n_reformed, n_over;
	uint64_t new_round;
	struct event *timeout_ev, *next_ev, *idle_ev;
};

/* phase_name: a phase's name in messages and the result. */
const char *phase_name(int p);
/* survivors: the nodes that should be in a new round after the takeover */
int survivors(const struct driver *d);
/* driver_main: the whole run (the children forked, every phase, the
 * result printed); the exit status, 0 when every phase was checked. */
int driver_main(const struct opts *o);

/* ---- etcd_load_report.c: the result ---- */

/* proc_status: a size field of /proc/PID/status in bytes (-1: none). */
long proc_status(pid_t pid, const char *field);
/* open_fds: how many descriptors pid has open (-1: unknown). */
int open_fds(pid_t pid);
/* print_result: the result of a completed run on stdout. */
void print_result(struct driver *d);

#endif
