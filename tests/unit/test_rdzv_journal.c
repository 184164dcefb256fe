/* SPDX-License-Identifier: Apache-2.0 */
/* test_rdzv_journal.c - the rendezvous journal: replay, damaged tails,
 * compaction, and the request layer's translation of state answers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../rendezvous/api.h"
#include "../../rendezvous/journal.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"

static char dir[] = "/tmp/test_rdzv_journal.XXXXXX";
static char err[512];

static struct rdzv_response call(struct rdzv_api *api, const char *method,
				 const char *path, const char *query,
				 const char *body, uint64_t now)
{
	struct rdzv_request req = {method,	 path,	      query, body,
				   strlen(body), "127.0.0.1", now,   0};
	struct rdzv_response resp;
	rdzv_response_init(&resp);
	rdzv_api_handle(api, &req, &resp);
	rdzv_api_commit(api, NULL, NULL);
	return resp;
}

static int status(struct rdzv_api *api, const char *method, const char *path,
		  const char *query, const char *body, uint64_t now)
{
	struct rdzv_response r = call(api, method, path, query, body, now);
	int s = r.status;
	rdzv_response_release(&r);
	return s;
}

#define JOIN(n)                                                                \
	"{\"node_id\":\"" n "\",\"incarnation\":\"i\",\"nproc\":1,"            \
	"\"min_nodes\":1,\"max_nodes\":1,\"max_restarts\":2,\"wait_ms\":0}"

static char *path_of(const char *name)
{
	static char p[256];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return p;
}

static off_t file_size(const char *name)
{
	struct stat s;
	return stat(path_of(name), &s) == 0 ? s.st_size : -1;
}

/* write_state journals a job at round 1, then one more change (round 2) */
static off_t write_state(void)
{
	struct rdzv_state *st = rdzv_state_new(NULL);
	struct rdzv_journal *jr;
	struct rdzv_api *api;
	off_t after_first;
	assert_int_equal(rdzv_journal_open(dir, st, 0, &jr, err, sizeof(err)),
			 0);
	api = rdzv_api_new(st, jr);
	assert_int_equal(
	    status(api, "POST", "/v1/jobs/j1/join", NULL, JOIN("n1"), 1), 200);
	after_first = file_size("journal");
	assert_int_equal(status(api, "POST", "/v1/jobs/j1/report", NULL,
				"{\"node_id\":\"n1\",\"incarnation\":\"i\","
				"\"round\":1,\"status\":\"failed\","
				"\"failures\":[]}",
				2),
			 200);
	rdzv_api_free(api);
	rdzv_journal_close(jr);
	rdzv_state_free(st);
	return after_first;
}

static uint64_t round_after_replay(void)
{
	struct rdzv_state *st = rdzv_state_new(NULL);
	struct rdzv_journal *jr;
	json_t *d;
	uint64_t round;
	assert_int_equal(rdzv_journal_open(dir, st, 0, &jr, err, sizeof(err)),
			 0);
	d = rdzv_job_detail_json(st, "j1", 0);
	assert_non_null(d);
	round = (uint64_t)json_integer_value(json_object_get(d, "round"));
	json_decref(d);
	rdzv_journal_close(jr);
	rdzv_state_free(st);
	return round;
}

static void clean(void)
{
	unlink(path_of("journal"));
	unlink(path_of("snapshot"));
	unlink(path_of("lock"));
}

static void test_replay(void **state)
{
	(void)state;
	clean();
	write_state();
	assert_int_equal(round_after_replay(), 2);
	/* replay is repeatable */
	assert_int_equal(round_after_replay(), 2);
}

/* a flipped bit in the last record: it is dropped, the rest is kept, and
 * the damaged tail is cut so new records follow intact ones */
static void test_bit_flip(void **state)
{
	off_t first, size;
	int fd;
	unsigned char c;
	(void)state;
	clean();
	first = write_state();
	size = file_size("journal");
	assert_true(size > first);
	fd = open(path_of("journal"), O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &c, 1, first + 30), 1);
	c ^= 0x10;
	assert_int_equal(pwrite(fd, &c, 1, first + 30), 1);
	close(fd);
	assert_int_equal(round_after_replay(), 1);
	assert_int_equal(file_size("journal"), first);
}

/* a record cut short (a crash mid-append) */
static void test_torn_tail(void **state)
{
	off_t first, size;
	(void)state;
	clean();
	first = write_state();
	size = file_size("journal");
	assert_int_equal(truncate(path_of("journal"), size - 3), 0);
	assert_int_equal(round_after_replay(), 1);
	assert_int_equal(file_size("journal"), first);
}

/* heartbeats that change nothing but the node's liveness write nothing:
 * the journal keeps its size over many of them, with and without the
 * "recovery" an agent sends with each; the next change is journaled */
static void test_heartbeat_not_journaled(void **state)
{
	struct rdzv_state *st = rdzv_state_new(NULL);
	struct rdzv_journal *jr;
	struct rdzv_api *api;
	off_t size;
	(void)state;
	clean();
	assert_int_equal(rdzv_journal_open(dir, st, 0, &jr, err, sizeof(err)),
			 0);
	api = rdzv_api_new(st, jr);
	assert_int_equal(
	    status(api, "POST", "/v1/jobs/j1/join", NULL, JOIN("n1"), 1), 200);
	size = file_size("journal");
	assert_true(size > 0);
	for (uint64_t t = 2; t < 202; t++)
		assert_int_equal(
		    status(api, "POST", "/v1/jobs/j1/heartbeat", NULL,
			   t % 2 ? "{\"node_id\":\"n1\",\"incarnation\":"
				   "\"i\",\"round\":1}"
				 : "{\"node_id\":\"n1\",\"incarnation\":"
				   "\"i\",\"round\":1,\"recovery\":"
				   "\"started\",\"recovery_why\":\"first\"}",
			   t),
		    200);
	assert_int_equal(file_size("journal"), size);
	assert_int_equal(status(api, "POST", "/v1/jobs/j1/report", NULL,
				"{\"node_id\":\"n1\",\"incarnation\":\"i\","
				"\"round\":1,\"status\":\"succeeded\"}",
				300),
			 200);
	assert_true(file_size("journal") > size);
	rdzv_api_free(api);
	rdzv_journal_close(jr);
	rdzv_state_free(st);
}

/* the request layer: statuses for each kind of answer */
static void test_api_statuses(void **state)
{
	struct rdzv_state *st = rdzv_state_new(NULL);
	struct rdzv_api *api = rdzv_api_new(st, NULL);
	struct rdzv_response r;
	(void)state;
	assert_int_equal(status(api, "GET", "/healthz", NULL, "", 0), 200);
	assert_int_equal(status(api, "GET", "/nope", NULL, "", 0), 404);
	assert_int_equal(status(api, "GET", "/v1/jobs/j1/join", NULL, "", 0),
			 405);
	assert_int_equal(status(api, "POST", "/v1/jobs/j1/join", NULL, "{", 0),
			 400);
	assert_int_equal(
	    status(api, "POST", "/v1/jobs/j1/join", NULL, JOIN("n1"), 1), 200);
	assert_int_equal(status(api, "POST", "/v1/jobs/j1/heartbeat", NULL,
				"{\"node_id\":\"n1\",\"incarnation\":\"i\","
				"\"round\":9}",
				2),
			 409);
	r = call(api, "GET", "/v1/jobs/j1/watch", "round=1&wait_ms=100", "", 3);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.poll.kind, RDZV_POLL_WATCH);
	assert_int_equal(r.poll.deadline_ms, 103);
	rdzv_response_release(&r);
	r = call(api, "GET", "/v1/jobs/j1/kv/k", "wait_ms=0", "", 3);
	assert_int_equal(r.status, 404);
	rdzv_response_release(&r);
	assert_int_equal(status(api, "PUT", "/v1/jobs/j1/kv/k", NULL, "v", 4),
			 200);
	r = call(api, "GET", "/v1/jobs/j1/kv/k", NULL, "", 5);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.body.len, 1);
	assert_string_equal(r.content_type, "application/octet-stream");
	rdzv_response_release(&r);
	assert_int_equal(status(api, "POST", "/v1/jobs/j1/report", NULL,
				"{\"node_id\":\"n1\",\"incarnation\":\"i\","
				"\"round\":1,\"status\":\"succeeded\"}",
				6),
			 200);
	assert_int_equal(
	    status(api, "POST", "/v1/jobs/j1/join", NULL, JOIN("n2"), 7), 410);
	rdzv_api_free(api);
	rdzv_state_free(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_replay),
	    cmocka_unit_test(test_bit_flip),
	    cmocka_unit_test(test_torn_tail),
	    cmocka_unit_test(test_heartbeat_not_journaled),
	    cmocka_unit_test(test_api_statuses),
	};
	int rc;
	log_set_level(LOG_ERROR);
	if (!mkdtemp(dir))
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	clean();
	rmdir(dir);
	return rc;
}
