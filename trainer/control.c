/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control.c - the worker control channel of dlaunch-train: the socket
 * inherited through DLAUNCH_CONTROL_FD, a reader thread of its own (the
 * main thread may be inside a collective when an abort arrives) and the
 * lines the worker writes. Protocol: docs/worker-protocol.md.
 *
 * The reader keeps only what the main loop needs: the newest accepted
 * abort and the newest accepted membership, each fenced by the highest
 * round seen in a membership. A dump it answers itself (the file through
 * control_dump.c and the hook main sets, then `dumped`), so that a worker
 * whose main thread is stuck, in a collective or anywhere else, still
 * tells where it is. Any breach of the protocol, or the agent
 * closing its end, ends the channel for good; the worker then behaves as
 * a plain one (a failed collective ends it, as it always did).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "control.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"
#include "dlaunch/parse.h"

#define SEND_TIMEOUT_S 5 /* the agent drains the channel; never wait long */

struct control {
	int fd;
	pthread_t thread;
	int thread_started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* under mu */
	int dead;     /* the channel is over (logged once) */
	int welcomed; /* the agent answered hello with welcome */
	uint64_t reform_timeout_ms, rejoin_timeout_ms; /* its welcome's */
	uint64_t fence_round; /* highest round seen in a membership */
	int abort_pending;
	atomic_int abort_raised; /* abort_pending, for lock-free readers */
	uint64_t abort_round;
	int membership_pending;
	struct control_membership membership;
	control_abort_fn abort_fn;
	void *abort_ctx;
	int in_hook; /* the reader thread runs abort_fn */
	control_dump_fn dump_fn;
	void *dump_ctx;
	int in_dump; /* the reader thread writes a dump with dump_fn */
	/* serialises the lines of the main thread and of the reader (a
	 * dump's answer), so that they never interleave */
	pthread_mutex_t wmu;
};

/* end_channel: bad input or a closed channel; mu held */
static void end_channel(struct control *c, const char *why)
{
	if (!c->dead)
		log_warn("control channel: %s; carrying on without it "
			 "(a failure now ends this worker)",
			 why);
	c->dead = 1;
	pthread_cond_broadcast(&c->cv);
}

static void handle(struct control *c, const struct control_msg *m)
{
	switch (m->type) {
	case CONTROL_WELCOME:
		if (m->version != CONTROL_VERSION) {
			end_channel(c, "welcome names a version this worker "
				       "does not speak");
			return;
		}
		c->welcomed = 1;
		c->reform_timeout_ms = m->reform_timeout_ms;
		c->rejoin_timeout_ms = m->rejoin_timeout_ms;
		break;
	case CONTROL_ABORT:
		if (m->round < c->fence_round) {
			log_info("control channel: ignoring the abort of round "
				 "%llu (already in round %llu)",
				 (unsigned long long)m->round,
				 (unsigned long long)c->fence_round);
			return;
		}
		log_info("control channel: abort of round %llu: %s",
			 (unsigned long long)m->round,
			 m->reason[0] ? m->reason : "no reason given");
		c->abort_pending = 1;
		atomic_store(&c->abort_raised, 1);
		c->abort_round = m->round;
		if (c->abort_fn) {
			c->in_hook = 1;
			c->abort_fn(c->abort_ctx);
			c->in_hook = 0;
		}
		break;
	case CONTROL_MEMBERSHIP:
		if (m->round < c->fence_round ||
		    (c->membership_pending &&
		     m->round <= c->membership.round)) {
			log_info("control channel: ignoring the membership of "
				 "round %llu (already saw round %llu)",
				 (unsigned long long)m->round,
				 (unsigned long long)c->fence_round);
			return;
		}
		c->fence_round = m->round;
		c->membership = m->m;
		c->membership_pending = 1;
		break;
	default: /* preempt was not declared; dump: answer_dump */ return;
	}
	pthread_cond_broadcast(&c->cv);
}

static void send_line(struct control *c, const char *line, int len);

/* answer_dump: on the reader thread, outside mu: the file, then the
 * answer (with the reason when there is no file) */
static void answer_dump(struct control *c, const struct control_msg *m)
{
	char err[256], line[2048];
	control_dump_fn fn;
	void *ctx;
	int rc, len;

	pthread_mutex_lock(&c->mu);
	fn = c->dump_fn;
	ctx = c->dump_ctx;
	c->in_dump = 1;
	pthread_mutex_unlock(&c->mu);
	rc = control_dump_write(m->dump_path, fn, ctx, err, sizeof(err));
	pthread_mutex_lock(&c->mu);
	c->in_dump = 0;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
	if (rc != 0)
		log_warn("control channel: dump %s: %s", m->dump_id, err);
	len = control_format_dumped(line, sizeof(line), m->dump_id,
				    rc != 0 ? err : NULL);
	if (len < 0) /* an id full of escapes: the answer without the why */
		len =
		    control_format_dumped(line, sizeof(line), m->dump_id, NULL);
	send_line(c, line, len);
}

static void *reader_main(void *arg)
{
	struct control *c = arg;
	char *buf = malloc(CONTROL_MAX_LINE_BYTES);
	size_t have = 0;
	const char *why = NULL;
	char bad[300];

	if (buf == NULL)
		why = "out of memory";
	while (why == NULL) {
		ssize_t n =
		    read(c->fd, buf + have, CONTROL_MAX_LINE_BYTES - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			why = n == 0 ? "the agent closed it" : "read failed";
			break;
		}
		have += (size_t)n;
		for (;;) {
			char *nl = memchr(buf, '\n', have);
			struct control_msg msg;
			char err[256];
			size_t used;

			if (nl == NULL) {
				if (have == CONTROL_MAX_LINE_BYTES)
					why = "a line longer than 65536 bytes";
				break;
			}
			used = (size_t)(nl - buf) + 1;
			if (control_parse(buf, used - 1, &msg, err,
					  sizeof(err)) != 0) {
				snprintf(bad, sizeof(bad), "bad message (%s)",
					 err);
				why = bad;
				break;
			}
			if (msg.type == CONTROL_DUMP) {
				answer_dump(c, &msg);
			} else {
				pthread_mutex_lock(&c->mu);
				handle(c, &msg);
				pthread_mutex_unlock(&c->mu);
			}
			memmove(buf, buf + used, have - used);
			have -= used;
		}
	}
	pthread_mutex_lock(&c->mu);
	end_channel(c, why);
	pthread_mutex_unlock(&c->mu);
	free(buf);
	return NULL;
}

static void send_line(struct control *c, const char *line, int len)
{
	int dead;

	if (c == NULL || len < 0)
		return;
	pthread_mutex_lock(&c->mu);
	dead = c->dead;
	pthread_mutex_unlock(&c->mu);
	if (dead)
		return;
	/* two writers (the main thread, the reader's dump answers), one
	 * line at a time; a line is far below the socket buffer, so it goes
	 * whole or the agent is not reading */
	pthread_mutex_lock(&c->wmu);
	while (len > 0) {
		ssize_t n = send(c->fd, line, (size_t)len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			pthread_mutex_lock(&c->mu);
			end_channel(c, "cannot write to it");
			pthread_mutex_unlock(&c->mu);
			break;
		}
		line += n;
		len -= (int)n;
	}
	pthread_mutex_unlock(&c->wmu);
}

int control_open(struct control **out, char *err, size_t err_size)
{
	const char *v = getenv("DLAUNCH_CONTROL_FD");
	struct control *c;
	struct timeval tv = {SEND_TIMEOUT_S, 0};
	char line[128];
	int fd, type = 0;
	socklen_t len = sizeof(type);

	*out = NULL;
	if (v == NULL || *v == '\0')
		return 0;
	if (parse_int(v, 0, 1 << 20, &fd) != 0)
		return dl_errorf(err, err_size, DL_EINVAL,
				 "DLAUNCH_CONTROL_FD='%s' is not a descriptor "
				 "number",
				 v);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
	    type != SOCK_STREAM)
		return dl_errorf(err, err_size, DL_EINVAL,
				 "DLAUNCH_CONTROL_FD=%d is not a stream socket "
				 "(%s)",
				 fd, errno ? strerror(errno) : "another type");
	/* programs this worker starts must not inherit the channel */
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return DL_ENOMEM;
	c->fd = fd;
	/* the round this worker was started in fences older messages */
	v = getenv("DLAUNCH_ROUND");
	if (v && *v && parse_u64(v, 0, INT64_MAX, &c->fence_round) != 0)
		c->fence_round = 0;
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->wmu, NULL);
	{ /* deadlines are CLOCK_MONOTONIC, like every timeout here */
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&c->cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	send_line(c, line, control_format_hello(line, sizeof(line)));
	if (pthread_create(&c->thread, NULL, reader_main, c) != 0) {
		close(fd);
		pthread_mutex_destroy(&c->mu);
		pthread_mutex_destroy(&c->wmu);
		pthread_cond_destroy(&c->cv);
		free(c);
		return dl_errorf(err, err_size, DL_ESYS,
				 "cannot start the control channel's reader");
	}
	c->thread_started = 1;
	*out = c;
	return 0;
}

void control_close(struct control *c)
{
	if (c == NULL)
		return;
	/* the reader sees EOF of its own read once the socket is shut;
	 * quietly: this is the end, not a broken channel */
	pthread_mutex_lock(&c->mu);
	c->dead = 1;
	pthread_mutex_unlock(&c->mu);
	shutdown(c->fd, SHUT_RDWR);
	if (c->thread_started)
		pthread_join(c->thread, NULL);
	close(c->fd);
	pthread_mutex_destroy(&c->mu);
	pthread_mutex_destroy(&c->wmu);
	pthread_cond_destroy(&c->cv);
	free(c);
}

void control_set_abort_hook(struct control *c, control_abort_fn fn, void *ctx)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&c->mu);
	c->abort_fn = fn;
	c->abort_ctx = ctx;
	if (fn && c->abort_pending)
		fn(ctx);
	pthread_mutex_unlock(&c->mu);
}

void control_set_dump_hook(struct control *c, control_dump_fn fn, void *ctx)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&c->mu);
	while (c->in_dump)
		pthread_cond_wait(&c->cv, &c->mu);
	c->dump_fn = fn;
	c->dump_ctx = ctx;
	pthread_mutex_unlock(&c->mu);
}

int control_in_place(struct control *c)
{
	int ok;

	if (c == NULL)
		return 0;
	pthread_mutex_lock(&c->mu);
	ok = c->welcomed && !c->dead;
	pthread_mutex_unlock(&c->mu);
	return ok;
}

int control_abort_pending(struct control *c, uint64_t *round)
{
	int pending;

	if (c == NULL)
		return 0;
	pthread_mutex_lock(&c->mu);
	pending = c->abort_pending;
	*round = c->abort_round;
	pthread_mutex_unlock(&c->mu);
	return pending;
}

uint64_t control_membership_wait_ms(struct control *c, uint64_t fallback_ms)
{
	uint64_t agent_ms = 0;

	if (c == NULL)
		return fallback_ms;
	pthread_mutex_lock(&c->mu);
	if (c->reform_timeout_ms && c->rejoin_timeout_ms)
		agent_ms = c->reform_timeout_ms + c->rejoin_timeout_ms;
	pthread_mutex_unlock(&c->mu);
	return agent_ms && agent_ms < fallback_ms ? agent_ms : fallback_ms;
}

static void deadline_after(struct timespec *ts, uint64_t ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += (time_t)(ms / 1000);
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/* wait_for: waits on cv (mu held) until *flag or the channel's end */
static int wait_for(struct control *c, const int *flag,
		    const struct timespec *deadline)
{
	while (!*flag && !c->dead)
		if (pthread_cond_timedwait(&c->cv, &c->mu, deadline) ==
		    ETIMEDOUT)
			return *flag ? 0 : DL_ETIMEDOUT;
	return *flag ? 0 : DL_ECLOSED;
}

int control_wait_abort(struct control *c, uint64_t timeout_ms, uint64_t *round)
{
	struct timespec deadline;
	int rc;

	if (c == NULL)
		return DL_ECLOSED;
	deadline_after(&deadline, timeout_ms);
	pthread_mutex_lock(&c->mu);
	rc = wait_for(c, &c->abort_pending, &deadline);
	*round = c->abort_round;
	pthread_mutex_unlock(&c->mu);
	return rc;
}

void control_take_abort(struct control *c)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&c->mu);
	c->abort_pending = 0;
	atomic_store(&c->abort_raised, 0);
	pthread_mutex_unlock(&c->mu);
}

const atomic_int *control_abort_flag(struct control *c)
{
	return c ? &c->abort_raised : NULL;
}

int control_wait_membership(struct control *c, uint64_t after_round,
			    uint64_t timeout_ms, struct control_membership *m)
{
	struct timespec deadline;
	int rc;

	if (c == NULL)
		return DL_ECLOSED;
	deadline_after(&deadline, timeout_ms);
	pthread_mutex_lock(&c->mu);
	for (;;) {
		rc = wait_for(c, &c->membership_pending, &deadline);
		if (rc != 0)
			break;
		if (c->membership.round > after_round) {
			*m = c->membership;
			c->membership_pending = 0;
			break;
		}
		c->membership_pending = 0; /* fenced: an older round */
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

void control_send_step(struct control *c, uint64_t step)
{
	char line[96];

	send_line(c, line, control_format_step(line, sizeof(line), step));
}

void control_send_aborted(struct control *c, uint64_t round, uint64_t step)
{
	char line[128];

	send_line(c, line,
		  control_format_aborted(line, sizeof(line), round, step));
}

void control_send_reformed(struct control *c, uint64_t round, uint64_t step)
{
	char line[128];

	send_line(c, line,
		  control_format_reformed(line, sizeof(line), round, step));
}
