/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control.c - the agent's end of its workers' control channels
 * (docs/worker-protocol.md).
 *
 * Each worker gets one AF_UNIX socket pair: its end is inherited across
 * exec (spawn_opts.keep_fd) and named in DLAUNCH_CONTROL_FD; ours is
 * nonblocking and read by a persistent event, lines split with a hard
 * limit (control_proto.c). What we write waits in a bounded buffer until
 * the socket takes it, so a worker that does not read costs at most that
 * buffer, never a blocked agent.
 *
 * A worker that says hello with a version we speak gets welcome; its
 * steps count as progress (--progress-timeout) and are kept per worker.
 * Anything wrong on a channel (not JSON, a missing or mistyped member, a
 * line over the limit, a message before hello, a step going back, a full
 * output buffer, a closed socket) is logged once and makes that worker
 * plain: we keep draining what it writes but hear nothing more.
 *
 * The re-form: control_abort and control_membership send to the kept
 * workers and wait for every answer naming the round, each step bounded
 * by --reform-timeout (one timer per agent); all answers in post ABORTED
 * or REFORMED, anything else REFORM_MISSED, once per step. Between the
 * two a longer deadline bounds the rejoin (rejoin_ms).
 */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control_proto.h"
#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"
#include "dlaunch/procfs.h"
#include "hang.h"
#include "internal.h"

/* what we may hold unwritten for one worker: a few membership lines; a
 * worker that lets more pile up is not reading */
#define CONTROL_OUT_MAX (4 * CONTROL_LINE_MAX)

/* what the deadline bounds */
enum {
	STEP_NONE,
	STEP_ABORT,  /* abort sent: waiting for aborted */
	STEP_REJOIN, /* all aborted: waiting for the new round */
	STEP_REFORM, /* membership sent: waiting for reformed */
};

static const char *const step_names[] = {
    [STEP_NONE] = "",
    [STEP_ABORT] = "abort",
    [STEP_REJOIN] = "rejoin",
    [STEP_REFORM] = "membership",
};

static int worker_alive(const struct agent_worker *w)
{
	return w->pid > 0 && !w->reaped;
}

/* ------------------------------------------------------- deadline */

static void miss(struct agent *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* miss: this re-form step failed; the loop falls back to stopping and
 * starting the node's workers (once per step) */
static void miss(struct agent *a, const char *fmt, ...)
{
	char why[512];
	va_list ap;
	if (a->reform_step == STEP_NONE || a->reform_missed)
		return;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	a->reform_missed = 1;
	log_warn("in-place re-form of round %llu failed (%s step): %s; "
		 "restarting this node's workers",
		 (unsigned long long)a->reform_round,
		 step_names[a->reform_step], why);
	agent_fsm_post_kind(&a->fsm, AGENT_EV_REFORM_MISSED, 0);
}

/* rejoin_ms: how long the rejoin may take. The round waits for the other
 * nodes, and a node falling back takes up to one deadline to notice, its
 * grace to stop its workers and its own join; the round then closes
 * after the last call at most. */
static uint64_t rejoin_ms(const struct agent *a)
{
	return 2 * a->cfg.reform_timeout_ms + a->cfg.shutdown_timeout_ms +
	       a->cfg.last_call_timeout_ms;
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct agent *a = arg;
	double s = (double)a->cfg.reform_timeout_ms / 1000;
	(void)fd;
	(void)what;
	if (a->reform_step == STEP_REJOIN) {
		miss(a, "no new round within %g s",
		     (double)rejoin_ms(a) / 1000);
		return;
	}
	for (int i = 0; i < a->n_workers; i++) {
		struct agent_worker *w = &a->workers[i];
		if (w->ctl.wait != AGENT_CONTROL_WAIT_NONE &&
		    !w->ctl.answered) {
			miss(a,
			     "rank %d (pid %ld) did not answer %s within %g s",
			     w->rank, (long)w->pid, step_names[a->reform_step],
			     s);
			return;
		}
	}
	miss(a, "no answer within %g s", s);
}

/* arm starts step's deadline */
static void arm(struct agent *a, int step)
{
	struct timeval tv;
	uint64_t ms =
	    step == STEP_REJOIN ? rejoin_ms(a) : a->cfg.reform_timeout_ms;
	a->reform_step = step;
	a->reform_missed = 0;
	if (!a->reform_timer)
		a->reform_timer = evtimer_new(a->base, on_deadline, a);
	if (!a->reform_timer) {
		miss(a, "out of memory");
		return;
	}
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	evtimer_add(a->reform_timer, &tv);
}

void control_cancel(struct agent *a)
{
	a->reform_step = STEP_NONE;
	a->reform_missed = 0;
	if (a->reform_timer)
		evtimer_del(a->reform_timer);
	for (int i = 0; i < a->n_workers; i++) {
		a->workers[i].ctl.wait = AGENT_CONTROL_WAIT_NONE;
		a->workers[i].ctl.answered = 0;
	}
}

/* check_answers: when every kept worker has answered, the step is over */
static void check_answers(struct agent *a)
{
	int step = a->reform_step;
	uint64_t round = a->reform_round;
	if (step != STEP_ABORT && step != STEP_REFORM)
		return;
	for (int i = 0; i < a->n_workers; i++) {
		const struct agent_worker *w = &a->workers[i];
		if (w->ctl.wait != AGENT_CONTROL_WAIT_NONE && !w->ctl.answered)
			return;
	}
	control_cancel(a);
	if (step == STEP_ABORT) {
		log_info("every worker of this node aborted round %llu; "
			 "rejoining with them kept",
			 (unsigned long long)round);
		/* a longer deadline bounds the rejoin (rejoin_ms) */
		arm(a, STEP_REJOIN);
		a->reform_round = round;
		agent_fsm_post_kind(&a->fsm, AGENT_EV_ABORTED, round);
		return;
	}
	log_info("every kept worker of this node re-formed in round %llu",
		 (unsigned long long)round);
	/* their clocks start again: the re-form was no hang */
	for (int i = 0; i < a->n_workers; i++)
		if (worker_alive(&a->workers[i]))
			progress_worker_started(&a->workers[i]);
	if (progress_arm(a) != 0)
		log_warn("cannot start the progress timer: out of memory");
	agent_fsm_post_kind(&a->fsm, AGENT_EV_REFORMED, round);
}

/* ------------------------------------------------------- the channel */

/* say_plain: the one line about w's turning plain */
static void say_plain(struct agent_worker *w)
{
	if (w->ctl.plain_said || !w->ctl.plain_why[0])
		return;
	w->ctl.plain_said = 1;
	log_warn("rank %d (pid %ld), control channel: %s; treating it as a "
		 "plain worker from now on",
		 w->rank, (long)w->pid, w->ctl.plain_why);
}

/* broken: the channel is of no more use; w is plain from now on. Said
 * once: at once, or for a close (which is also how a worker exits)
 * only when it matters, at the next re-form (control_in_place). */
static void broken(struct agent_worker *w, int quiet, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void broken(struct agent_worker *w, int quiet, const char *fmt, ...)
{
	struct agent *a = w->a;
	va_list ap;
	int waited = w->ctl.wait != AGENT_CONTROL_WAIT_NONE && !w->ctl.answered;
	if (w->ctl.state == AGENT_CONTROL_PLAIN ||
	    w->ctl.state == AGENT_CONTROL_NONE)
		return;
	va_start(ap, fmt);
	vsnprintf(w->ctl.plain_why, sizeof(w->ctl.plain_why), fmt, ap);
	va_end(ap);
	w->ctl.state = AGENT_CONTROL_PLAIN;
	w->ctl.handles = 0;
	buf_release(&w->ctl.out);
	if (w->ctl.wev)
		event_del(w->ctl.wev);
	if (!quiet || waited)
		say_plain(w);
	if (waited)
		miss(a, "rank %d: %s", w->rank, w->ctl.plain_why);
}

static void flush_out(struct agent_worker *w)
{
	struct agent_control *c = &w->ctl;
	if (c->fd < 0)
		return;
	while (c->out.len > 0) {
		ssize_t n = send(c->fd, c->out.data, c->out.len,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			buf_consume(&c->out, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			event_add(c->wev, NULL);
			return;
		}
		broken(w, 1, "cannot write: %s",
		       n < 0 ? strerror(errno) : "closed");
		return;
	}
	event_del(c->wev);
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	flush_out(arg);
}

/* sent: a line was appended to w's buffer by a writer (rc its code) */
static void sent(struct agent_worker *w, int rc)
{
	if (rc == DL_ELIMIT) {
		broken(w, 0,
		       "more than %d bytes unread (it does not read its "
		       "channel)",
		       CONTROL_OUT_MAX);
		return;
	}
	if (rc != 0) {
		broken(w, 0, "out of memory writing to it");
		return;
	}
	flush_out(w);
}

static void on_hello(struct agent_worker *w, const struct control_msg *m)
{
	if (w->ctl.state == AGENT_CONTROL_SPEAKS) {
		log_debug("rank %d: a second hello ignored", w->rank);
		return;
	}
	if (m->version != CONTROL_VERSION) {
		/* no welcome: the worker knows it is not heard */
		log_info("rank %d (pid %ld) speaks control protocol version "
			 "%llu, this agent %d: treating it as a plain worker",
			 w->rank, (long)w->pid, (unsigned long long)m->version,
			 CONTROL_VERSION);
		w->ctl.state = AGENT_CONTROL_PLAIN;
		return;
	}
	w->ctl.state = AGENT_CONTROL_SPEAKS;
	w->ctl.handles = m->handles;
	log_debug("rank %d (pid %ld) speaks the control protocol (handles "
		  "%s%s%s%s)",
		  w->rank, (long)w->pid,
		  m->handles & CONTROL_HANDLES_ABORT ? "abort " : "",
		  m->handles & CONTROL_HANDLES_MEMBERSHIP ? "membership " : "",
		  m->handles & CONTROL_HANDLES_PREEMPT ? "preempt " : "",
		  m->handles & CONTROL_HANDLES_DUMP ? "dump" : "");
	sent(w, control_write_welcome(&w->ctl.out, CONTROL_VERSION,
				      w->a->cfg.reform_timeout_ms,
				      rejoin_ms(w->a), preempt_grace_ms(w->a)));
}

/* on_answer: aborted or reformed; only the one awaited, for its round */
static void on_answer(struct agent_worker *w, const struct control_msg *m,
		      enum agent_control_wait kind)
{
	if (w->ctl.wait != kind || w->ctl.answered ||
	    m->round != w->a->reform_round) {
		log_debug("rank %d: %s for round %llu ignored (not awaited)",
			  w->rank, control_msg_name(m->type),
			  (unsigned long long)m->round);
		return;
	}
	w->ctl.answered = 1;
	if (m->step > w->ctl.step || !w->ctl.has_step) {
		w->ctl.step = m->step;
		w->ctl.has_step = 1;
	}
	check_answers(w->a);
}

static void on_message(struct agent_worker *w, const struct control_msg *m)
{
	if (m->type != CONTROL_MSG_HELLO &&
	    w->ctl.state != AGENT_CONTROL_SPEAKS) {
		broken(w, 0, "\"%s\" before hello", control_msg_name(m->type));
		return;
	}
	switch (m->type) {
	case CONTROL_MSG_HELLO: on_hello(w, m); break;
	case CONTROL_MSG_STEP:
		if (w->ctl.has_step && m->step < w->ctl.step) {
			broken(w, 0, "step %llu after step %llu",
			       (unsigned long long)m->step,
			       (unsigned long long)w->ctl.step);
			return;
		}
		w->ctl.step = m->step;
		w->ctl.has_step = 1;
		w->ctl.step_ms = clock_now_ms();
		w->last_progress_ms = w->ctl.step_ms; /* progress.c */
		w->moved_ms = w->ctl.step_ms;
		preempt_note_step(w);
		break;
	case CONTROL_MSG_ABORTED:
		on_answer(w, m, AGENT_CONTROL_WAIT_ABORTED);
		break;
	case CONTROL_MSG_REFORMED:
		on_answer(w, m, AGENT_CONTROL_WAIT_REFORMED);
		break;
	case CONTROL_MSG_DUMPED: hang_dumped(w, m->id); break;
	case CONTROL_MSG_UNKNOWN: break; /* nothing of ours */
	}
}

static void take_lines(struct agent_worker *w)
{
	const char *line;
	size_t len;
	int rc;
	while (w->ctl.state == AGENT_CONTROL_OPEN ||
	       w->ctl.state == AGENT_CONTROL_SPEAKS) {
		struct control_msg m;
		char err[256];
		rc = control_reader_next(w->ctl.in, &line, &len);
		if (rc == 0)
			return;
		if (rc < 0) {
			broken(w, 0, "a line longer than %d bytes",
			       CONTROL_LINE_MAX);
			return;
		}
		if (control_parse_line(line, len, &m, err, sizeof(err)) != 0) {
			broken(w, 0, "bad line (%s)", err);
			return;
		}
		on_message(w, &m);
	}
}

/* shut: the socket is closed and nothing more is read or written; the
 * events stay (freed by control_close) as this may run in their own
 * callback */
static void shut(struct agent_worker *w)
{
	struct agent_control *c = &w->ctl;
	if (c->rev)
		event_del(c->rev);
	if (c->wev)
		event_del(c->wev);
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	buf_release(&c->out);
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
	struct agent_worker *w = arg;
	struct agent_control *c = &w->ctl;
	(void)what;
	/* a bounded number of reads per wakeup: one chatty worker does not
	 * keep the loop from the others */
	for (int round = 0; round < 16; round++) {
		char sink[4096], *p;
		size_t avail;
		ssize_t n;
		int heard = c->state == AGENT_CONTROL_OPEN ||
			    c->state == AGENT_CONTROL_SPEAKS;
		if (heard) {
			p = control_reader_space(c->in, &avail);
		} else {
			p = sink;
			avail = sizeof(sink);
		}
		if (avail == 0) { /* a full line without newline */
			take_lines(w);
			if (c->state != AGENT_CONTROL_PLAIN)
				return;
			continue;
		}
		n = read((int)fd, p, avail);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			broken(w, 1, "closed by the worker");
			shut(w);
			return;
		}
		if (heard) {
			control_reader_commit(c->in, (size_t)n);
			take_lines(w);
		}
	}
}

int control_open(struct agent_worker *w, int *child_fd)
{
	struct agent_control *c = &w->ctl;
	int sv[2], fl;
	*child_fd = -1;
	c->fd = -1;
	c->state = AGENT_CONTROL_NONE;
	buf_init(&c->out, CONTROL_OUT_MAX);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return DL_ESYS;
	/* the worker's number must be above its stdio */
	if (sv[1] <= 2) {
		int hi = fcntl(sv[1], F_DUPFD_CLOEXEC, 3);
		close(sv[1]);
		sv[1] = hi;
	}
	fl = fcntl(sv[0], F_GETFL);
	c->in = malloc(sizeof(*c->in));
	c->rev = event_new(w->a->base, sv[0], EV_READ | EV_PERSIST, on_read, w);
	c->wev = event_new(w->a->base, sv[0], EV_WRITE, on_write, w);
	if (sv[1] < 0 || fl < 0 || fcntl(sv[0], F_SETFL, fl | O_NONBLOCK) < 0 ||
	    !c->in || !c->rev || !c->wev) {
		c->fd = sv[0];
		control_close(w);
		if (sv[1] >= 0)
			close(sv[1]);
		return DL_ESYS;
	}
	control_reader_init(c->in);
	c->fd = sv[0];
	c->state = AGENT_CONTROL_OPEN;
	event_add(c->rev, NULL);
	*child_fd = sv[1];
	return 0;
}

void control_close(struct agent_worker *w)
{
	struct agent_control *c = &w->ctl;
	if (c->rev)
		event_free(c->rev);
	if (c->wev)
		event_free(c->wev);
	c->rev = c->wev = NULL;
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->in);
	c->in = NULL;
	buf_release(&c->out);
	if (c->state != AGENT_CONTROL_NONE)
		c->state = AGENT_CONTROL_PLAIN;
}

void control_worker_finished(struct agent_worker *w)
{
	if (w->ctl.wait != AGENT_CONTROL_WAIT_NONE && !w->ctl.answered)
		miss(w->a, "rank %d (pid %ld) exited", w->rank, (long)w->pid);
	w->ctl.wait = AGENT_CONTROL_WAIT_NONE;
	control_close(w);
}

/* control_send_dump asks w for a dump (hang_collect.c); 0 when the line
 * is on its way, -1 when w does not speak `dump` or its channel broke */
int control_send_dump(struct agent_worker *w, const char *id, const char *path)
{
	if (w->ctl.state != AGENT_CONTROL_SPEAKS ||
	    !(w->ctl.handles & CONTROL_HANDLES_DUMP))
		return -1;
	sent(w, control_write_dump(&w->ctl.out, id, path));
	return w->ctl.state == AGENT_CONTROL_SPEAKS ? 0 : -1;
}

/* ------------------------------------------------------- the re-form */

int control_in_place(struct agent *a)
{
	uint64_t now = clock_now_ms();
	struct procfs_stat pi;
	int n = 0;
	/* nor would the ranks of a node that stalled (--hang-timeout) this
	 * round: the stuck one never reaches its channel's abort */
	if (a->stall_round == a->fsm.r.round + 1)
		return 0;
	for (int i = 0; i < a->n_workers; i++) {
		struct agent_worker *w = &a->workers[i];
		if (!worker_alive(w))
			continue;
		/* a hung worker (progress.c) would not answer abort either:
		 * the node is stopped as today, without waiting for it */
		if (a->cfg.progress_timeout_ms &&
		    now - w->last_progress_ms >= a->cfg.progress_timeout_ms)
			return 0;
		/* nor would one stopped by a signal (SIGSTOP, a debugger) */
		if (procfs_read_stat(w->pid, &pi) == 0 &&
		    (pi.state == 'T' || pi.state == 't')) {
			log_info("rank %d (pid %ld) is stopped (state %c): it "
				 "cannot re-form in place; stopping this "
				 "node's workers",
				 w->rank, (long)w->pid, pi.state);
			return 0;
		}
		if (w->ctl.state != AGENT_CONTROL_SPEAKS ||
		    (w->ctl.handles & CONTROL_HANDLES_IN_PLACE) !=
			CONTROL_HANDLES_IN_PLACE) {
			say_plain(w);
			return 0;
		}
		n++;
	}
	return n > 0;
}

void control_abort(struct agent *a, uint64_t round, const char *reason)
{
	control_cancel(a);
	a->reform_round = round;
	arm(a, STEP_ABORT);
	for (int i = 0; i < a->n_workers; i++) {
		struct agent_worker *w = &a->workers[i];
		if (!worker_alive(w))
			continue;
		w->ctl.wait = AGENT_CONTROL_WAIT_ABORTED;
		w->ctl.answered = 0;
		if (w->ctl.state != AGENT_CONTROL_SPEAKS) {
			miss(a, "rank %d does not speak the protocol", w->rank);
			return;
		}
		sent(w, control_write_abort(&w->ctl.out, round, reason));
		if (a->reform_missed)
			return;
	}
	check_answers(a); /* none to wait for */
}

void control_membership(struct agent *a)
{
	const struct agent_round *r = &a->fsm.r;
	char prefix[320];
	control_cancel(a);
	a->reform_round = r->round;
	arm(a, STEP_REFORM);
	snprintf(prefix, sizeof(prefix), "%s/%llu/", a->cfg.run_id,
		 (unsigned long long)r->round);
	for (int i = 0; i < a->n_workers; i++) {
		struct agent_worker *w = &a->workers[i];
		struct control_membership m = {
		    .round = r->round,
		    .rank = w->rank,
		    .world_size = r->world_size,
		    .local_rank = w->local_rank,
		    .local_world_size = a->cfg.nproc,
		    .node_rank = r->node_rank,
		    .nnodes = r->nnodes,
		    .restart_count = r->restart_count,
		    .master_addr = r->master_addr,
		    .master_port = r->master_port,
		    .store_prefix = prefix,
		};
		if (!worker_alive(w))
			continue;
		w->ctl.wait = AGENT_CONTROL_WAIT_REFORMED;
		w->ctl.answered = 0;
		if (w->ctl.state != AGENT_CONTROL_SPEAKS) {
			miss(a, "rank %d no longer speaks the protocol",
			     w->rank);
			return;
		}
		sent(w, control_write_membership(&w->ctl.out, &m));
		if (a->reform_missed)
			return;
	}
	check_answers(a);
}

void control_hang_up(struct agent *a)
{
	for (int i = 0; i < a->n_workers; i++) {
		struct agent_worker *w = &a->workers[i];
		/* the worker reads the end of its channel; we still drain
		 * what it writes until it closes its end */
		if (worker_alive(w) && w->ctl.fd >= 0)
			shutdown(w->ctl.fd, SHUT_WR);
	}
}

void control_preempt(struct agent *a, uint64_t step)
{
	for (int i = 0; i < a->n_workers; i++) {
		struct agent_worker *w = &a->workers[i];
		if (worker_alive(w) && w->ctl.state == AGENT_CONTROL_SPEAKS)
			sent(w, control_write_preempt(&w->ctl.out, step));
	}
}

void control_release(struct agent *a)
{
	control_cancel(a);
	if (a->reform_timer)
		event_free(a->reform_timer);
	a->reform_timer = NULL;
}
