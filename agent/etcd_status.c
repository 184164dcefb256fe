/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_status.c - what `dlaunch status` shows for jobs led through etcd:
 * their records (PREFIX/JOB/state, written by each job's leader), read
 * into rendezvous/'s state machine and shown through the same views
 * dlaunch-rdzv answers GET /v1/jobs[/JOB] with.
 */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/agent.h"
#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/jsonh.h"
#include "dlaunch/rdzv_state.h"
#include "etcd_client.h"
#include "etcd_leader.h"
#include "etcd_record.h"

struct status_run {
	struct event_base *base;
	struct etcd_client *c;
	const struct agent_config *cfg;
	struct rdzv_state *st;
	char (*keys)[ETCD_JOB_KEY_MAX]; /* records still to read */
	size_t nkeys, next;
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

static void read_next(struct status_run *s)
{
	json_t *body = NULL;
	char err[256];
	const char *k;
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
	return rc;
}
