/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_load_driver.c - etcd_load's driver: forks the processes of
 * simulated nodes, starts them, follows each node's rounds through the
 * phases (first round, idle, takeover), reads etcd's counters and, for
 * the takeover, finds the leader, has it dropped and watches its key.
 */
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../agent/etcd/etcd_client.h"
#include "../agent/etcd/etcd_leader.h"
#include "../agent/etcd/rdzv_etcd.h"
#include "../agent/fsm.h"
#include "dlaunch/clock.h"
#include "dlaunch/log.h"
#include "dlaunch/parse.h"

#include "etcd_load.h"

/* ============================================================ the driver
 * This process: forks the children, starts them, follows each node's
 * rounds, reads etcd's counters, and for the takeover finds the leader,
 * has it dropped and watches its key. */

const char *phase_name(int p)
{
	switch (p) {
	case PH_FIRST: return "first round";
	case PH_IDLE: return "idle";
	case PH_TAKEOVER: return "takeover";
	default: return "end";
	}
}

static void fail(struct driver *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void fail(struct driver *d, const char *fmt, ...)
{
	va_list ap;
	if (d->failed)
		return;
	d->failed = 1;
	va_start(ap, fmt);
	vsnprintf(d->why, sizeof(d->why), fmt, ap);
	va_end(ap);
	event_base_loopbreak(d->base);
}

static void phase_over(struct driver *d)
{
	event_active(d->next_ev, EV_TIMEOUT, 0);
}

/* survivors: the nodes that should be in a new round after the takeover */
int survivors(const struct driver *d)
{
	return d->o->nodes - 1 - d->n_failed;
}

static void on_report(void *arg, char *line)
{
	struct driver *d = arg;
	unsigned long long round, t;
	int idx, rank, world, status;
	struct node_seen *n;
	if (sscanf(line, "F %d %d", &idx, &status) == 2 && idx >= 0 &&
	    idx < d->o->nodes) {
		/* a real agent would have exited: the others go on without
		 * it (min nodes is N-1), and the result says so */
		n = &d->nodes[idx];
		if (n->failed_phase)
			return;
		n->failed_phase = (int)d->phase;
		d->n_failed++;
		if (d->n_failed == 1)
			log_warn("node sim%05d ended (exit status %d) in phase "
				 "%d",
				 idx, status, (int)d->phase);
		if (d->phase == PH_FIRST && !n->join_ns &&
		    d->n_joined + d->n_failed == d->o->nodes)
			phase_over(d);
		else if (d->phase == PH_TAKEOVER && d->n_reformed > 0 &&
			 d->n_reformed >= survivors(d))
			phase_over(d);
		return;
	}
	if (sscanf(line, "S %d %llu", &idx, &t) == 2 && idx >= 0 &&
	    idx < d->o->nodes) {
		n = &d->nodes[idx];
		if (d->phase == PH_TAKEOVER && !n->over && idx != d->killed) {
			n->over = 1;
			if (!d->n_over++)
				d->t_over_first_ns = t;
			d->t_over_last_ns = t;
		}
		return;
	}
	if (sscanf(line, "J %d %llu %d %d %llu", &idx, &round, &rank, &world,
		   &t) != 5 ||
	    idx < 0 || idx >= d->o->nodes)
		return;
	n = &d->nodes[idx];
	n->round = round;
	n->rank = rank;
	n->world = world;
	if (d->phase == PH_FIRST) {
		if (!n->join_ns) {
			n->join_ns = t > d->t0_ns ? t - d->t0_ns : 1;
			if (++d->n_joined + d->n_failed == d->o->nodes)
				phase_over(d);
		}
	} else if (d->phase == PH_IDLE && round > d->first_round) {
		d->idle_rounds++;
	} else if (d->phase == PH_TAKEOVER && round > d->first_round &&
		   !n->reformed && idx != d->killed) {
		n->reformed = 1;
		if (!d->new_round) {
			d->new_round = round;
			d->t_reformed_first_ns = t;
		}
		if (++d->n_reformed == survivors(d)) {
			d->t_reformed_ns = t;
			phase_over(d);
		}
	}
}

static struct driver *the_driver;

static void on_rep(evutil_socket_t fd, short what, void *arg)
{
	struct proc *p = arg;
	(void)what;
	if (read_lines(fd, &p->in, on_report, the_driver) != 0) {
		event_del(p->ev);
		fail(the_driver, "simulated nodes %d-%d: their process ended",
		     p->lo, p->hi - 1);
	}
}

/* check_first: one round; its size W between the nodes that got it and N
 * (an agent whose loop ended may have been counted in before it ended);
 * ranks below W, each once */
static int check_first(struct driver *d)
{
	int ok = 1, world = 0;
	unsigned char *seen;
	if (d->n_joined == 0) {
		fail(d, "no node had a round (%d nodes' loops ended)",
		     d->n_failed);
		return 0;
	}
	seen = calloc((size_t)d->o->nodes, 1);
	if (!seen)
		die("out of memory");
	d->first_round = 0;
	for (int i = 0; i < d->o->nodes && ok; i++) {
		struct node_seen *s = &d->nodes[i];
		if (!s->join_ns)
			continue; /* it ended without a round */
		if (!d->first_round) {
			d->first_round = s->round;
			world = s->world;
		}
		if (s->round != d->first_round || s->world != world ||
		    world < d->n_joined || world > d->o->nodes || s->rank < 0 ||
		    s->rank >= world || seen[s->rank]) {
			fail(d,
			     "bad assignment: node sim%05d round %llu rank "
			     "%d of %d (the first node's round %llu of %d; %d "
			     "nodes had one)",
			     i, (unsigned long long)s->round, s->rank, s->world,
			     (unsigned long long)d->first_round, world,
			     d->n_joined);
			ok = 0;
		}
		seen[s->rank >= 0 && s->rank < d->o->nodes ? s->rank : 0] = 1;
	}
	free(seen);
	d->world = world;
	return ok;
}

static void on_leader_watch(void *arg, enum etcd_watch_what what,
			    const struct etcd_watch_response *w,
			    const char *error)
{
	struct driver *d = arg;
	uint64_t now = clock_now_ns();
	if (what != ETCD_WATCH_EVENTS) {
		fail(d, "watching the leader key: %s",
		     error ? error : "compacted");
		return;
	}
	for (size_t i = 0; i < w->n_events; i++) {
		const struct etcd_event *e = &w->events[i];
		const char *id;
		json_t *v;
		if (e->type == ETCD_EVENT_DELETE) {
			if (!d->t_gone_ns)
				d->t_gone_ns = now;
			continue;
		}
		if (d->t_elected_ns)
			continue;
		d->t_elected_ns = now;
		v = json_loadb(e->kv.value, e->kv.value_len, 0, NULL);
		id = json_string_value(json_object_get(v, "node_id"));
		snprintf(d->new_leader, sizeof(d->new_leader), "%s",
			 id ? id : "?");
		json_decref(v);
	}
}

static struct proc *owner(struct driver *d, int idx)
{
	for (int k = 0; k < d->nprocs; k++)
		if (idx >= d->procs[k].lo && idx < d->procs[k].hi)
			return &d->procs[k];
	return NULL;
}

/* on_leader: the leader key read; drop its holder and time the rest */
static void on_leader(void *arg, const struct etcd_answer *a)
{
	struct driver *d = arg;
	struct etcd_range_response r;
	char err[256], k[300];
	const char *id = NULL;
	json_t *v = NULL;
	int idx = -1;
	struct proc *p;
	d->obs_call = NULL;
	if (a->rc != 0 ||
	    etcd_parse_range(a->body, a->len, &r, err, sizeof(err)) != 0) {
		fail(d, "reading the leader key: %s", a->rc ? a->error : err);
		return;
	}
	if (r.n_kvs == 1)
		v = json_loadb(r.kvs[0].value, r.kvs[0].value_len, 0, NULL);
	id = json_string_value(json_object_get(v, "node_id"));
	if (!id || strncmp(id, "sim", 3) != 0 ||
	    parse_int(id + 3, 0, d->o->nodes - 1, &idx) != 0)
		idx = -1;
	json_decref(v);
	p = idx >= 0 ? owner(d, idx) : NULL;
	if (!p) {
		etcd_range_response_release(&r);
		fail(d, "no simulated node holds the leader key");
		return;
	}
	etcd_key(k, sizeof(k), d->o->prefix, ETCD_KEY_LEADER, NULL);
	d->obs_watch =
	    etcd_watch_new(d->obs, "leader watch", k, strlen(k), NULL, 0,
			   r.header.revision + 1, 0, on_leader_watch, d);
	etcd_range_response_release(&r);
	if (!d->obs_watch)
		die("out of memory");
	d->killed = idx;
	d->phase = PH_TAKEOVER;
	d->t_kill_ns = clock_now_ns();
	write_line(p->cmd_fd, "K %d\n", idx);
}

static void start_takeover(struct driver *d)
{
	char k[300], err[256];
	json_t *body = NULL;
	etcd_key(k, sizeof(k), d->o->prefix, ETCD_KEY_LEADER, NULL);
	if (etcd_client_new(d->base, &d->obs_cfg, &d->obs, err, sizeof(err)))
		die(err);
	if (etcd_build_range(k, strlen(k), NULL, 0, 0, 0, &body, err,
			     sizeof(err)) != 0)
		die(err);
	d->obs_call = etcd_call(d->obs, "leader read", "/v3/kv/range", body, 0,
				on_leader, d);
	json_decref(body);
	if (!d->obs_call)
		die("out of memory");
}

static void arm_timeout(struct driver *d)
{
	double s = d->o->timeout_s;
	struct timeval tv = {(time_t)s,
			     (suseconds_t)((s - (double)(time_t)s) * 1e6)};
	evtimer_add(d->timeout_ev, &tv);
}

/* cpu_s: user + system CPU seconds process pid has used, or 0 */
static double cpu_s(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	FILE *f;
	size_t n;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the name may hold spaces */
	if (!p || sscanf(p + 2,
			 "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu "
			 "%llu",
			 &ut, &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void sample_cpu(struct driver *d, int at)
{
	d->etcd_cpu[at] = 0;
	d->load_cpu[at] = 0;
	for (int i = 0; i < d->o->n_etcd_pids; i++)
		d->etcd_cpu[at] += cpu_s(d->o->etcd_pids[i]);
	for (int k = 0; k < d->nprocs; k++)
		d->load_cpu[at] += cpu_s(d->procs[k].pid);
	d->load_cpu[at] += cpu_s(getpid());
}

static void after_idle(struct driver *d);

static void on_idle_end(evutil_socket_t fd, short what, void *arg)
{
	struct driver *d = arg;
	(void)fd;
	(void)what;
	if (d->idle_warm) {
		/* warmed up: every node has renewed its lease since the
		 * round formed (its keep-alive stream open); the window */
		struct timeval tv = {(time_t)(d->o->idle_ms / 1000),
				     (suseconds_t)(d->o->idle_ms % 1000) *
					 1000};
		d->idle_warm = 0;
		sample_cpu(d, 3);
		if (scrape(d->o, &d->idle_before) != 0) {
			fail(d, "cannot read etcd's /metrics");
			return;
		}
		d->idle_t0_ns = clock_now_ns();
		evtimer_add(d->idle_ev, &tv);
		return;
	}
	d->idle_t1_ns = clock_now_ns();
	sample_cpu(d, 2);
	if (scrape(d->o, &d->idle_after) != 0) {
		fail(d, "cannot read etcd's /metrics");
		return;
	}
	after_idle(d);
}

static void on_next(evutil_socket_t fd, short what, void *arg)
{
	struct driver *d = arg;
	(void)fd;
	(void)what;
	if (d->failed)
		return;
	if (d->phase == PH_FIRST) {
		sample_cpu(d, 1);
		if (!check_first(d))
			return;
		if (scrape(d->o, &d->after) != 0) {
			fail(d, "cannot read etcd's /metrics");
			return;
		}
		if (d->o->idle_ms) {
			/* a warm-up of one lease TTL first */
			struct timeval tv = {(time_t)d->o->lease_ttl_s, 0};
			d->phase = PH_IDLE;
			d->idle_warm = 1;
			evtimer_del(d->timeout_ev);
			if (!d->idle_ev)
				d->idle_ev =
				    evtimer_new(d->base, on_idle_end, d);
			if (!d->idle_ev)
				die("out of memory");
			evtimer_add(d->idle_ev, &tv);
			return;
		}
		after_idle(d);
		return;
	}
	d->phase = PH_DONE;
	event_base_loopbreak(d->base);
}

/* after_idle: the takeover, or the end */
static void after_idle(struct driver *d)
{
	if (!d->o->takeover) {
		d->phase = PH_DONE;
		event_base_loopbreak(d->base);
		return;
	}
	arm_timeout(d);
	start_takeover(d);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct driver *d = arg;
	(void)fd;
	(void)what;
	if (d->phase == PH_FIRST)
		fail(d,
		     "%d of %d nodes had a round after %.0f s (%d nodes' "
		     "loops ended)",
		     d->n_joined, d->o->nodes, d->o->timeout_s, d->n_failed);
	else
		fail(d,
		     "takeover: %d of %d survivors in a new round after "
		     "%.0f s (leader key %s, new leader %s)",
		     d->n_reformed, survivors(d), d->o->timeout_s,
		     d->t_gone_ns ? "expired" : "not expired",
		     d->t_elected_ns ? d->new_leader : "none");
}

/* spawn forks the children, each with its share of the nodes */
static void spawn(struct driver *d)
{
	const struct opts *o = d->o;
	d->nprocs = o->procs;
	for (int k = 0; k < d->nprocs; k++) {
		struct proc *p = &d->procs[k];
		int cmd[2], rep[2];
		p->lo = (int)((long)o->nodes * k / d->nprocs);
		p->hi = (int)((long)o->nodes * (k + 1) / d->nprocs);
		if (pipe(cmd) != 0 || pipe(rep) != 0)
			die("pipe failed");
		fflush(NULL);
		p->pid = fork();
		if (p->pid < 0)
			die("fork failed");
		if (p->pid == 0) {
			close(cmd[1]);
			close(rep[0]);
			for (int j = 0; j < k; j++) {
				close(d->procs[j].cmd_fd);
				close(d->procs[j].rep_fd);
			}
			_exit(child_main(o, p->lo, p->hi, cmd[0], rep[1]));
		}
		close(cmd[0]);
		close(rep[1]);
		p->cmd_fd = cmd[1];
		p->rep_fd = rep[0];
	}
}

/* wait_ready: every child has made its nodes */
static void wait_ready(struct driver *d)
{
	for (int k = 0; k < d->nprocs; k++) {
		char c[2];
		if (read(d->procs[k].rep_fd, c, 2) != 2 || c[0] != 'R')
			die("a process of simulated nodes did not start");
	}
}

int driver_main(const struct opts *o)
{
	static struct driver drv;
	struct driver *d = &drv;
	int rc;
	d->o = o;
	the_driver = d;
	d->nodes = calloc((size_t)o->nodes, sizeof(*d->nodes));
	if (!d->nodes)
		die("out of memory");
	d->killed = -1;
	spawn(d);
	log_set_level(o->level);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	d->base = event_base_new();
	if (!d->base)
		die("out of memory");
	d->timeout_ev = evtimer_new(d->base, on_timeout, d);
	d->next_ev = event_new(d->base, -1, 0, on_next, d);
	if (!d->timeout_ev || !d->next_ev)
		die("out of memory");
	for (int k = 0; k < d->nprocs; k++) {
		struct proc *p = &d->procs[k];
		p->ev = event_new(d->base, p->rep_fd, EV_READ | EV_PERSIST,
				  on_rep, p);
		if (!p->ev)
			die("out of memory");
	}
	base_config(o, &d->obs_cfg);

	wait_ready(d);
	for (int k = 0; k < d->nprocs; k++)
		event_add(d->procs[k].ev, NULL);
	if (scrape(o, &d->before) != 0)
		die("cannot read etcd's /metrics");
	d->phase = PH_FIRST;
	arm_timeout(d);
	sample_cpu(d, 0);
	d->t0_ns = clock_now_ns();
	for (int k = 0; k < d->nprocs; k++)
		write_line(d->procs[k].cmd_fd, "G\n");
	event_base_dispatch(d->base);

	for (int k = 0; k < d->nprocs; k++) {
		struct proc *p = &d->procs[k];
		p->hwm_bytes = proc_status(p->pid, "VmHWM");
		p->fds = open_fds(p->pid);
		write_line(p->cmd_fd, "Q\n");
	}
	for (int k = 0; k < d->nprocs; k++) {
		close(d->procs[k].cmd_fd);
		waitpid(d->procs[k].pid, NULL, 0);
	}
	rc = d->failed || d->phase != PH_DONE;
	if (rc)
		fprintf(stderr, "etcd_load: %s\n",
			d->failed ? d->why : "stopped early");
	else
		print_result(d);
	etcd_watch_free(d->obs_watch);
	etcd_cancel(d->obs_call);
	etcd_client_free(d->obs);
	for (int k = 0; k < d->nprocs; k++) {
		event_free(d->procs[k].ev);
		close(d->procs[k].rep_fd);
	}
	event_free(d->timeout_ev);
	event_free(d->next_ev);
	if (d->idle_ev)
		event_free(d->idle_ev);
	event_base_free(d->base);
	free(d->nodes);
	curl_global_cleanup();
	return rc;
}
