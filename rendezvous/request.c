/* SPDX-License-Identifier: Apache-2.0 */
/*
 * request.c - strict reading of the requests' fields for api.c: query
 * parameters, the JSON bodies of join, heartbeat, report and leave, and
 * the failures a report carries. Every value from the network is bounded
 * and checked here before it reaches the state machine.
 */
#include "request.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "dlaunch/error.h"
#include "dlaunch/jsonh.h"
#include "dlaunch/parse.h"

#define JSON_MAX_DEPTH	 16
#define MAX_FAILURES	 64
#define MAX_MESSAGE	 4096
#define MAX_SIGNAL	 32
#define QUERY_VALUE_MAX	 256
#define JOIN_TIMEOUT_MAX (7ull * 24 * 3600 * 1000)
#define TIMEOUT_MAX	 (3600ull * 1000)

/* query_get finds key in a query string "a=1&b=2" and copies its value
 * (no percent-decoding: every value we take is a name or a number).
 * Returns 1 found, 0 absent, DL_EINVAL too long. */
static int query_get(const char *query, const char *key, char *out,
		     size_t out_size)
{
	size_t klen = strlen(key);
	const char *p = query;
	while (p && *p) {
		const char *end = strchr(p, '&');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len > klen && strncmp(p, key, klen) == 0 &&
		    p[klen] == '=') {
			size_t vlen = len - klen - 1;
			if (vlen >= out_size)
				return DL_EINVAL;
			memcpy(out, p + klen + 1, vlen);
			out[vlen] = '\0';
			return 1;
		}
		p = end ? end + 1 : NULL;
	}
	return 0;
}

int request_query_u64(const char *query, const char *key, int required,
		      uint64_t min, uint64_t max, uint64_t *out, char *err,
		      size_t err_size)
{
	char v[QUERY_VALUE_MAX];
	int rc = query_get(query, key, v, sizeof(v));
	if (rc == 0 && !required)
		return 0;
	if (rc == 0) {
		snprintf(err, err_size, "missing query parameter '%s'", key);
		return DL_EINVAL;
	}
	if (rc < 0 || parse_u64(v, min, max, out) != 0) {
		snprintf(err, err_size,
			 "query parameter '%s' must be an integer between "
			 "%" PRIu64 " and %" PRIu64,
			 key, min, max);
		return DL_EINVAL;
	}
	return 0;
}

int request_query_name(const char *query, const char *key, size_t max_len,
		       char *out, size_t out_size, char *err, size_t err_size)
{
	int rc = query_get(query, key, out, out_size);
	if (rc == 0) {
		out[0] = '\0';
		return 0;
	}
	if (rc < 0 || !parse_name_valid(out, max_len)) {
		snprintf(err, err_size,
			 "query parameter '%s' must be 1 to %zu characters "
			 "of " PARSE_NAME_RULE,
			 key, max_len);
		return DL_EINVAL;
	}
	return 0;
}

/* get_name reads a required name field into out (max_len + 1 bytes). */
static int get_name(json_t *body, const char *key, size_t max_len, char *out,
		    char *err, size_t err_size)
{
	const char *s = NULL;
	int rc = jsonh_get_str(body, key, 1, max_len, &s, err, err_size);
	if (rc)
		return DL_EINVAL;
	if (!parse_name_valid(s, max_len)) {
		snprintf(err, err_size,
			 "field '%s' must be 1 to %zu characters "
			 "of " PARSE_NAME_RULE,
			 key, max_len);
		return DL_EINVAL;
	}
	memcpy(out, s, strlen(s) + 1);
	return 0;
}

int request_body(const struct rdzv_request *req, json_t **out, char *err,
		 size_t err_size)
{
	if (!req->body || req->body_len == 0) {
		snprintf(err, err_size, "request body must be a json object");
		return DL_EINVAL;
	}
	return jsonh_parse(req->body, req->body_len, JSON_MAX_DEPTH, out, err,
			   err_size) == 0
		   ? 0
		   : DL_EINVAL;
}

static int get_u32(json_t *body, const char *key, int required, uint64_t min,
		   uint64_t max, uint32_t *out, char *err, size_t err_size)
{
	uint64_t v = *out;
	int rc =
	    jsonh_get_u64(body, key, required, min, max, &v, err, err_size);
	if (rc)
		return DL_EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static int get_dur(json_t *body, const char *key, uint64_t min, uint64_t max,
		   uint64_t *out, char *err, size_t err_size)
{
	return jsonh_get_duration_ms(body, key, 0, min, max, out, err, err_size)
		   ? DL_EINVAL
		   : 0;
}

static int addr_valid(const char *s)
{
	unsigned char tmp[sizeof(struct in6_addr)];
	return inet_pton(AF_INET, s, tmp) == 1 ||
	       inet_pton(AF_INET6, s, tmp) == 1;
}

/* wait_ms: from the query, else (join) the body, else the default. */
int request_wait(const struct rdzv_request *req, json_t *body, uint64_t dflt,
		 uint64_t *out, char *err, size_t err_size)
{
	uint64_t v = dflt;
	int rc;
	char tmp[QUERY_VALUE_MAX];
	if (req->query && query_get(req->query, "wait_ms", tmp, sizeof(tmp)))
		rc = request_query_u64(req->query, "wait_ms", 1, 0,
				       RDZV_WAIT_MAX_MS, &v, err, err_size);
	else if (body)
		rc = jsonh_get_u64(body, "wait_ms", 0, 0, RDZV_WAIT_MAX_MS, &v,
				   err, err_size)
			 ? DL_EINVAL
			 : 0;
	else
		rc = 0;
	*out = v;
	return rc;
}

/* node_round reads node_id, incarnation and round of a fenced request. */
int request_node_round(json_t *body, char *node_id, char *incarnation,
		       uint64_t *round, char *err, size_t err_size)
{
	if (get_name(body, "node_id", RDZV_NAME_MAX, node_id, err, err_size) ||
	    get_name(body, "incarnation", RDZV_INCARNATION_MAX, incarnation,
		     err, err_size))
		return DL_EINVAL;
	if (round && jsonh_get_u64(body, "round", 1, 0, UINT64_MAX / 2, round,
				   err, err_size))
		return DL_EINVAL;
	return 0;
}

/* clean_failure copies into c the fields of failure i (f) that we keep,
 * checking each; DL_EINVAL with err on a bad one. */
static int clean_failure(json_t *f, size_t i, json_t *c, char *err,
			 size_t err_size)
{
	static const char *const ints[] = {"rank", "local_rank", "pid",
					   "exitcode", "time_ms"};
	const char *s = NULL;

	for (size_t k = 0; k < sizeof(ints) / sizeof(ints[0]); k++) {
		json_t *v = json_object_get(f, ints[k]);
		if (!v || json_is_null(v))
			continue;
		if (!json_is_integer(v)) {
			snprintf(err, err_size,
				 "failures[%zu].%s must be an integer", i,
				 ints[k]);
			return DL_EINVAL;
		}
		json_object_set(c, ints[k], v);
	}
	if (jsonh_get_str(f, "signal", 0, MAX_SIGNAL, &s, err, err_size) ||
	    (s && !parse_name_valid(s, MAX_SIGNAL))) {
		snprintf(err, err_size,
			 "failures[%zu].signal must be a signal name or null",
			 i);
		return DL_EINVAL;
	}
	json_object_set_new(c, "signal", s ? json_string(s) : json_null());
	s = NULL;
	if (jsonh_get_str(f, "message", 0, MAX_MESSAGE, &s, err, err_size)) {
		snprintf(err, err_size,
			 "failures[%zu].message must be a string of at most %d "
			 "bytes",
			 i, MAX_MESSAGE);
		return DL_EINVAL;
	}
	if (s)
		json_object_set_new(c, "message", json_string(s));
	return 0;
}

json_t *request_failures(json_t *in, char *err, size_t err_size)
{
	json_t *out, *f;
	size_t i;

	if (!json_is_array(in)) {
		snprintf(err, err_size, "field 'failures' must be an array");
		return NULL;
	}
	if (json_array_size(in) > MAX_FAILURES) {
		snprintf(err, err_size,
			 "field 'failures' has more than %d entries",
			 MAX_FAILURES);
		return NULL;
	}
	out = json_array();
	json_array_foreach(in, i, f)
	{
		json_t *c;
		if (!json_is_object(f)) {
			snprintf(err, err_size,
				 "failures[%zu] must be an object", i);
			goto bad;
		}
		c = json_object();
		json_array_append_new(out, c);
		if (clean_failure(f, i, c, err, err_size))
			goto bad;
	}
	return out;
bad:
	json_decref(out);
	return NULL;
}

/* request_join reads a join's body (and wait_ms) into node, cfg and
 * wait_ms; the address defaults to the peer's. */
int request_join(const struct rdzv_request *req, json_t *body,
		 struct rdzv_node_info *node, struct rdzv_job_config *cfg,
		 uint64_t *wait_ms, char *err, size_t err_size)
{
	const char *addr = NULL;
	uint64_t port = 0;

	memset(node, 0, sizeof(*node));
	rdzv_job_config_init(cfg);
	cfg->min_nodes = cfg->max_nodes = 0;
	if (get_name(body, "node_id", RDZV_NAME_MAX, node->node_id, err,
		     err_size) ||
	    get_name(body, "incarnation", RDZV_INCARNATION_MAX,
		     node->incarnation, err, err_size) ||
	    get_u32(body, "nproc", 1, 1, RDZV_MAX_NPROC, &node->nproc, err,
		    err_size) ||
	    get_u32(body, "run", 0, 1, UINT32_MAX, &node->run, err, err_size) ||
	    jsonh_get_u64(body, "master_port", 0, 1, 65535, &port, err,
			  err_size) ||
	    jsonh_get_str(body, "addr", 0, RDZV_ADDR_MAX, &addr, err,
			  err_size) ||
	    get_u32(body, "min_nodes", 1, 1, UINT32_MAX, &cfg->min_nodes, err,
		    err_size) ||
	    get_u32(body, "max_nodes", 1, 1, UINT32_MAX, &cfg->max_nodes, err,
		    err_size) ||
	    get_u32(body, "max_restarts", 1, 0, RDZV_MAX_RESTARTS,
		    &cfg->max_restarts, err, err_size) ||
	    get_dur(body, "join_timeout", 1, JOIN_TIMEOUT_MAX,
		    &cfg->join_timeout_ms, err, err_size) ||
	    get_dur(body, "last_call_timeout", 0, TIMEOUT_MAX,
		    &cfg->last_call_timeout_ms, err, err_size) ||
	    get_dur(body, "heartbeat_interval", 1, TIMEOUT_MAX,
		    &cfg->heartbeat_interval_ms, err, err_size) ||
	    get_dur(body, "heartbeat_timeout", 1, TIMEOUT_MAX,
		    &cfg->heartbeat_timeout_ms, err, err_size) ||
	    request_wait(req, body, RDZV_WAIT_DEFAULT_MS, wait_ms, err,
			 err_size))
		return DL_EINVAL;
	if (cfg->min_nodes > cfg->max_nodes) {
		snprintf(err, err_size,
			 "min_nodes must not be above max_nodes");
		return DL_EINVAL;
	}
	if (!addr)
		addr = req->peer_addr ? req->peer_addr : "";
	if (!addr_valid(addr)) {
		snprintf(err, err_size, "field 'addr' must be an IP address");
		return DL_EINVAL;
	}
	snprintf(node->addr, sizeof(node->addr), "%s", addr);
	node->master_port = (uint16_t)port;
	return 0;
}
