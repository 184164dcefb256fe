/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_status.c - what `dlaunch status` shows for jobs led through etcd:
 * their records (PREFIX/JOB/state, written by each job's leader), read
 * into rendezvous/'s state machine and shown through the same views
 * dlaunch-rdzv answers GET /v1/jobs[/JOB] with. One job's detail also
 * carries its last hang diagnosis ("hang", as dlaunch-rdzv's): the
 * summary the nodes kept at PREFIX/JOB/hang/last, or, while a newer
 * trigger is open, the analysis of the reports in so far.
 */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/agent.h"
#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/hang.h"
#include "dlaunch/jsonh.h"
#include "dlaunch/rdzv_state.h"
#include "etcd_client.h"
#include "etcd_hang.h"
#include "etcd_leader.h"
#include "etcd_record.h"

struct status_run {
	struct event_base *base;
	struct etcd_client *c;
	const struct agent_config *cfg;
	struct rdzv_state *st;
	char (*keys)[ETCD_JOB_KEY_MAX]; /* records still to read */
	size_t nkeys, next;
	char hang_prefix[ETCD_JOB_KEY_MAX]; /* "": no hang to read */
	json_t *hang_last, *hang_trigger, *hang_reports;
	int rc;
	char err[2048];
};

static void read_next(struct status_run *s);

static void fail(struct status_run *s, int rc, const char *msg)
{
	s->rc = rc;
	snprintf(s->err, sizeof(s->err), "%s", msg);
	event_base_loopexit(s->base, NULL);
}

static void on_record(void *arg, const struct etcd_answer *a)
{
	struct status_run *s = arg;
	struct etcd_range_response r;
	char err[1024];
	json_t *saved = NULL;
	int rc = etcd_answer_range(a, &r, err, sizeof(err));
	if (rc != 0) {
		fail(s, rc, err);
		return;
	}
	if (r.n_kvs == 1 && (jsonh_parse(r.kvs[0].value, r.kvs[0].value_len, 64,
					 &saved, err, sizeof(err)) != 0 ||
			     rdzv_job_restore(s->st, saved, clock_now_ms(), err,
					      sizeof(err)) != 0)) {
		char msg[1400];
		snprintf(msg, sizeof(msg), "unusable job record %s: %s",
			 r.kvs[0].key, err);
		json_decref(saved);
		etcd_range_response_release(&r);
		fail(s, DL_ECORRUPT, msg);
		return;
	}
	if (saved) {
		const char *job =
		    json_string_value(json_object_get(saved, "job"));
		uint64_t ended_wall_ms;
		if (job)
			etcd_record_restored(s->st, job, saved, clock_now_ms(),
					     &ended_wall_ms);
	}
	json_decref(saved);
	etcd_range_response_release(&r);
	read_next(s);
}

/* on_hang: every key under PREFIX/JOB/hang/: the kept summary, the
 * trigger, the reports of that trigger */
static void on_hang(void *arg, const struct etcd_answer *a)
{
	struct status_run *s = arg;
	struct etcd_range_response r, reports;
	char err[1024];
	const char *id;
	size_t plen = strlen(s->hang_prefix);
	int rc = etcd_answer_range(a, &r, err, sizeof(err));
	if (rc != 0) {
		fail(s, rc, err);
		return;
	}
	/* keys come sorted: last, report/NODE..., trigger */
	memset(&reports, 0, sizeof(reports));
	for (size_t i = 0; i < r.n_kvs; i++) {
		const struct etcd_kv *kv = &r.kvs[i];
		json_t **to = NULL;
		if (kv->key_len < plen)
			continue;
		if (!strncmp(kv->key + plen, "report/", 7) && !reports.n_kvs++)
			reports.kvs = r.kvs + i;
		if (!strcmp(kv->key + plen, "last"))
			to = &s->hang_last;
		else if (!strcmp(kv->key + plen, "trigger"))
			to = &s->hang_trigger;
		/* a value that is not JSON is as good as none */
		if (to &&
		    jsonh_parse(kv->value, kv->value_len, 64, to, NULL, 0) != 0)
			*to = NULL;
	}
	id = json_string_value(json_object_get(s->hang_trigger, "id"));
	s->hang_reports = json_array();
	if (id && s->hang_reports)
		etcd_hang_reports_of(&reports, id, s->hang_reports);
	etcd_range_response_release(&r);
	s->rc = 0;
	event_base_loopexit(s->base, NULL);
}

static void read_hang(struct status_run *s)
{
	unsigned char end[ETCD_JOB_KEY_MAX];
	size_t end_len;
	json_t *body = NULL;
	char err[256];
	end_len = etcd_prefix_end(s->hang_prefix, strlen(s->hang_prefix), end);
	if (etcd_build_range(s->hang_prefix, strlen(s->hang_prefix), end,
			     end_len, 0, 0, &body, err, sizeof(err)) != 0 ||
	    !etcd_call(s->c, "status", "/v3/kv/range", body, ETCD_CALL_ONCE,
		       on_hang, s))
		fail(s, DL_ENOMEM, "out of memory");
	json_decref(body);
}

/* hang_summary: the job's last hang diagnosis, NULL when none: the kept
 * one, unless a trigger it is not of is open; then that trigger with the
 * analysis of the reports in so far (none: no analysis yet), asked being
 * the members of the round */
static json_t *hang_summary(struct status_run *s, json_t *detail)
{
	const char *open_id =
	    json_string_value(json_object_get(s->hang_trigger, "id"));
	const char *kept_id = json_string_value(
	    json_object_get(json_object_get(s->hang_last, "trigger"), "id"));
	size_t asked = json_array_size(json_object_get(detail, "members"));
	size_t reported = json_array_size(s->hang_reports);
	json_t *analysis = NULL, *out;
	if (!open_id || (kept_id && !strcmp(open_id, kept_id)))
		return json_is_object(s->hang_last) ? json_incref(s->hang_last)
						    : NULL;
	if (reported)
		analysis =
		    dl_hang_analyse(s->hang_reports, (int64_t)clock_wall_ms());
	out = json_pack("{s:O, s:b, s:I, s:I, s:o?}", "trigger",
			s->hang_trigger, "complete", asked && reported >= asked,
			"reported", (json_int_t)reported, "asked",
			(json_int_t)asked, "analysis", analysis);
	return out;
}

static void read_next(struct status_run *s)
{
	json_t *body = NULL;
	char err[256];
	const char *k;
	if (s->next == s->nkeys && s->hang_prefix[0]) {
		read_hang(s);
		return;
	}
	if (s->next == s->nkeys) {
		s->rc = 0;
		event_base_loopexit(s->base, NULL);
		return;
	}
	k = s->keys[s->next++];
	if (etcd_build_range(k, strlen(k), NULL, 0, 0, 0, &body, err,
			     sizeof(err)) != 0 ||
	    !etcd_call(s->c, "status", "/v3/kv/range", body, ETCD_CALL_ONCE,
		       on_record, s))
		fail(s, DL_ENOMEM, "out of memory");
	json_decref(body);
}

/* on_keys: every key under the prefix (names only); the records are the
 * PREFIX/JOB/state ones */
static void on_keys(void *arg, const struct etcd_answer *a)
{
	struct status_run *s = arg;
	struct etcd_range_response r;
	char err[1024];
	size_t plen = strlen(s->cfg->etcd.key_prefix) + 1;
	size_t slen = strlen(ETCD_KEY_STATE);
	int rc = etcd_answer_range(a, &r, err, sizeof(err));
	if (rc != 0) {
		fail(s, rc, err);
		return;
	}
	s->keys = calloc(r.n_kvs ? r.n_kvs : 1, sizeof(*s->keys));
	for (size_t i = 0; s->keys && i < r.n_kvs; i++) {
		const struct etcd_kv *kv = &r.kvs[i];
		const char *job = kv->key + plen;
		size_t jlen;
		if (kv->key_len <= plen + slen ||
		    kv->key_len >= ETCD_JOB_KEY_MAX ||
		    strcmp(kv->key + kv->key_len - slen, ETCD_KEY_STATE) != 0)
			continue;
		jlen = kv->key_len - plen - slen;
		if (memchr(job, '/', jlen))
			continue;
		memcpy(s->keys[s->nkeys++], kv->key, kv->key_len + 1);
	}
	etcd_range_response_release(&r);
	if (!s->keys) {
		fail(s, DL_ENOMEM, "out of memory");
		return;
	}
	read_next(s);
}

int agent_etcd_status(const struct agent_config *cfg, const char *job,
		      json_t **out, char *err, size_t err_size)
{
	struct status_run s;
	char key[ETCD_JOB_KEY_MAX], end[ETCD_JOB_KEY_MAX];
	json_t *body = NULL;
	int rc;

	memset(&s, 0, sizeof(s));
	*out = NULL;
	s.cfg = cfg;
	s.rc = DL_EIO;
	s.base = event_base_new();
	s.st = rdzv_state_new(NULL);
	if (!s.base || !s.st) {
		rc = dl_errorf(err, err_size, DL_ENOMEM, "out of memory");
		goto out;
	}
	rc = etcd_client_new(s.base, cfg, &s.c, err, err_size);
	if (rc)
		goto out;
	if (job) {
		char prefix[ETCD_PREFIX_MAX];
		s.keys = calloc(1, sizeof(*s.keys));
		if (!s.keys) {
			rc = dl_errorf(err, err_size, DL_ENOMEM,
				       "out of memory");
			goto out;
		}
		etcd_job_prefix(prefix, sizeof(prefix), cfg->etcd.key_prefix,
				job);
		etcd_key(s.keys[0], ETCD_JOB_KEY_MAX, prefix, ETCD_KEY_STATE,
			 NULL);
		etcd_key(s.hang_prefix, sizeof(s.hang_prefix), prefix,
			 ETCD_KEY_HANG, NULL);
		s.nkeys = 1;
		read_next(&s);
	} else {
		struct etcd_op op;
		size_t end_len;
		/* KEY_PREFIX/: the jobs' keys, all of them */
		etcd_job_prefix(key, sizeof(key), cfg->etcd.key_prefix, "");
		end_len =
		    etcd_prefix_end(key, strlen(key), (unsigned char *)end);
		memset(&op, 0, sizeof(op));
		op.kind = ETCD_OP_RANGE;
		op.key.data = key;
		op.key.len = strlen(key);
		op.range_end.data = end;
		op.range_end.len = end_len;
		op.keys_only = 1;
		if (etcd_build_op(&op, &body, err, err_size) != 0 ||
		    !etcd_call(s.c, "status", "/v3/kv/range", body,
			       ETCD_CALL_ONCE, on_keys, &s)) {
			rc = DL_ENOMEM;
			goto out;
		}
	}
	event_base_dispatch(s.base);
	rc = s.rc;
	if (rc) {
		snprintf(err, err_size, "%s", s.err);
		goto out;
	}
	if (job) {
		*out = rdzv_job_detail_json(s.st, job, clock_now_ms());
		if (!*out)
			rc = dl_errorf(err, err_size, DL_ENOTFOUND,
				       "no job %s in etcd at %s under %s", job,
				       etcd_client_endpoints(s.c),
				       cfg->etcd.key_prefix);
		else {
			json_t *hang = hang_summary(&s, *out);
			if (hang)
				json_object_set_new(*out, "hang", hang);
		}
	} else {
		*out = rdzv_jobs_json(s.st);
		if (!*out)
			rc = dl_errorf(err, err_size, DL_ENOMEM,
				       "out of memory");
	}
out:
	json_decref(body);
	etcd_client_free(s.c);
	rdzv_state_free(s.st);
	if (s.base)
		event_base_free(s.base);
	free(s.keys);
	json_decref(s.hang_last);
	json_decref(s.hang_trigger);
	json_decref(s.hang_reports);
	return rc;
}
