/* SPDX-License-Identifier: Apache-2.0 */
/*
 * internal.h - the agent's private structures, shared by the agent/ sources
 * only.
 *
 * fsm.c is the round loop (join, run, report, restart) as a table of
 * states x events; agent.c wires its effects to the world; rdzv/rdzv.h
 * is the one interface to a rendezvous (rdzv_static.c, rdzv_http.c,
 * etcd/; backends.h); workers.c
 * spawns, reaps and stops one round's workers and alone keeps their
 * count; output.c moves their output; progress.c notices workers that
 * stopped making progress; report.c builds failure records and prints the
 * root-cause report.
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
#include "dlaunch/buf.h"
#include "fsm.h"
#include "hang.h"
#include "keeper/keeper.h"
#include "output.h"
#include "backends.h"

#define AGENT_LINE_MAX_BYTES 16384 /* longer lines are split */
#define AGENT_TAIL_BYTES     4096  /* stderr kept for the report */
#define AGENT_MESSAGE_MAX    4096  /* failure message sent to the server */

struct agent;
struct agent_worker;
struct control_reader;

/* a worker's control channel, the agent's end (control.c) */
enum agent_control_state {
	AGENT_CONTROL_NONE,   /* no channel */
	AGENT_CONTROL_OPEN,   /* open; no hello yet */
	AGENT_CONTROL_SPEAKS, /* hello accepted: welcome sent */
	AGENT_CONTROL_PLAIN,  /* bad input or closed: drained, not heard */
};

/* what the agent waits for from a worker during a re-form */
enum agent_control_wait {
	AGENT_CONTROL_WAIT_NONE,
	AGENT_CONTROL_WAIT_ABORTED,
	AGENT_CONTROL_WAIT_REFORMED,
};

struct agent_control {
	enum agent_control_state state;
	int fd; /* the agent's end, nonblocking; -1 when closed */
	struct event *rev, *wev;
	struct control_reader *in; /* NULL until open */
	struct buf out;		   /* lines not yet written; bounded */
	unsigned handles;	   /* CONTROL_HANDLES_* from hello */
	enum agent_control_wait wait;
	int answered; /* the awaited answer came */
	/* why it became plain, said once: at once for bad input, at the
	 * next re-form for a close (which is also how a worker exits) */
	char plain_why[160];
	int plain_said;
	/* progress: the last step it reported and when (monotonic) */
	int has_step;
	uint64_t step;
	uint64_t step_ms;
	/* its step rate (preempt.c): a window's first step and time, and
	 * the rate of the last whole window (steps per second) */
	uint64_t rate_step, rate_ms;
	double rate;
};

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
	char pystack_file[PATH_MAX];	/* DLAUNCH_PYSTACK_FILE (hang.h) */
	struct timespec progress_mtime; /* as last seen; 0: no file */
	uint64_t last_progress_ms;	/* monotonic */
	struct agent_control ctl;	/* control.c */
	int kept;			/* kept from an earlier round */
	/* stall detection (progress.c): when its step or progress file
	 * last moved (monotonic; output does not count), 0: never */
	uint64_t moved_ms;
	int straggling; /* said to be a straggler; quiet until it catches up */
};

struct agent {
	struct event_base *base;
	struct agent_config cfg;
	char incarnation[17];
	char node_id[129];
	struct agent_fsm fsm;	 /* the round loop (fsm.c) */
	struct agent_rdzv *rdzv; /* its rendezvous backend (rdzv/rdzv.h) */
	struct event *sigchld;
	struct event **sigs;
	int n_sigs;
	char log_dir[PATH_MAX];
	int log_dir_temp; /* created by us: removed at exit */
	/* the workers of the current round: workers.c alone changes these */
	struct agent_worker *workers;
	int n_workers;
	int n_live;   /* started and not finished */
	int gone;     /* WORKERS_GONE posted for this set */
	int starting; /* inside workers_start: the set is not complete */
	struct event *kill_timer;
	struct event *progress_timer; /* with --progress-timeout */
	struct event *reform_timer;   /* a re-form step's deadline */
	uint64_t reform_round;	      /* the round an abort/membership names */
	int reform_missed;	      /* REFORM_MISSED posted for this step */
	int reform_step;	      /* what the deadline bounds (control.c) */
	struct keeper *keeper;	      /* keeper.h; NULL before agent_start */
	struct event *preempt_timer;  /* --preempt-grace (preempt.c) */
	uint64_t preempt_sigterm_ms;  /* the last SIGTERM taken (monotonic) */
	int cgroup_warned;	      /* said once that a cgroup failed */
	/* the interface for GLOO_/NCCL_SOCKET_IFNAME in rounds of more than
	 * one node ("": none; agent_socket_ifname) and why, said once */
	char socket_ifname[32];
	char socket_why[512];
	int socket_said;
	/* hang diagnosis (hang.c) */
	struct agent_hang *hang;
	int hang_kept;		 /* a hang report is in log_dir: keep it */
	int exit_after_hang;	 /* the loop exits when the diagnosis ends */
	char site_dir[PATH_MAX]; /* the sitecustomize's ("": none) */
	uint64_t stall_round;	 /* a stall was found in this round (+1) */
	unsigned stragglers;	 /* stragglers seen in this run */
	/* the node's median step at straggler_ref_ms (0: none yet): a
	 * straggler is behind where the others were a while ago */
	uint64_t straggler_ref_step, straggler_ref_ms;
};

/* workers.c: each posts to a->fsm what happens to the workers */
int workers_start(struct agent *a);
void workers_stop(struct agent *a, int sig);
void workers_kill_all(struct agent *a);
void workers_free(struct agent *a);
void workers_on_sigchld(struct agent *a);
/* workers_check_finished: w is finished once reaped and both its pipes
 * are at EOF, in either order; the one place that decides it */
void workers_check_finished(struct agent_worker *w);
/* workers_reform keeps the live workers, renumbered for round a->fsm.r,
 * and starts new ones where a worker has finished */
void workers_reform(struct agent *a);

/* control.c: the workers' control channels (docs/worker-protocol.md) */
/* control_open makes w's channel; *child_fd is the worker's end (> 2,
 * close-on-exec: the spawn keeps it), for the caller to close once the
 * worker has exec'd. 0, or a DL_E* code (the worker then has none). */
int control_open(struct agent_worker *w, int *child_fd);
void control_close(struct agent_worker *w);
/* control_worker_finished: w has exited; a re-form waiting on it missed */
void control_worker_finished(struct agent_worker *w);
/* control_in_place: every live worker said hello with abort and
 * membership (and there is one), and none is hung (--progress-timeout) */
int control_in_place(struct agent *a);
/* control_abort sends abort for round to every live worker and waits for
 * their aborted (AGENT_EV_ABORTED) within --reform-timeout */
void control_abort(struct agent *a, uint64_t round, const char *reason);
/* control_membership sends the round a->fsm.r to every kept worker and
 * waits for their reformed (AGENT_EV_REFORMED) */
void control_membership(struct agent *a);
/* control_cancel: nothing is awaited any more */
void control_cancel(struct agent *a);
/* control_hang_up closes the agent's side of every live worker's channel
 * for writing: the workers see its end (a stop follows) */
void control_hang_up(struct agent *a);
/* control_preempt sends preempt {step} to every live worker that speaks */
void control_preempt(struct agent *a, uint64_t step);
void control_release(struct agent *a);
/* control_send_dump sends w a `dump` for id, the file path; -1 when w
 * does not declare `dump` or its channel is broken */
int control_send_dump(struct agent_worker *w, const char *id, const char *path);

/* preempt.c: a preemption (docs/worker-protocol.md, "preempt") */
/* preempt_grace_ms: the --preempt-grace this agent tells its workers in
 * welcome (0: it does not preempt, e.g. static mode) */
uint64_t preempt_grace_ms(const struct agent *a);
/* preempt_note_step: w reported a step; its rate is kept */
void preempt_note_step(struct agent_worker *w);
/* the round loop's effects (fsm.h) */
int preempt_ok(struct agent *a);
void preempt_ask(struct agent *a);
void preempt_workers(struct agent *a, uint64_t step);
void preempt_grace(struct agent *a);
void preempt_release(struct agent *a);
/* preempt_signal_repeated: sig is a copy of the SIGTERM a preemption
 * took less than a second ago (Slurm's own and srun's forwarded one),
 * to be dropped (logged); notes the time of every SIGTERM */
int preempt_signal_repeated(struct agent *a, int sig);

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
void report_print(const char *job, json_t *failures, int n_total,
		  const char *hang_reason);

#endif
