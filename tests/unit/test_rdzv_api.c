/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_rdzv_api.c - the heartbeat's two paths through the request layer
 * (rendezvous/api_heartbeat.c) answer alike: each heartbeat is sent as
 * agents write it (read without jansson) and again with one character of
 * a string spelled as a \u escape (the same JSON, read by jansson); the
 * answers must match byte for byte, in every state the job goes through.
 * The status answer written without jansson must equal jansson's dump of
 * the same object for any values.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../rendezvous/api.h"
#include "../../rendezvous/api_int.h"
#include "dlaunch/log.h"

struct answer {
	int status;
	char body[1024];
};

static struct answer call(struct rdzv_api *api, const char *method,
			  const char *path, const char *body, uint64_t now)
{
	struct rdzv_request req = {method,	 path,	      NULL, body,
				   strlen(body), "127.0.0.1", now,  1};
	struct rdzv_response resp;
	struct answer a;
	rdzv_response_init(&resp);
	rdzv_api_handle(api, &req, &resp);
	rdzv_api_commit(api, NULL, NULL);
	a.status = resp.status;
	assert_true(resp.body.len < sizeof(a.body));
	memcpy(a.body, resp.body.data ? resp.body.data : "", resp.body.len);
	a.body[resp.body.len] = '\0';
	rdzv_response_release(&resp);
	return a;
}

/* escaped_twin writes body with the first letter of its first string
 * value spelled \u00XX: the same document to jansson, none to jsonflat */
static void escaped_twin(const char *body, char *out, size_t out_size)
{
	const char *p = strchr(body, ':');
	size_t at;
	assert_non_null(p);
	for (p++; *p == ' '; p++)
		;
	assert_true(*p == '"');
	at = (size_t)(p - body) + 1;
	assert_true(body[at] != '"' && body[at] != '\\');
	snprintf(out, out_size, "%.*s\\u%04x%s", (int)at, body,
		 (unsigned)(unsigned char)body[at], body + at + 1);
}

/* send_both sends body both ways; the answers must be the same (only
 * their status when exact is 0: jansson's message for a malformed
 * document names a column, which the escape moves) */
static struct answer send_both(struct rdzv_api *api, const char *body,
			       uint64_t now, int exact)
{
	char twin[1024];
	struct answer a, b;
	escaped_twin(body, twin, sizeof(twin));
	a = call(api, "POST", "/v1/jobs/j/heartbeat", body, now);
	b = call(api, "POST", "/v1/jobs/j/heartbeat", twin, now);
	if (a.status != b.status || (exact && strcmp(a.body, b.body) != 0)) {
		fprintf(stderr, "%s\n -> %d %s\n%s\n -> %d %s\n", body,
			a.status, a.body, twin, b.status, b.body);
		fail();
	}
	return a;
}

static struct answer heartbeat(struct rdzv_api *api, const char *body,
			       uint64_t now)
{
	return send_both(api, body, now, 1);
}

#define HB(fields) "{\"node_id\":\"n1\",\"incarnation\":\"i\"," fields "}"

/* the answers of one job's life, to bodies good and bad */
static void test_paths_agree(void **state)
{
	struct rdzv_state *st = rdzv_state_new(NULL);
	struct rdzv_api *api = rdzv_api_new(st, NULL);
	struct answer a;
	(void)state;
	log_set_level(LOG_ERROR);
	/* no job yet */
	a = heartbeat(api, HB("\"round\":1"), 10);
	assert_int_equal(a.status, 404);
	a = call(api, "POST", "/v1/jobs/j/join",
		 "{\"node_id\":\"n1\",\"incarnation\":\"i\",\"nproc\":1,"
		 "\"min_nodes\":1,\"max_nodes\":1,\"max_restarts\":2,"
		 "\"wait_ms\":0}",
		 20);
	assert_int_equal(a.status, 200);

	a = heartbeat(api, HB("\"round\":1"), 30);
	assert_int_equal(a.status, 200);
	assert_string_equal(a.body,
			    "{\"round\":1,\"state\":\"RUNNING\",\"action\":"
			    "\"continue\",\"restart_count\":0}");
	a = heartbeat(api,
		      HB("\"round\":1,\"recovery\":\"started\","
			 "\"recovery_why\":\"the first round of this node\""),
		      40);
	assert_int_equal(a.status, 200);
	/* whitespace, members in another order, members nobody reads */
	a = heartbeat(api,
		      " { \"node_id\" : \"n1\" , \"extra\" : 7 , \"round\" : 1"
		      " , \"incarnation\" : \"i\" , \"more\" : \"x\" }\n",
		      41);
	assert_int_equal(a.status, 200);
	a = heartbeat(api, HB("\"round\":1,\"recovery_why\":\"without how\""),
		      42);
	assert_int_equal(a.status, 200);

	/* 400s: the general path words them, for both */
	assert_int_equal(
	    heartbeat(api, "{\"node_id\":\"n1\",\"incarnation\":\"i\"}", 50)
		.status,
	    400);
	assert_int_equal(send_both(api, HB(""), 50, 0).status, 400);
	assert_int_equal(heartbeat(api, HB("\"round\":\"1\""), 50).status, 400);
	assert_int_equal(heartbeat(api, HB("\"round\":-1"), 50).status, 400);
	assert_int_equal(heartbeat(api, HB("\"round\":1.0"), 50).status, 400);
	assert_int_equal(heartbeat(api, HB("\"round\":null"), 50).status, 400);
	assert_int_equal(
	    heartbeat(api, HB("\"round\":1,\"recovery\":\"sideways\""), 50)
		.status,
	    400);
	assert_int_equal(
	    heartbeat(api, HB("\"round\":1,\"recovery\":7"), 50).status, 400);
	assert_int_equal(
	    heartbeat(api,
		      "{\"node_id\":\"n 1\",\"incarnation\":\"i\",\"round\":1}",
		      50)
		.status,
	    400);
	assert_int_equal(
	    heartbeat(api, "{\"node_id\":\"n1\",\"round\":1}", 50).status, 400);
	assert_int_equal(
	    send_both(api, HB("\"round\":1,\"round\":1"), 50, 0).status, 400);

	/* 409s carry the job's status */
	a = heartbeat(api, HB("\"round\":2"), 60);
	assert_int_equal(a.status, 409);
	assert_non_null(strstr(a.body, "\"round\":1"));
	a = heartbeat(api,
		      "{\"node_id\":\"n1\",\"incarnation\":\"other\","
		      "\"round\":1}",
		      60);
	assert_int_equal(a.status, 409);
	a = heartbeat(
	    api, "{\"node_id\":\"n9\",\"incarnation\":\"i\",\"round\":1}", 60);
	assert_int_equal(a.status, 409);

	/* an open hang trigger goes with the answer */
	a = call(api, "POST", "/v1/jobs/j/dump", "{\"by\":\"t\"}", 70);
	assert_int_equal(a.status, 200);
	a = heartbeat(api, HB("\"round\":1"), 71);
	assert_int_equal(a.status, 200);
	assert_non_null(strstr(a.body, "\"dump\":{"));

	/* a preempted job's stop step */
	a = call(api, "POST", "/v1/jobs/j/preempt",
		 HB("\"round\":1,\"step\":100,\"step_rate\":10.0"), 80);
	assert_int_equal(a.status, 200);
	a = heartbeat(api, HB("\"round\":1"), 81);
	assert_int_equal(a.status, 200);
	assert_non_null(strstr(a.body, "\"preempt_step\":"));

	/* an ended job: stop for its member */
	a = call(api, "POST", "/v1/jobs/j/report",
		 HB("\"round\":1,\"status\":\"succeeded\""), 90);
	assert_int_equal(a.status, 200);
	a = heartbeat(api, HB("\"round\":1"), 91);
	assert_int_equal(a.status, 200);
	assert_non_null(strstr(a.body, "\"action\":\"stop\""));

	rdzv_api_free(api);
	rdzv_state_free(st);
}

/* api_reply_status writes what jansson dumps, whatever the values */
static void test_status_bytes(void **state)
{
	static const uint64_t rounds[] = {0,
					  1,
					  10,
					  2147483648ull,
					  999999999999999999ull,
					  9223372036854775807ull,
					  9223372036854775808ull,
					  UINT64_MAX};
	static const uint32_t restarts[] = {0, 7, UINT32_MAX};
	static const uint64_t steps[] = {0, 5, 9223372036854775808ull};
	size_t cases = 0;
	(void)state;
	for (int s = 0; s < RDZV_JOB_NSTATES; s++)
		for (int act = 0; act < 3; act++)
			for (size_t i = 0; i < sizeof(rounds) / 8; i++)
				for (size_t k = 0; k < 3; k++)
					for (size_t p = 0; p < 3; p++) {
						struct rdzv_reply r = {
						    rounds[i],
						    (enum rdzv_job_state)s,
						    (enum rdzv_action)act,
						    restarts[k],
						    steps[p],
						    0};
						struct rdzv_response fast, slow;
						rdzv_response_init(&fast);
						rdzv_response_init(&slow);
						api_reply_status(&fast, 200,
								 &r);
						api_reply_json(
						    &slow, 200,
						    api_status_json(&r));
						assert_int_equal(fast.status,
								 slow.status);
						assert_string_equal(
						    fast.content_type,
						    slow.content_type);
						assert_string_equal(
						    fast.body.data,
						    slow.body.data);
						rdzv_response_release(&fast);
						rdzv_response_release(&slow);
						cases++;
					}
	assert_int_equal(cases, RDZV_JOB_NSTATES * 3 * 8 * 3 * 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_paths_agree),
	    cmocka_unit_test(test_status_bytes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
