/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsm.h - the agent's round loop as one table of states x events.
 *
 * The loop is pure: it owns no process, socket or timer. What happens in
 * the world arrives as events (a join answered, a worker failed, the
 * workers are gone, a signal), and what the loop decides leaves through
 * the effects table given to agent_fsm_init (start the workers, stop them,
 * join, report, leave, exit). agent.c wires the effects to the workers
 * (workers.c) and to a rendezvous backend (rdzv/rdzv.h); the unit tests
 * wire them to a recorder and drive every cell. The events themselves
 * are rdzv/event.h's, which the backends post without knowing this
 * loop: agent_fsm_rdzv_loop gives them this one.
 *
 * Which states have workers alive is part of the state: RUNNING, FAILING,
 * FAILING_END, RESTARTING, ENDING, SIGNALLED and the in-place states do
 * (WORKERS_GONE ends them), every other state has none. The workers post
 * WORKERS_GONE exactly once per set they were started as, so a state never
 * waits for something that already happened.
 *
 * Answers about a round (RESTART, STOP, REPORT_DONE) name it; one that
 * names another round than the current one is dropped before any cell
 * sees it: an answer that arrives after the agent moved to a new round
 * must not stop that round's workers.
 */
#ifndef DLAUNCH_AGENT_FSM_H
#define DLAUNCH_AGENT_FSM_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "rdzv/event.h"

struct agent_rdzv_loop;

enum agent_state {
	AGENT_IDLE,	     /* not started */
	AGENT_JOINING,	     /* a join is in flight; no workers */
	AGENT_RUNNING,	     /* workers of the current round run */
	AGENT_DONE,	     /* our workers succeeded; waiting for the job */
	AGENT_FAILING,	     /* a worker failed: stopping the rest, report
				in flight; then rejoin */
	AGENT_FAILING_END,   /* as FAILING, but the job has ended: exit */
	AGENT_REPORTING,     /* workers gone, failure report in flight */
	AGENT_REPORTING_END, /* as REPORTING, but the job has ended */
	AGENT_RESTARTING,    /* stopping workers to join the next round */
	AGENT_ENDING,	     /* stopping workers; the job has ended */
	AGENT_SIGNALLED,     /* stopping workers after a signal to us */
	AGENT_FETCHING,	     /* asking for the job's failures to report */
	AGENT_LEAVING,	     /* telling the rendezvous we go */
	/* the in-place path (docs/worker-protocol.md): workers kept alive */
	AGENT_ABORTING,	      /* abort sent: waiting for every aborted */
	AGENT_FAILING_KEPT,   /* a worker failed: report in flight, abort
				 sent to the others */
	AGENT_REPORTING_KEPT, /* all aborted; the report still in flight */
	AGENT_JOINING_KEPT,   /* all aborted; a join is in flight */
	AGENT_REFORMING,      /* membership sent: waiting for reformed */
	AGENT_RESPAWNING,     /* a re-form failed: stopping the workers to
				 start new ones in the same round */
	/* a preemption (docs/worker-protocol.md, "preempt") */
	AGENT_PREEMPT_ASKING, /* SIGTERM: asking the rendezvous for the
				 job's stop step; workers run on */
	AGENT_PREEMPTING,     /* preempt sent: the workers stop after the
				 step and exit */
	AGENT_EXITED,
	AGENT_N_STATES
};

/* What the loop asks of the world; ctx is agent_fsm_init's. Effects may
 * post events (agent_fsm_post): those are handled after the current
 * one, in order. */
struct agent_fsm_ops {
	void (*start_workers)(void *ctx, const struct agent_round *r);
	/* signal every live worker's group with sig; WORKERS_GONE follows */
	void (*stop_workers)(void *ctx, int sig);
	void (*kill_workers)(void *ctx);
	/* the rendezvous (rdzv/rdzv.h): each answer comes back as an event */
	void (*join)(void *ctx);
	void (*round_begin)(void *ctx, uint64_t round); /* keep-alive, watch */
	void (*round_end)(void *ctx);
	/* failures (a JSON array, borrowed) only when failed */
	void (*report)(void *ctx, uint64_t round, int failed, json_t *failures);
	void (*cancel)(void *ctx); /* drop every request in flight */
	void (*leave)(void *ctx);
	void (*status)(void *ctx);
	/* print the root-cause report: the job's failures when known (not
	 * NULL and not empty), else this node's own */
	void (*print_report)(void *ctx, json_t *job_failures,
			     json_t *own_failures);
	void (*finish)(void *ctx); /* the loop is over: exit the event loop */
	/* the in-place path: whether every live worker declared abort and
	 * membership; send abort (ABORTED or REFORM_MISSED follows); keep
	 * the live workers for the round and send them its membership,
	 * starting new ones where one has finished (REFORMED or
	 * REFORM_MISSED follows) */
	int (*in_place)(void *ctx);
	void (*abort_workers)(void *ctx, uint64_t round, const char *reason);
	void (*reform_workers)(void *ctx, const struct agent_round *r);
	/* optional: this node's workers entered f->r.round, as
	 * f->recovery says (the etcd backend writes it once) */
	void (*entered)(void *ctx);
	/* a preemption: whether it can be done here (--preempt-grace, a
	 * backend that can, every live worker declared preempt); ask the
	 * rendezvous for the stop step (PREEMPT or PREEMPT_FAILED follows);
	 * send preempt to the workers; start the grace (PREEMPT_EXPIRED
	 * follows once, however often it is asked) */
	int (*preempt_ok)(void *ctx);
	void (*preempt_ask)(void *ctx);
	void (*preempt_workers)(void *ctx, uint64_t step);
	void (*preempt_grace)(void *ctx);
};

struct agent_fsm {
	enum agent_state state;
	struct agent_round r; /* the current (or last) round */
	int joined;	      /* a member of some round: leave at exit */
	int exit_status;      /* 0, 1, or 128+signal */
	int report_on_exit;   /* the job failed: print the root cause */
	/* how this node's workers entered the current round: "started"
	 * (the first round), "in_place" or "restarted", and why */
	char recovery[16];
	char recovery_why[160];
	json_t *failures; /* this node's failures in this round */
	/* a preemption: the stop step (0: none yet) and the SIGTERMs this
	 * agent took for it (a second one is a plain signal) */
	uint64_t preempt_step;
	int preempt_sigterms;
	const char *job; /* the job's id, for logs; borrowed */
	int nproc;	 /* workers per round, for logs */
	const struct agent_fsm_ops *ops;
	void *ctx;
	/* events posted while one is handled, oldest first */
	struct agent_event *queue;
	size_t q_head, q_len, q_cap;
	int dispatching;
};

/* agent_fsm_init prepares f in IDLE; ops, ctx and job are borrowed.
 * Returns 0 or DL_ENOMEM. */
int agent_fsm_init(struct agent_fsm *f, const struct agent_fsm_ops *ops,
		   void *ctx, const char *job, int nproc);
void agent_fsm_release(struct agent_fsm *f);

/* agent_fsm_post hands ev to the loop: handled at once, or after the
 * event being handled now when called from an effect. ev->json is taken
 * (freed once handled, unless a cell kept it). */
void agent_fsm_post(struct agent_fsm *f, struct agent_event *ev);

/* agent_fsm_post_kind posts an event that carries nothing but its kind
 * and round. */
void agent_fsm_post_kind(struct agent_fsm *f, enum agent_event_kind kind,
			 uint64_t round);

/* agent_fsm_has_workers: the state is one in which workers are alive (one
 * that WORKERS_GONE ends). */
int agent_fsm_has_workers(enum agent_state s);

/* agent_fsm_rdzv_loop fills out with f as a rendezvous backend sees it
 * (rdzv/rdzv.h): answers posted to f (agent_fsm_post), its current round
 * and how this node's workers entered it read from f. f must outlive the
 * backend given out. */
void agent_fsm_rdzv_loop(struct agent_fsm *f, struct agent_rdzv_loop *out);

const char *agent_state_name(enum agent_state s);
const char *agent_event_name(enum agent_event_kind k);

#endif
