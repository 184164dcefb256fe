/*
 * internal.h - the agent's private structures, shared by the agent/ sources
 * only.
 *
 * agent.c runs the round loop (join, run, report, restart); workers.c
 * spawns, reaps and stops one round's workers; output.c moves their output;
 * progress.c notices workers that stopped making progress; report.c builds
 * failure records and prints the root-cause report.
 */
#ifndef DLAUNCH_AGENT_INTERNAL_H
#define DLAUNCH_AGENT_INTERNAL_H
#include "dlaunch/spawn.h"
#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "dlaunch/agent.h"
#include "dlaunch/agent_client.h"

#define AGENT_LINE_MAX_BYTES 16384 /* longer lines are split */
#define AGENT_TAIL_BYTES     4096  /* stderr kept for the report */
#define AGENT_MESSAGE_MAX    4096  /* failure message sent to the server */

struct agent;
struct agent_worker;

struct agent_stream {
	struct agent_worker *w;
	int which; /* AGENT_STD_OUT or AGENT_STD_ERR */
	int fd;	   /* read end of the pipe; -1 when closed */
	struct event *ev;
	int file_fd; /* log file or -1 */
	int console; /* lines go to the agent's stdout/stderr */
	struct agent_lines lines;
};

struct agent_worker {
	struct agent *a;
	int local_rank, rank;
	pid_t pid;		  /* 0: never started */
	struct spawn_child child; /* between spawn_start and spawn_finish */
	int reaped;
	int wstatus;	  /* from waitpid */
	int spawn_failed; /* exec never happened; message in tail */
	int finished;	  /* reaped and both pipes at EOF */
	uint64_t end_wall_ms;
	struct agent_stream out[2];
	char error_file[PATH_MAX];
	char tail[AGENT_TAIL_BYTES]; /* last bytes of stderr, a ring */
	size_t tail_len, tail_pos;
	/* progress (progress.c) */
	char progress_file[PATH_MAX];	/* DLAUNCH_PROGRESS_FILE */
	struct timespec progress_mtime; /* as last seen; 0: no file */
	uint64_t last_progress_ms;	/* monotonic */
};

/* What the current round assigned to this node. */
struct agent_round {
	uint64_t round;
	int node_rank, nnodes, world_size, rank_offset;
	int restart_count;
	char master_addr[256];
	unsigned master_port;
};

enum agent_state {
	AGENT_JOINING,	/* join long-poll in flight */
	AGENT_RUNNING,	/* workers running */
	AGENT_STOPPING, /* stopping workers; then `after_stop` */
	AGENT_DONE,	/* our workers succeeded; waiting for the job */
	AGENT_LEAVING,	/* telling the server we go */
	AGENT_EXITED,
};

enum agent_after_stop {
	AGENT_AFTER_REJOIN,	   /* join the next round */
	AGENT_AFTER_RESTART_LOCAL, /* static mode: spawn again */
	AGENT_AFTER_EXIT,	   /* finish with exit_status */
};

/* one retried request kind: its call, its retry timer and backoff */
struct agent_op {
	struct agent *a;
	struct client_call *call;
	struct event *retry;
	uint64_t backoff_ms;
	int warned;
	/* the round the request in flight (or being retried) names: its
	 * answer speaks of that round and of no other */
	uint64_t round;
	void (*send)(struct agent *a);
};

struct agent {
	struct event_base *base;
	struct agent_config cfg;
	char incarnation[17];
	char node_id[129];
	enum agent_state state;
	enum agent_after_stop after_stop;
	int exit_status;
	int print_report;     /* print the root cause before exiting */
	int job_failed_local; /* static: the local failure is the cause */
	int stopped_by_signal;
	struct agent_round r;
	uint64_t master_port_free; /* port picked for our join */
	char addr[256]; /* announced address ("" lets the server see) */
	/* workers of the current round */
	struct agent_worker *workers;
	int n_workers;
	int n_live;	  /* started and not finished */
	int group_failed; /* a worker failed this round */
	int reported;	  /* this round's outcome was sent */
	struct event *kill_timer;
	struct event *progress_timer; /* with --progress-timeout */
	struct event *sigchld;
	struct event **sigs;
	int n_sigs;
	char log_dir[PATH_MAX];
	int log_dir_temp; /* created by us: removed at exit */
	/* rendezvous */
	struct client *client;
	struct agent_op join, watch, heartbeat, report, leave, fetch;
	struct event *hb_timer;
	struct event *stopped_ev; /* deferred: the last worker finished */
	int report_pending;	  /* a report's answer decides what is next */
	int joined;		  /* a member of some round: leave at exit */
	int leave_attempts;
	json_t *pending_report; /* body of the report being sent */
	json_t *failures;	/* this node's failures (array) */
};

/* workers.c */
int workers_start(struct agent *a);
void workers_stop(struct agent *a, int sig);
void workers_kill_all(struct agent *a);
void workers_free(struct agent *a);
void workers_on_sigchld(struct agent *a);
void workers_kill_strays(struct agent *a);

/* output.c */
int output_open(struct agent_worker *w, int which, int *child_fd);
void output_close(struct agent_stream *s);

/* progress.c: hung-worker detection (cfg.progress_timeout_ms) */
void progress_worker_started(struct agent_worker *w);
int progress_arm(struct agent *a);
void progress_release(struct agent *a);

/* report.c: failure record of a finished worker (a new JSON object) */
json_t *report_failure(const struct agent_worker *w);
/* report_hang: failure record of a live worker that showed no progress
 * for timeout_ms (a new JSON object) */
json_t *report_hang(const struct agent_worker *w, uint64_t timeout_ms);
/* report_print writes the root-cause report for the failures array (in the
 * server's form) to stderr. */
void report_print(const char *job, json_t *failures, int n_total);

/* agent.c: called by workers.c, output.c and progress.c */
void agent_worker_finished(struct agent *a, struct agent_worker *w);
void agent_all_stopped(struct agent *a);
/* called by progress.c with the n workers found hung, longest silent
 * first: records them as failed and stops the group */
void agent_workers_hung(struct agent *a, struct agent_worker **hung, int n);

#endif
