/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_heartbeat.c - POST /v1/jobs/{job}/heartbeat and the status answer
 * it shares with watches, reports and preemptions (docs/http-api.md).
 *
 * Heartbeats are most of a large job's requests, so their path avoids
 * jansson where it can: a body that jsonflat reads (a flat object of
 * plain strings and integers: what agents send) is checked here field by
 * field with the same rules as request.c's; any other body takes the
 * general path (jansson, request.c), which also words every error. The
 * status answer is written straight into the response, byte for byte
 * what jansson's compact dump of the same object gives; only an answer
 * that carries an open hang trigger ("dump") is built with jansson.
 */
#include <stdio.h>
#include <string.h>

#include "api_int.h"
#include "dlaunch/error.h"
#include "dlaunch/jsonflat.h"
#include "dlaunch/jsonh.h"
#include "dlaunch/parse.h"
#include "request.h"

/* the bound of "recovery" (a name of rdzv_recovery_parse) */
#define RECOVERY_MAX 32

/* What a heartbeat says, read and checked. */
struct heartbeat {
	char node_id[RDZV_NAME_MAX + 1];
	char incarnation[RDZV_INCARNATION_MAX + 1];
	uint64_t round;
	enum rdzv_recovery how;
	char why[RDZV_RECOVERY_WHY_MAX + 1];
};

/* --- the status answer --- */

/* put_u64 appends v in decimal. */
static int put_u64(struct buf *b, uint64_t v)
{
	char tmp[24];
	size_t n = sizeof(tmp);
	do {
		tmp[--n] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	return buf_append(b, tmp + n, sizeof(tmp) - n);
}

/* plain: s needs no escaping in JSON (jansson would write it as is) */
static int plain(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e ||
		    *s == '"' || *s == '\\')
			return 0;
	return 1;
}

/* status_write writes r as api.c's status_json, dumped compact; -1 when
 * it cannot say it the same way (a value jansson would print signed). */
static int status_write(struct buf *b, const struct rdzv_reply *r)
{
	const char *state = rdzv_job_state_name(r->state);
	const char *action = rdzv_action_name(r->action);
	if (r->round > INT64_MAX || r->preempt_step > INT64_MAX ||
	    !plain(state) || !plain(action))
		return -1;
	/* one allocation: the longest answer is under 160 bytes */
	if (buf_reserve(b, 160))
		return -1;
	if (buf_append_str(b, "{\"round\":") || put_u64(b, r->round) ||
	    buf_append_str(b, ",\"state\":\"") || buf_append_str(b, state) ||
	    buf_append_str(b, "\",\"action\":\"") ||
	    buf_append_str(b, action) ||
	    buf_append_str(b, "\",\"restart_count\":") ||
	    put_u64(b, r->restart_count))
		return -1;
	/* a preempted job's stop step goes with every answer to a node */
	if (r->preempt_step && (buf_append_str(b, ",\"preempt_step\":") ||
				put_u64(b, r->preempt_step)))
		return -1;
	return buf_append_str(b, "}");
}

void api_reply_status(struct rdzv_response *resp, int status,
		      const struct rdzv_reply *r)
{
	buf_reset(&resp->body);
	if (status_write(&resp->body, r) == 0) {
		resp->status = status;
		resp->content_type = "application/json";
		return;
	}
	api_reply_json(resp, status, api_status_json(r));
}

void api_reply_status_dump(const struct rdzv_state *st,
			   struct rdzv_response *resp,
			   const struct rdzv_reply *r, const char *job,
			   uint64_t now_ms)
{
	json_t *dump = rdzv_hang_open_json(st, job, now_ms);
	json_t *v;
	if (!dump) {
		api_reply_status(resp, 200, r);
		return;
	}
	v = api_status_json(r);
	if (v)
		json_object_set_new(v, "dump", dump);
	else
		json_decref(dump);
	api_reply_json(resp, 200, v);
}

/* --- reading the heartbeat --- */

/* flat_name copies string member key of at most max_len bytes into out
 * when it is a valid name (request.c's get_name). */
static int flat_name(const struct jsonflat *o, const char *key, size_t max_len,
		     char *out, size_t out_size)
{
	const struct jsonflat_field *f = jsonflat_get(o, key);
	if (!f || f->type != JSONFLAT_STRING || f->str_len > max_len ||
	    jsonflat_copy_str(f, out, out_size) != 0)
		return -1;
	return parse_name_valid(out, max_len) ? 0 : -1;
}

/* read_flat reads a heartbeat's body with jsonflat. 0 when every field
 * is there and as the general path (read_general) accepts it; -1 for
 * anything else, which the general path then answers. */
static int read_flat(const struct rdzv_request *req, struct heartbeat *hb)
{
	struct jsonflat o;
	const struct jsonflat_field *f;
	char how[RECOVERY_MAX + 1];

	if (jsonflat_read(req->body, req->body_len, &o) != 0 ||
	    flat_name(&o, "node_id", RDZV_NAME_MAX, hb->node_id,
		      sizeof(hb->node_id)) ||
	    flat_name(&o, "incarnation", RDZV_INCARNATION_MAX, hb->incarnation,
		      sizeof(hb->incarnation)))
		return -1;
	/* jsonflat's integers stay below 10^18 < UINT64_MAX / 2 */
	f = jsonflat_get(&o, "round");
	if (!f || f->type != JSONFLAT_INTEGER)
		return -1;
	hb->round = f->num;
	/* jsonflat's strings are printable ASCII: no control character */
	hb->why[0] = '\0';
	f = jsonflat_get(&o, "recovery_why");
	if (f && jsonflat_copy_str(f, hb->why, sizeof(hb->why)) != 0)
		return -1;
	hb->how = RDZV_RECOVERY_NONE;
	f = jsonflat_get(&o, "recovery");
	if (f && (jsonflat_copy_str(f, how, sizeof(how)) != 0 ||
		  rdzv_recovery_parse(how, &hb->how) != 0))
		return -1;
	return 0;
}

/* read_recovery reads a heartbeat's optional "recovery" (how the node's
 * workers entered the round: started, in_place, restarted) and
 * "recovery_why" (printable text). 0 with how NONE when absent. */
static int read_recovery(json_t *body, struct heartbeat *hb, char *err,
			 size_t err_size)
{
	const char *s = NULL, *why = "";
	hb->how = RDZV_RECOVERY_NONE;
	if (jsonh_get_str(body, "recovery", 0, RECOVERY_MAX, &s, err,
			  err_size) ||
	    jsonh_get_str(body, "recovery_why", 0, RDZV_RECOVERY_WHY_MAX, &why,
			  err, err_size))
		return DL_EINVAL;
	snprintf(hb->why, sizeof(hb->why), "%s", why);
	if (!s)
		return 0;
	if (rdzv_recovery_parse(s, &hb->how) != 0)
		return dl_errorf(err, err_size, DL_EINVAL,
				 "field 'recovery': '%s' is none of started, "
				 "in_place, restarted",
				 s);
	for (const char *p = hb->why; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return dl_errorf(err, err_size, DL_EINVAL,
					 "field 'recovery_why': a control "
					 "character");
	return 0;
}

/* read_general reads a heartbeat's body with jansson; DL_EINVAL with
 * the message of a 400 answer in err. */
static int read_general(const struct rdzv_request *req, struct heartbeat *hb,
			char *err, size_t err_size)
{
	json_t *body = NULL;
	int rc = request_body(req, &body, err, err_size);
	if (!rc)
		rc = request_node_round(body, hb->node_id, hb->incarnation,
					&hb->round, err, err_size);
	if (!rc)
		rc = read_recovery(body, hb, err, err_size);
	json_decref(body);
	return rc ? DL_EINVAL : 0;
}

void api_heartbeat(struct rdzv_state *st, const struct rdzv_request *req,
		   const char *job, struct rdzv_response *resp)
{
	struct heartbeat hb;
	struct rdzv_reply r;
	char err[512] = "";
	int rc;

	if (read_flat(req, &hb) != 0 &&
	    read_general(req, &hb, err, sizeof(err)) != 0) {
		api_reply_error(resp, 400, err);
		return;
	}
	rc = rdzv_heartbeat(st, job, hb.node_id, hb.incarnation, hb.round,
			    req->now_ms, &r, err, sizeof(err));
	if (rc == 0 && hb.how != RDZV_RECOVERY_NONE)
		rc = rdzv_member_recovery(st, job, hb.node_id, hb.incarnation,
					  hb.round, hb.how, hb.why, err,
					  sizeof(err));
	if (rc < 0)
		api_reply_state_error(resp, rc, err, &r);
	else
		api_reply_status_dump(st, resp, &r, job, req->now_ms);
}
