/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_dump.c - `dlaunch dump` for a job led through etcd: the job's
 * record says how many nodes its round has (etcd_status.c), a trigger of
 * kind "dump" by "cli" goes to PREFIX/JOB/hang/trigger (no lease: agents
 * judge a trigger by its time), and PREFIX/JOB/hang/report/ is read every
 * POLL_MS until every node has a report for it or the time is up. Blocks
 * on a loop of its own; the agents' side is etcd_hang.c.
 */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/agent.h"
#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "etcd_client.h"
#include "etcd_hang.h"
#include "etcd_proto.h"

#define POLL_MS 250
#define KEY_MAX 1024
#define TRIGGER "/hang/trigger"
#define REPORTS "/hang/report/"

struct dump_run {
	struct event_base *base;
	struct etcd_client *c;
	struct event *poll;
	char prefix[KEY_MAX];
	char id[80];
	size_t nnodes;
	uint64_t deadline;
	json_t *trigger;
	json_t *reports;
	int rc; /* 0 complete, 1 incomplete, < 0 failed */
	char err[1024];
};

static void fail(struct dump_run *d, int rc, const char *what, const char *why)
{
	d->rc = rc;
	snprintf(d->err, sizeof(d->err), "%s: %.900s", what, why);
	event_base_loopexit(d->base, NULL);
}

static void read_reports(struct dump_run *d);

static void on_poll(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	read_reports(arg);
}

static void on_reports(void *arg, const struct etcd_answer *a)
{
	struct dump_run *d = arg;
	struct etcd_range_response r;
	struct timeval tv = {0, POLL_MS * 1000};
	char err[1024];
	int rc = etcd_answer_range(a, &r, err, sizeof(err));
	if (rc != 0) {
		fail(d, rc, "cannot read the hang reports", err);
		return;
	}
	json_array_clear(d->reports);
	etcd_hang_reports_of(&r, d->id, d->reports);
	etcd_range_response_release(&r);
	if (json_array_size(d->reports) >= d->nnodes) {
		d->rc = 0;
		event_base_loopexit(d->base, NULL);
		return;
	}
	if (clock_now_ms() >= d->deadline) {
		d->rc = 1;
		event_base_loopexit(d->base, NULL);
		return;
	}
	evtimer_add(d->poll, &tv);
}

static void read_reports(struct dump_run *d)
{
	char k[KEY_MAX + 32], err[256];
	unsigned char end[KEY_MAX + 32];
	size_t end_len;
	json_t *body = NULL;
	snprintf(k, sizeof(k), "%s%s", d->prefix, REPORTS);
	end_len = etcd_prefix_end(k, strlen(k), end);
	if (etcd_build_range(k, strlen(k), end, end_len, 0, 0, &body, err,
			     sizeof(err)) != 0 ||
	    !etcd_call(d->c, "hang reports", "/v3/kv/range", body, 0,
		       on_reports, d))
		fail(d, DL_ENOMEM, "cannot read the hang reports",
		     "out of memory");
	json_decref(body);
}

static void on_put(void *arg, const struct etcd_answer *a)
{
	struct dump_run *d = arg;
	struct etcd_txn_response t;
	char err[1024];
	int rc = etcd_answer_txn(a, &t, err, sizeof(err));
	if (rc != 0) {
		fail(d, rc, "cannot put the hang trigger", err);
		return;
	}
	etcd_txn_response_release(&t);
	read_reports(d);
}

static int put_trigger(struct dump_run *d)
{
	char k[KEY_MAX + 32], err[256];
	json_t *body = NULL;
	int ok = 0;
	snprintf(k, sizeof(k), "%s%s", d->prefix, TRIGGER);
	if (etcd_build_put_json(k, d->trigger, 0, &body, err, sizeof(err)) ==
		0 &&
	    etcd_call(d->c, "hang trigger", "/v3/kv/txn", body, 0, on_put, d))
		ok = 1;
	json_decref(body);
	return ok ? 0 : DL_ENOMEM;
}

int agent_etcd_dump(const struct agent_config *cfg, const char *job,
		    uint64_t timeout_ms, json_t **out, char *err,
		    size_t err_size)
{
	struct dump_run d;
	json_t *detail = NULL;
	const char *state;
	int rc;

	*out = NULL;
	memset(&d, 0, sizeof(d));
	rc = agent_etcd_status(cfg, job, &detail, err, err_size);
	if (rc)
		return rc;
	state = json_string_value(json_object_get(detail, "state"));
	d.nnodes = json_array_size(json_object_get(detail, "members"));
	if (!state || strcmp(state, "RUNNING") != 0 || d.nnodes == 0) {
		rc = dl_errorf(err, err_size, DL_EINVAL,
			       "job %s is %s, not RUNNING: nothing to dump",
			       job, state ? state : "in an unknown state");
		json_decref(detail);
		return rc;
	}
	json_decref(detail);
	snprintf(d.prefix, sizeof(d.prefix), "%s/%s", cfg->etcd.key_prefix,
		 job);
	snprintf(d.id, sizeof(d.id), "cli-%llu",
		 (unsigned long long)clock_wall_ms());
	d.trigger =
	    json_pack("{s:s,s:s,s:s,s:I}", "id", d.id, "kind", "dump", "by",
		      "cli", "time_ms", (json_int_t)clock_wall_ms());
	d.reports = json_array();
	d.rc = DL_EIO;
	d.deadline = clock_now_ms() + timeout_ms;
	d.base = event_base_new();
	if (!d.trigger || !d.reports || !d.base) {
		rc = dl_errorf(err, err_size, DL_ENOMEM, "out of memory");
		goto out;
	}
	d.poll = evtimer_new(d.base, on_poll, &d);
	rc = etcd_client_new(d.base, cfg, &d.c, err, err_size);
	if (rc)
		goto out;
	if (!d.poll || put_trigger(&d) != 0) {
		rc = dl_errorf(err, err_size, DL_ENOMEM, "out of memory");
		goto out;
	}
	event_base_dispatch(d.base);
	rc = d.rc;
	if (rc < 0)
		snprintf(err, err_size, "%s", d.err);
	*out = json_pack("{s:O,s:b,s:O}", "trigger", d.trigger, "complete",
			 rc == 0, "reports", d.reports);
out:
	etcd_client_free(d.c);
	if (d.poll)
		event_free(d.poll);
	if (d.base)
		event_base_free(d.base);
	json_decref(d.trigger);
	json_decref(d.reports);
	return rc;
}
