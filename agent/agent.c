/*
 * agent.c - the agent's round loop.
 *
 *   JOINING --join answered--> RUNNING --all succeeded--> DONE
 *      ^                          |  \--a worker failed / restart--+
 *      |                          v                                 |
 *      +------- REJOIN ------- STOPPING <---------------------------+
 *                                 |--EXIT--> (LEAVING) --> EXITED
 *
 * In rendezvous mode every decision about the job comes from the server
 * (join, heartbeat, watch and report answers carry an action); in static
 * mode the agent decides alone and restarts its own workers. Requests that
 * fail to reach the server are retried with backoff while the workers keep
 * running. An answer is about the round its request named; once the agent
 * has left that round (its requests are cancelled then), an answer about
 * it is never applied to the next one.
 */
#include <errno.h>
#include <event2/event.h>
#include <ftw.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/jsonh.h"
#include "dlaunch/log.h"
#include "dlaunch/parse.h"
#include "dlaunch/spawn.h"
#include "internal.h"

#define WATCH_WAIT_MS	 30000
#define JOIN_WAIT_MS	 30000
#define BACKOFF_FIRST_MS 200
#define BACKOFF_MAX_MS	 5000
#define LEAVE_TIMEOUT_MS 3000
#define LEAVE_ATTEMPTS	 3

static void send_join(struct agent *a);
static void send_watch(struct agent *a);
static void send_heartbeat(struct agent *a);
static void send_report(struct agent *a);
static void send_leave(struct agent *a);
static void send_fetch(struct agent *a);
static void finish(struct agent *a);

/* ---------------------------------------------------------------- ops */

static void op_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct agent_op *op = arg;
	(void)fd;
	(void)what;
	op->send(op->a);
}

static void op_init(struct agent *a, struct agent_op *op,
		    void (*send)(struct agent *))
{
	op->a = a;
	op->send = send;
	op->retry = evtimer_new(a->base, op_retry_cb, op);
	op->backoff_ms = BACKOFF_FIRST_MS;
}

static void op_cancel(struct agent_op *op)
{
	if (op->call) {
		client_cancel(op->a->client, op->call);
		op->call = NULL;
	}
	if (op->retry)
		evtimer_del(op->retry);
}

static void op_release(struct agent_op *op)
{
	op_cancel(op);
	if (op->retry)
		event_free(op->retry);
	op->retry = NULL;
}

/* op_retry schedules another attempt after the current backoff. */
static void op_retry(struct agent_op *op, const char *what,
		     const struct client_reply *r)
{
	struct timeval tv;
	if (!op->warned) {
		if (r->transport_failed)
			log_warn("cannot reach rendezvous at %s for %s: %s (is "
				 "dlaunch-rdzv running?); retrying",
				 client_base_url(op->a->client), what,
				 r->error);
		else
			log_warn("rendezvous at %s answered %ld to %s: %s; "
				 "retrying",
				 client_base_url(op->a->client), r->status,
				 what, r->error);
		op->warned = 1;
	}
	tv.tv_sec = (time_t)(op->backoff_ms / 1000);
	tv.tv_usec = (suseconds_t)(op->backoff_ms % 1000) * 1000;
	evtimer_add(op->retry, &tv);
	op->backoff_ms *= 2;
	if (op->backoff_ms > BACKOFF_MAX_MS)
		op->backoff_ms = BACKOFF_MAX_MS;
}

static void op_ok(struct agent_op *op, const char *what)
{
	if (op->warned)
		log_info("rendezvous reachable again (%s)", what);
	op->warned = 0;
	op->backoff_ms = BACKOFF_FIRST_MS;
}

/* op_answered takes the steps every answer starts with: the call is over;
 * a transport failure or 5xx is retried with backoff (returns 0: nothing
 * more to do now), anything else resets the backoff (returns 1). */
static int op_answered(struct agent_op *op, const char *what,
		       const struct client_reply *r)
{
	op->call = NULL;
	if (client_retryable(r)) {
		op_retry(op, what, r);
		return 0;
	}
	op_ok(op, what);
	return 1;
}

/* -------------------------------------------------------------- state */

static void exit_with(struct agent *a, int status)
{
	a->exit_status = status;
	a->state = AGENT_STOPPING;
	a->after_stop = AGENT_AFTER_EXIT;
}

static void stop_rdzv_traffic(struct agent *a)
{
	if (!a->client)
		return;
	op_cancel(&a->join);
	op_cancel(&a->watch);
	op_cancel(&a->heartbeat);
	if (a->hb_timer)
		evtimer_del(a->hb_timer);
}

/* begin_stop stops the workers; after_stop says what follows. */
static void begin_stop(struct agent *a, enum agent_after_stop next, int sig)
{
	a->state = AGENT_STOPPING;
	a->after_stop = next;
	workers_stop(a, sig);
}

/* handle_action acts on the action of an answer about the current round
 * (reply_action has matched it to that round). */
static void handle_action(struct agent *a, const char *action,
			  const char *job_state)
{
	if (!action || a->state == AGENT_JOINING || a->state == AGENT_LEAVING ||
	    a->state == AGENT_EXITED)
		return;
	if (a->state == AGENT_STOPPING && a->after_stop == AGENT_AFTER_EXIT)
		return; /* already on the way out */
	if (strcmp(action, "restart") == 0) {
		if (a->state == AGENT_RUNNING || a->state == AGENT_DONE) {
			log_info("round %llu ended (job %s); stopping workers "
				 "to rejoin",
				 (unsigned long long)a->r.round,
				 job_state ? job_state : "?");
			stop_rdzv_traffic(a);
			begin_stop(a, AGENT_AFTER_REJOIN, SIGTERM);
		}
	} else if (strcmp(action, "stop") == 0) {
		int failed = !job_state || strcmp(job_state, "SUCCEEDED") != 0;
		log_info("job %s ended: %s", a->cfg.run_id,
			 job_state ? job_state : "?");
		stop_rdzv_traffic(a);
		a->print_report = failed;
		exit_with(a, failed ? 1 : 0);
		workers_stop(a, SIGTERM);
	}
}

/*
 * answer_is_current tells whether the answer to op's request (a `what`)
 * is about the round the agent is in now. Every answer is read as an
 * answer about the round its request named: the "round" inside a 409 is
 * the job's round, not ours, and "restart" there means the round we named
 * is over. An answer that arrives after the agent has moved to another
 * round is stale whatever it says; acting on it would stop the new
 * round's workers.
 */
static int answer_is_current(struct agent *a, const struct agent_op *op,
			     const char *what)
{
	if (op->round == a->r.round)
		return 1;
	log_debug("ignoring the answer to a %s for round %llu (now in round "
		  "%llu)",
		  what, (unsigned long long)op->round,
		  (unsigned long long)a->r.round);
	return 0;
}

/* reply_action acts on the state/action of the answer to op's request,
 * when it is about the current round. */
static void reply_action(struct agent *a, const struct agent_op *op,
			 const char *what, const struct client_reply *r)
{
	const char *action = NULL, *state = NULL;
	if (!r->json || !answer_is_current(a, op, what))
		return;
	jsonh_get_str(r->json, "action", 0, 32, &action, NULL, 0);
	jsonh_get_str(r->json, "state", 0, 32, &state, NULL, 0);
	handle_action(a, action, state);
}

static void on_stopped(evutil_socket_t fd, short what, void *arg)
{
	struct agent *a = arg;
	(void)fd;
	(void)what;
	if (a->state != AGENT_STOPPING || a->n_live > 0 || a->report_pending)
		return;
	if (a->kill_timer)
		evtimer_del(a->kill_timer);
	workers_kill_strays(a);
	switch (a->after_stop) {
	case AGENT_AFTER_REJOIN:
		a->state = AGENT_JOINING;
		send_join(a);
		break;
	case AGENT_AFTER_RESTART_LOCAL:
		a->r.restart_count++;
		log_info("restarting workers (restart %d of %d)",
			 a->r.restart_count, a->cfg.max_restarts);
		a->state = AGENT_RUNNING;
		a->group_failed = 0;
		json_array_clear(a->failures);
		workers_start(a);
		break;
	case AGENT_AFTER_EXIT:
		if (a->print_report && a->client && !a->stopped_by_signal) {
			a->print_report = 0;
			send_fetch(a);
			break;
		}
		if (a->print_report) {
			report_print(a->cfg.run_id, a->failures,
				     (int)json_array_size(a->failures));
			a->print_report = 0;
		}
		if (a->client && a->joined && a->stopped_by_signal) {
			a->state = AGENT_LEAVING;
			send_leave(a);
			break;
		}
		finish(a);
		break;
	}
}

void agent_all_stopped(struct agent *a)
{
	event_active(a->stopped_ev, EV_TIMEOUT, 0);
}

static void group_failed(struct agent *a)
{
	if (a->cfg.mode == AGENT_MODE_STATIC) {
		if (a->r.restart_count < a->cfg.max_restarts) {
			begin_stop(a, AGENT_AFTER_RESTART_LOCAL, SIGTERM);
		} else {
			log_error("job %s failed: no restarts left (%d)",
				  a->cfg.run_id, a->cfg.max_restarts);
			a->print_report = 1;
			exit_with(a, 1);
			workers_stop(a, SIGTERM);
		}
		return;
	}
	/* the round is over for us: nothing more is said about it but the
	 * report, whose answer decides what follows */
	stop_rdzv_traffic(a);
	a->report_pending = 1;
	send_report(a);
	begin_stop(a, AGENT_AFTER_REJOIN, SIGTERM);
}

static void group_succeeded(struct agent *a)
{
	log_info("all %d worker(s) of this node succeeded", a->n_workers);
	if (a->cfg.mode == AGENT_MODE_STATIC) {
		exit_with(a, 0);
		agent_all_stopped(a);
		return;
	}
	a->state = AGENT_DONE;
	send_report(a);
}

void agent_worker_finished(struct agent *a, struct agent_worker *w)
{
	char tmp[16];
	int failed;
	if (!w->spawn_failed)
		a->n_live--;
	failed = w->spawn_failed || !WIFEXITED(w->wstatus) ||
		 WEXITSTATUS(w->wstatus) != 0;
	if (w->spawn_failed)
		log_error("rank %d could not be started", w->rank);
	else if (WIFSIGNALED(w->wstatus))
		log_msg(
		    a->state == AGENT_RUNNING ? LOG_WARN : LOG_INFO,
		    "rank %d (pid %ld) killed by %s", w->rank, (long)w->pid,
		    spawn_signal_name(WTERMSIG(w->wstatus), tmp, sizeof(tmp)));
	else if (failed)
		log_msg(a->state == AGENT_RUNNING ? LOG_WARN : LOG_INFO,
			"rank %d (pid %ld) exited with status %d", w->rank,
			(long)w->pid, WEXITSTATUS(w->wstatus));
	else
		log_debug("rank %d (pid %ld) exited with status 0", w->rank,
			  (long)w->pid);
	if (a->state == AGENT_RUNNING) {
		if (failed) {
			json_t *f = report_failure(w);
			if (f) {
				json_object_set_new(f, "node_id",
						    json_string(a->node_id));
				json_array_append_new(a->failures, f);
			}
			a->group_failed = 1;
			group_failed(a);
		} else if (a->n_live == 0 && !a->group_failed) {
			group_succeeded(a);
		}
	}
	if (a->n_live == 0)
		agent_all_stopped(a);
}

/*
 * agent_workers_hung records the n workers progress.c found without
 * progress (each still alive: it gets exit code -1 and no signal, the
 * SIGTERM/SIGKILL of the stop that follows is ours, not its failure) and
 * fails the group: stop, then the usual restart or exit.
 */
void agent_workers_hung(struct agent *a, struct agent_worker **hung, int n)
{
	if (a->state != AGENT_RUNNING)
		return;
	for (int i = 0; i < n; i++) {
		struct agent_worker *w = hung[i];
		json_t *f = report_hang(w, a->cfg.progress_timeout_ms);
		log_warn("rank %d (pid %ld) showed no progress for %g s (no "
			 "output, progress file untouched): taking it as hung",
			 w->rank, (long)w->pid,
			 (double)a->cfg.progress_timeout_ms / 1000);
		if (f) {
			json_object_set_new(f, "node_id",
					    json_string(a->node_id));
			json_array_append_new(a->failures, f);
		}
	}
	a->group_failed = 1;
	group_failed(a);
}

static void finish(struct agent *a)
{
	a->state = AGENT_EXITED;
	stop_rdzv_traffic(a);
	event_base_loopexit(a->base, NULL);
}

/* ------------------------------------------------------------ signals */

static void on_sigchld(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	workers_on_sigchld(arg);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct agent *a = arg;
	char tmp[16];
	(void)what;
	if (a->stopped_by_signal) {
		log_warn("received %s again; killing workers",
			 spawn_signal_name((int)sig, tmp, sizeof(tmp)));
		workers_kill_all(a);
		return;
	}
	log_warn("received %s; forwarding it to the workers and stopping",
		 spawn_signal_name((int)sig, tmp, sizeof(tmp)));
	a->stopped_by_signal = (int)sig;
	a->report_pending = 0;
	stop_rdzv_traffic(a);
	op_cancel(&a->report);
	exit_with(a, 128 + (int)sig);
	a->print_report = 0;
	workers_stop(a, (int)sig);
}

/* ----------------------------------------------------------- requests */

static void job_path(struct agent *a, char *out, size_t size, const char *what)
{
	snprintf(out, size, "/v1/jobs/%s/%s", a->cfg.run_id, what);
}

static json_t *identity(struct agent *a)
{
	json_t *o = json_object();
	json_object_set_new(o, "node_id", json_string(a->node_id));
	json_object_set_new(o, "incarnation", json_string(a->incarnation));
	return o;
}

/* pick_free_port binds port 0 and gives the port the kernel chose. */
static unsigned pick_free_port(void)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	unsigned port = 0;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
		port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

static int safe_addr(const char *s)
{
	if (!*s || strlen(s) > 255)
		return 0;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'z') ||
		      (*s >= 'A' && *s <= 'Z') || strchr(".:-_%[]", *s)))
			return 0;
	return 1;
}

static int parse_round(struct agent *a, json_t *j, char *err, size_t es)
{
	struct agent_round r;
	uint64_t round, node_rank, nnodes, world, offset, port, rc = 0;
	uint64_t hb = a->cfg.heartbeat_interval_ms;
	const char *maddr = NULL;
	if (jsonh_get_u64(j, "round", 1, 0, UINT64_MAX, &round, err, es) ||
	    jsonh_get_u64(j, "node_rank", 1, 0, 1 << 20, &node_rank, err, es) ||
	    jsonh_get_u64(j, "nnodes", 1, 1, 1 << 20, &nnodes, err, es) ||
	    jsonh_get_u64(j, "world_size", 1, 1, 1 << 30, &world, err, es) ||
	    jsonh_get_u64(j, "rank_offset", 1, 0, 1 << 30, &offset, err, es) ||
	    jsonh_get_str(j, "master_addr", 1, 255, &maddr, err, es) ||
	    jsonh_get_u64(j, "master_port", 1, 1, 65535, &port, err, es) ||
	    jsonh_get_u64(j, "restart_count", 0, 0, 1000000, &rc, err, es) ||
	    jsonh_get_u64(j, "heartbeat_interval_ms", 0, 10, 3600000, &hb, err,
			  es))
		return DL_EPROTO;
	if (offset + (uint64_t)a->cfg.nproc > world || node_rank >= nnodes ||
	    !safe_addr(maddr)) {
		snprintf(err, es, "inconsistent round assignment");
		return DL_EPROTO;
	}
	memset(&r, 0, sizeof(r));
	r.round = round;
	r.node_rank = (int)node_rank;
	r.nnodes = (int)nnodes;
	r.world_size = (int)world;
	r.rank_offset = (int)offset;
	r.restart_count = (int)rc;
	snprintf(r.master_addr, sizeof(r.master_addr), "%s", maddr);
	r.master_port = (unsigned)port;
	a->r = r;
	a->cfg.heartbeat_interval_ms = hb;
	return 0;
}

static void on_hb_timer(evutil_socket_t fd, short what, void *arg)
{
	struct agent *a = arg;
	(void)fd;
	(void)what;
	if (!a->heartbeat.call && !evtimer_pending(a->heartbeat.retry, NULL))
		send_heartbeat(a);
}

/* start_round_traffic begins the heartbeats and the watch of the round
 * just joined; nothing about an earlier round is left in flight. */
static void start_round_traffic(struct agent *a)
{
	struct timeval tv = {
	    (time_t)(a->cfg.heartbeat_interval_ms / 1000),
	    (suseconds_t)(a->cfg.heartbeat_interval_ms % 1000) * 1000};
	stop_rdzv_traffic(a);
	/* a success report of an earlier round (sent from DONE, then the
	 * round ended) is moot now; its body must not stand in for this
	 * round's report */
	op_cancel(&a->report);
	json_decref(a->pending_report);
	a->pending_report = NULL;
	a->report_pending = 0;
	if (!a->hb_timer)
		a->hb_timer =
		    event_new(a->base, -1, EV_PERSIST, on_hb_timer, a);
	event_add(a->hb_timer, &tv);
	send_watch(a);
}

static void on_join(void *arg, const struct client_reply *r)
{
	struct agent *a = arg;
	char err[256];
	if (r->misconfigured && a->state == AGENT_JOINING) {
		/* retrying would wait out the join timeout for nothing */
		a->join.call = NULL;
		log_error("cannot talk to rendezvous at %s: %s (check "
			  "--rdzv-endpoint and --rdzv-ca)",
			  client_base_url(a->client), r->error);
		exit_with(a, 1);
		agent_all_stopped(a);
		return;
	}
	if (!op_answered(&a->join, "join", r))
		return;
	if (a->state != AGENT_JOINING)
		return;
	if (r->status == 202) {
		send_join(a);
		return;
	}
	if (r->status == 410) {
		const char *state = NULL;
		if (r->json)
			jsonh_get_str(r->json, "state", 0, 32, &state, NULL, 0);
		log_info("job %s has already ended (%s)", a->cfg.run_id,
			 state ? state : "?");
		a->print_report = !state || strcmp(state, "SUCCEEDED") != 0;
		exit_with(a, a->print_report ? 1 : 0);
		agent_all_stopped(a);
		return;
	}
	if (r->status != 200) {
		log_error("rendezvous refused to let node %s join job %s: %s "
			  "(HTTP %ld)",
			  a->node_id, a->cfg.run_id,
			  *r->error ? r->error : "no reason given", r->status);
		exit_with(a, 1);
		agent_all_stopped(a);
		return;
	}
	if (!r->json || parse_round(a, r->json, err, sizeof(err)) != 0) {
		log_error("bad join answer from rendezvous: %s",
			  r->json ? err : "not a JSON object");
		exit_with(a, 1);
		agent_all_stopped(a);
		return;
	}
	a->joined = 1;
	log_info("round %llu: node rank %d of %d, ranks %d-%d of %d, master "
		 "%s:%u, restart %d",
		 (unsigned long long)a->r.round, a->r.node_rank, a->r.nnodes,
		 a->r.rank_offset, a->r.rank_offset + a->cfg.nproc - 1,
		 a->r.world_size, a->r.master_addr, a->r.master_port,
		 a->r.restart_count);
	a->state = AGENT_RUNNING;
	a->group_failed = 0;
	json_array_clear(a->failures);
	start_round_traffic(a);
	workers_start(a);
}

static void send_join(struct agent *a)
{
	char path[512];
	json_t *b = identity(a);
	if (!a->master_port_free)
		a->master_port_free = pick_free_port();
	if (a->addr[0])
		json_object_set_new(b, "addr", json_string(a->addr));
	json_object_set_new(b, "nproc", json_integer(a->cfg.nproc));
	if (a->master_port_free)
		json_object_set_new(
		    b, "master_port",
		    json_integer((json_int_t)a->master_port_free));
	json_object_set_new(b, "min_nodes", json_integer(a->cfg.min_nodes));
	json_object_set_new(b, "max_nodes", json_integer(a->cfg.max_nodes));
	json_object_set_new(b, "max_restarts",
			    json_integer(a->cfg.max_restarts));
	json_object_set_new(b, "join_timeout",
			    json_real((double)a->cfg.join_timeout_ms / 1000));
	json_object_set_new(
	    b, "last_call_timeout",
	    json_real((double)a->cfg.last_call_timeout_ms / 1000));
	json_object_set_new(
	    b, "heartbeat_interval",
	    json_real((double)a->cfg.heartbeat_interval_ms / 1000));
	json_object_set_new(
	    b, "heartbeat_timeout",
	    json_real((double)a->cfg.heartbeat_timeout_ms / 1000));
	json_object_set_new(b, "wait_ms", json_integer(JOIN_WAIT_MS));
	job_path(a, path, sizeof(path), "join");
	a->join.call =
	    client_call(a->client, "POST", path, b,
			JOIN_WAIT_MS + a->cfg.read_timeout_ms, on_join, a);
	json_decref(b);
	if (!a->join.call) {
		struct client_reply r = {.transport_failed = 1,
					 .error = "out of memory",
					 .body = ""};
		op_retry(&a->join, "join", &r);
	}
}

static void on_watch(void *arg, const struct client_reply *r)
{
	struct agent *a = arg;
	const char *action = NULL;
	if (!op_answered(&a->watch, "watch", r))
		return;
	if (!answer_is_current(a, &a->watch, "watch"))
		return; /* the current round has a watch of its own */
	if (r->json)
		jsonh_get_str(r->json, "action", 0, 32, &action, NULL, 0);
	if ((r->status == 200 || r->status == 409 || r->status == 410) &&
	    action && strcmp(action, "continue") != 0) {
		reply_action(a, &a->watch, "watch", r);
		return;
	}
	if (r->status != 200)
		log_warn("watch answered %ld: %s", r->status, r->error);
	if (a->state == AGENT_RUNNING || a->state == AGENT_DONE)
		send_watch(a); /* a timed-out long-poll: poll again */
}

static void send_watch(struct agent *a)
{
	char path[768];
	a->watch.round = a->r.round;
	snprintf(path, sizeof(path),
		 "/v1/jobs/%s/watch?round=%llu&node_id=%s&wait_ms=%d",
		 a->cfg.run_id, (unsigned long long)a->r.round, a->node_id,
		 WATCH_WAIT_MS);
	a->watch.call =
	    client_call(a->client, "GET", path, NULL,
			WATCH_WAIT_MS + a->cfg.read_timeout_ms, on_watch, a);
}

static void on_heartbeat(void *arg, const struct client_reply *r)
{
	struct agent *a = arg;
	if (!op_answered(&a->heartbeat, "heartbeat", r))
		return;
	if (r->status == 200 || r->status == 409 || r->status == 410)
		reply_action(a, &a->heartbeat, "heartbeat", r);
	else
		log_warn("heartbeat answered %ld: %s", r->status, r->error);
}

static void send_heartbeat(struct agent *a)
{
	char path[512];
	json_t *b = identity(a);
	a->heartbeat.round = a->r.round;
	json_object_set_new(b, "round", json_integer((json_int_t)a->r.round));
	job_path(a, path, sizeof(path), "heartbeat");
	a->heartbeat.call =
	    client_call(a->client, "POST", path, b, a->cfg.heartbeat_timeout_ms,
			on_heartbeat, a);
	json_decref(b);
}

static void on_report(void *arg, const struct client_reply *r)
{
	struct agent *a = arg;
	if (!op_answered(&a->report, "report", r))
		return;
	json_decref(a->pending_report);
	a->pending_report = NULL;
	a->report_pending = 0;
	if (r->status == 200 || r->status == 409 || r->status == 410)
		reply_action(a, &a->report, "report", r);
	else
		log_warn("report answered %ld: %s", r->status, r->error);
	agent_all_stopped(a); /* the stop may have been waiting for us */
}

static void send_report(struct agent *a)
{
	char path[512];
	if (!a->pending_report) {
		json_t *b = identity(a);
		/* retries resend this body: the round stays the one it names */
		a->report.round = a->r.round;
		json_object_set_new(b, "round",
				    json_integer((json_int_t)a->r.round));
		if (a->group_failed) {
			json_object_set_new(b, "status", json_string("failed"));
			json_object_set(b, "failures", a->failures);
		} else {
			json_object_set_new(b, "status",
					    json_string("succeeded"));
		}
		a->pending_report = b;
	}
	job_path(a, path, sizeof(path), "report");
	a->report.call = client_call(a->client, "POST", path, a->pending_report,
				     a->cfg.read_timeout_ms, on_report, a);
}

static void on_leave(void *arg, const struct client_reply *r)
{
	struct agent *a = arg;
	a->leave.call = NULL;
	if (client_retryable(r) && ++a->leave_attempts < LEAVE_ATTEMPTS) {
		op_retry(&a->leave, "leave", r);
		return;
	}
	if (r->status == 200)
		log_info("node %s left job %s", a->node_id, a->cfg.run_id);
	else
		log_warn("could not leave job %s: %s", a->cfg.run_id,
			 r->transport_failed || !*r->error ? "no answer"
							   : r->error);
	finish(a);
}

static void send_leave(struct agent *a)
{
	char path[512];
	json_t *b = identity(a);
	job_path(a, path, sizeof(path), "leave");
	a->leave.call = client_call(a->client, "POST", path, b,
				    LEAVE_TIMEOUT_MS, on_leave, a);
	json_decref(b);
	if (!a->leave.call)
		finish(a);
}

static void on_fetch(void *arg, const struct client_reply *r)
{
	struct agent *a = arg;
	json_t *failures = NULL;
	a->fetch.call = NULL;
	if (r->status == 200 && r->json)
		failures = json_object_get(r->json, "failures");
	if (json_is_array(failures) && json_array_size(failures) > 0)
		report_print(a->cfg.run_id, failures,
			     (int)json_array_size(failures));
	else
		report_print(a->cfg.run_id, a->failures,
			     (int)json_array_size(a->failures));
	finish(a);
}

static void send_fetch(struct agent *a)
{
	char path[512];
	snprintf(path, sizeof(path), "/v1/jobs/%s", a->cfg.run_id);
	a->fetch.call = client_call(a->client, "GET", path, NULL,
				    a->cfg.read_timeout_ms, on_fetch, a);
	if (!a->fetch.call) {
		struct client_reply r = {
		    .transport_failed = 1, .error = "", .body = ""};
		on_fetch(a, &r);
	}
}

/* ---------------------------------------------------------- lifecycle */

/* local_address finds the source address this host uses to reach host
 * (the UDP connect trick: nothing is sent). "" when unknown: the server
 * then uses the address it sees. Runs before the loop starts. */
static void local_address(const char *endpoint, char *out, size_t size)
{
	char host[256];
	uint16_t port;
	struct addrinfo hints, *res = NULL;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	const char *ep = endpoint;
	int fd;
	out[0] = '\0';
	if (strncmp(ep, "http://", 7) == 0)
		ep += 7;
	else if (strncmp(ep, "https://", 8) == 0)
		ep += 8;
	{
		char tmp[512];
		snprintf(tmp, sizeof(tmp), "%s", ep);
		char *slash = strchr(tmp, '/');
		if (slash)
			*slash = '\0';
		if (parse_host_port(tmp, 29400, 0, host, sizeof(host), &port) !=
		    0)
			return;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_DGRAM;
	if (getaddrinfo(host, "9", &hints, &res) != 0 || !res)
		return;
	fd = socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0 &&
	    getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
		getnameinfo((struct sockaddr *)&ss, len, out, (socklen_t)size,
			    NULL, 0, NI_NUMERICHOST);
	if (fd >= 0)
		close(fd);
	freeaddrinfo(res);
}

int agent_new(struct event_base *base, const struct agent_config *cfg,
	      struct agent **out, char *err, size_t err_size)
{
	struct agent *a = calloc(1, sizeof(*a));
	unsigned char rnd[8];
	if (!a)
		return DL_ENOMEM;
	a->base = base;
	a->cfg = *cfg;
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		uint64_t x = clock_now_ns() ^ ((uint64_t)getpid() << 32);
		memcpy(rnd, &x, sizeof(rnd));
	}
	for (int i = 0; i < 8; i++)
		snprintf(a->incarnation + 2 * i, 3, "%02x", rnd[i]);
	snprintf(a->node_id, sizeof(a->node_id), "%s",
		 cfg->node_id ? cfg->node_id : "node");
	a->failures = json_array();
	a->stopped_ev = event_new(base, -1, 0, on_stopped, a);
	a->sigchld = evsignal_new(base, SIGCHLD, on_sigchld, a);
	if (!a->failures || !a->stopped_ev || !a->sigchld) {
		agent_free(a);
		snprintf(err, err_size, "out of memory");
		return DL_ENOMEM;
	}
	if (cfg->mode == AGENT_MODE_RDZV) {
		int rc = client_new(base, cfg->endpoint, cfg->token,
				    cfg->ca_file, &a->client, err, err_size);
		if (rc) {
			agent_free(a);
			return rc;
		}
		op_init(a, &a->join, send_join);
		op_init(a, &a->watch, send_watch);
		op_init(a, &a->heartbeat, send_heartbeat);
		op_init(a, &a->report, send_report);
		op_init(a, &a->leave, send_leave);
		op_init(a, &a->fetch, send_fetch);
		if (cfg->local_addr)
			snprintf(a->addr, sizeof(a->addr), "%s",
				 cfg->local_addr);
		else
			local_address(cfg->endpoint, a->addr, sizeof(a->addr));
	}
	*out = a;
	return 0;
}

int agent_start(struct agent *a, char *err, size_t err_size)
{
	int n = 0;
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
		log_warn("cannot become a child subreaper: %s; workers' "
			 "daemonised children may outlive the job",
			 strerror(errno));
	evsignal_add(a->sigchld, NULL);
	for (const int *s = a->cfg.signals; s && *s; s++)
		n++;
	a->sigs = calloc((size_t)n + 1, sizeof(*a->sigs));
	if (!a->sigs)
		return DL_ENOMEM;
	for (int i = 0; i < n; i++) {
		a->sigs[i] =
		    evsignal_new(a->base, a->cfg.signals[i], on_signal, a);
		if (!a->sigs[i])
			return DL_ENOMEM;
		evsignal_add(a->sigs[i], NULL);
	}
	a->n_sigs = n;
	if (a->cfg.log_dir) {
		snprintf(a->log_dir, sizeof(a->log_dir), "%s", a->cfg.log_dir);
	} else {
		const char *tmp = getenv("TMPDIR");
		snprintf(a->log_dir, sizeof(a->log_dir), "%s/dlaunch-XXXXXX",
			 tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(a->log_dir)) {
			snprintf(err, err_size,
				 "cannot create a temporary log directory: %s",
				 strerror(errno));
			return DL_ESYS;
		}
		a->log_dir_temp = 1;
	}
	if (a->cfg.mode == AGENT_MODE_STATIC) {
		memset(&a->r, 0, sizeof(a->r));
		a->r.node_rank = a->cfg.node_rank;
		a->r.nnodes = a->cfg.nnodes;
		a->r.world_size = a->cfg.nnodes * a->cfg.nproc;
		a->r.rank_offset = a->cfg.node_rank * a->cfg.nproc;
		snprintf(a->r.master_addr, sizeof(a->r.master_addr), "%s",
			 a->cfg.master_addr);
		a->r.master_port = a->cfg.master_port;
		a->state = AGENT_RUNNING;
		return workers_start(a);
	}
	a->state = AGENT_JOINING;
	log_info("node %s joining job %s at %s (%d-%d nodes)", a->node_id,
		 a->cfg.run_id, client_base_url(a->client), a->cfg.min_nodes,
		 a->cfg.max_nodes);
	send_join(a);
	return 0;
}

int agent_exit_status(const struct agent *a)
{
	return a->exit_status;
}

static int rm_entry(const char *path, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

void agent_free(struct agent *a)
{
	if (!a)
		return;
	if (a->n_live > 0) {
		workers_kill_all(a);
		/* they die at once; reap so nothing is left as a zombie */
		for (int i = 0; i < a->n_workers; i++)
			if (a->workers[i].pid > 0 && !a->workers[i].reaped)
				waitpid(a->workers[i].pid, NULL, 0);
	}
	workers_free(a);
	if (a->client) {
		op_release(&a->join);
		op_release(&a->watch);
		op_release(&a->heartbeat);
		op_release(&a->report);
		op_release(&a->leave);
		op_release(&a->fetch);
		client_free(a->client);
	}
	if (a->hb_timer)
		event_free(a->hb_timer);
	if (a->kill_timer)
		event_free(a->kill_timer);
	progress_release(a);
	if (a->stopped_ev)
		event_free(a->stopped_ev);
	if (a->sigchld)
		event_free(a->sigchld);
	for (int i = 0; i < a->n_sigs; i++)
		event_free(a->sigs[i]);
	free(a->sigs);
	json_decref(a->pending_report);
	json_decref(a->failures);
	if (a->log_dir_temp && a->cfg.redirects.all < 0 &&
	    a->cfg.redirects.n == 0 && a->cfg.tee.all < 0 && a->cfg.tee.n == 0)
		nftw(a->log_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(a);
}
