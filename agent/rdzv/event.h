/* SPDX-License-Identifier: Apache-2.0 */
/*
 * event.h - the events of the agent's round loop: what happens in the
 * world, told to the loop (fsm.h). A rendezvous backend (rdzv.h) speaks
 * in them too: each of its answers is one of these events, posted to the
 * loop it was given. They live here, below both the loop and the
 * backends, so that a backend needs nothing of the loop but this.
 */
#ifndef DLAUNCH_AGENT_RDZV_EVENT_H
#define DLAUNCH_AGENT_RDZV_EVENT_H
#include <jansson.h>
#include <stdint.h>

/* What a round assigned to this node. */
struct agent_round {
	uint64_t round;
	int node_rank, nnodes, world_size, rank_offset;
	int restart_count;
	char master_addr[256];
	unsigned master_port;
};

enum agent_event_kind {
	AGENT_EV_START,		/* agent_start */
	AGENT_EV_JOINED,	/* a join was answered: ev.assign */
	AGENT_EV_JOIN_ENDED,	/* the job had ended: ev.job_state */
	AGENT_EV_JOIN_FAILED,	/* the join cannot succeed (logged) */
	AGENT_EV_WORKER_FAILED, /* ev.json: failure record(s) */
	AGENT_EV_WORKERS_GONE,	/* no worker of the set is left */
	AGENT_EV_RESTART,	/* round ev.round is over: rejoin */
	AGENT_EV_STOP,		/* the job ended (ev.job_state) */
	AGENT_EV_REPORT_DONE,	/* the report on ev.round was answered */
	AGENT_EV_SIGNAL,	/* ev.sig reached the agent */
	AGENT_EV_STATUS,	/* the job's record: ev.json failures or NULL */
	AGENT_EV_LEFT,		/* the leave is over (answered or not) */
	AGENT_EV_ABORTED,  /* every kept worker answered abort (ev.round) */
	AGENT_EV_REFORMED, /* every kept worker answered membership */
	AGENT_EV_REFORM_MISSED,	  /* a re-form step missed its deadline, or a
				     kept worker exited or broke the protocol */
	AGENT_EV_PREEMPT,	  /* the job's stop step is ev.step */
	AGENT_EV_PREEMPT_FAILED,  /* the rendezvous refused the preemption */
	AGENT_EV_PREEMPT_EXPIRED, /* --preempt-grace is over */
	AGENT_N_EVENTS
};

struct agent_event {
	enum agent_event_kind kind;
	uint64_t round;		   /* RESTART, STOP, REPORT_DONE */
	uint64_t step;		   /* PREEMPT */
	int sig;		   /* SIGNAL */
	char job_state[16];	   /* STOP, JOIN_ENDED: "SUCCEEDED", ... */
	struct agent_round assign; /* JOINED */
	json_t *json;		   /* WORKER_FAILED, STATUS; owned */
};

#endif
