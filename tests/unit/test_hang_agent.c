/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_hang_agent.c - the agent's pure pieces of the hang diagnosis
 * (agent/hang_proc.c): a process read from /proc, state names, the report's
 * text fields made UTF-8 clean and cut at 32 KiB with the marker, trigger
 * ids, the 512 KiB bound of a node report (stacks cut first), and the
 * control channel's `dump` line.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../agent/control_proto.h"
#include "../../agent/hang.h"
#include "dlaunch/buf.h"

static void test_proc_read(void **state)
{
	struct hang_proc p;
	(void)state;
	/* our own process reads (the parsing itself: test_procfs.c) */
	assert_int_equal(hang_proc_read(getpid(), &p), 0);
	assert_true(p.threads >= 1);
	assert_int_equal(hang_proc_read(0x7ffffff0, &p), -1);
}

static void test_state_names(void **state)
{
	(void)state;
	assert_string_equal(hang_state_name('R'), "running");
	assert_string_equal(hang_state_name('S'), "sleeping");
	assert_string_equal(hang_state_name('D'), "disk-sleep");
	assert_string_equal(hang_state_name('T'), "stopped");
	assert_string_equal(hang_state_name('t'), "tracing-stop");
	assert_string_equal(hang_state_name('Z'), "zombie");
	assert_string_equal(hang_state_name('X'), "dead");
	assert_string_equal(hang_state_name('I'), "sleeping");
}

static void test_text(void **state)
{
	json_t *t;
	char big[40000];
	(void)state;
	/* invalid UTF-8 becomes '?', NULs go, valid multibyte stays */
	t = hang_text("a\xff\x00"
		      "b\xc3\xa9"
		      "c\xe2\x82",
		      9, 100);
	assert_non_null(t);
	assert_string_equal(json_string_value(t), "a?b\xc3\xa9"
						  "c??");
	json_decref(t);
	/* over the maximum: cut with the marker, at most max bytes */
	memset(big, 'x', sizeof(big));
	t = hang_text(big, sizeof(big), HANG_TEXT_MAX);
	assert_int_equal(json_string_length(t), HANG_TEXT_MAX);
	assert_memory_equal(json_string_value(t) + HANG_TEXT_MAX - 8,
			    HANG_CUT_MARK, 8);
	json_decref(t);
	/* a cut never splits a character */
	for (size_t i = 0; i + 1 < 100; i += 2)
		memcpy(big + i, "\xc3\xa9", 2);
	t = hang_text(big, 100, 21);
	assert_non_null(t);
	assert_int_equal(json_string_length(t), 12 + 8);
	json_decref(t);
}

static void test_ids(void **state)
{
	char long_id[80];
	(void)state;
	assert_true(hang_id_valid("n1-1795816560878-1"));
	assert_true(hang_id_valid("a.b_c:d-e"));
	assert_false(hang_id_valid(""));
	assert_false(hang_id_valid(NULL));
	assert_false(hang_id_valid("a/b"));
	assert_false(hang_id_valid("a b"));
	assert_false(hang_id_valid("../x"));
	memset(long_id, 'a', sizeof(long_id));
	long_id[64] = '\0';
	assert_true(hang_id_valid(long_id));
	long_id[64] = 'a';
	long_id[65] = '\0';
	assert_false(hang_id_valid(long_id));
}

static json_t *big_worker(int rank, size_t native, size_t python, int flight)
{
	char *n = malloc(native + 1), *p = malloc(python + 1);
	json_t *w, *f = json_array();
	memset(n, 'n', native);
	n[native] = '\0';
	memset(p, 'p', python);
	p[python] = '\0';
	for (int i = 0; i < flight; i++)
		json_array_append_new(f, json_pack("{s:i,s:s,s:i,s:s}", "seq",
						   i + 1, "op", "all_reduce",
						   "bytes", 4096, "state",
						   "finished"));
	w = json_pack("{s:i,s:s,s:s,s:o}", "rank", rank, "native", n, "python",
		      p, "flight", f);
	free(n);
	free(p);
	return w;
}

static size_t size_of(json_t *v)
{
	char *s = json_dumps(v, JSON_COMPACT);
	size_t n = strlen(s);
	free(s);
	return n;
}

static void test_report_bound(void **state)
{
	json_t *r = json_pack("{s:i,s:[]}", "version", 1, "workers");
	json_t *ws = json_object_get(r, "workers");
	(void)state;
	for (int i = 0; i < 32; i++)
		json_array_append_new(ws, big_worker(i, 30000, 20000, 64));
	assert_true(size_of(r) > HANG_REPORT_MAX);
	assert_int_equal(hang_report_bound(r, HANG_REPORT_MAX), 0);
	assert_true(size_of(r) <= HANG_REPORT_MAX);
	/* stacks went first: the Python ones are longer than the native */
	assert_true(json_string_length(
			json_object_get(json_array_get(ws, 0), "python")) >=
		    json_string_length(
			json_object_get(json_array_get(ws, 0), "native")));
	assert_non_null(strstr(
	    json_string_value(json_object_get(json_array_get(ws, 0), "native")),
	    HANG_CUT_MARK));
	/* small already: untouched */
	assert_int_equal(hang_report_bound(r, HANG_REPORT_MAX), 0);
	/* a bound that nothing can meet */
	assert_int_equal(hang_report_bound(r, 10), -1);
	json_decref(r);
	/* not a report at all */
	r = json_string("x");
	assert_int_equal(hang_report_bound(r, 0), -1);
	json_decref(r);
}

static void *blocked_reader(void *arg)
{
	char c;
	/* returns when the test closes the pipe's write end */
	return read(*(int *)arg, &c, 1) < 0 ? arg : NULL;
}

/* hang_proc_threads lists the threads beside the leader (what a zombie
 * leader's report shows), hang_proc_tracer names no tracer of ours */
static void test_proc_threads(void **state)
{
	char out[512], comm[32];
	pid_t live = 0;
	pthread_t t;
	int fds[2];
	(void)state;
	assert_int_equal(hang_proc_threads(getpid(), out, sizeof(out), &live),
			 0);
	assert_int_equal(live, 0);
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(pthread_create(&t, NULL, blocked_reader, &fds[0]), 0);
	assert_int_equal(hang_proc_threads(getpid(), out, sizeof(out), &live),
			 1);
	assert_true(live > 0 && live != getpid());
	assert_non_null(strstr(out, "tid "));
	/* a buffer too small is cut, never overrun */
	assert_int_equal(hang_proc_threads(getpid(), out, 4, &live), 1);
	assert_true(strlen(out) < 4);
	close(fds[1]);
	pthread_join(t, NULL);
	close(fds[0]);
	assert_int_equal(hang_proc_tracer(getpid(), comm, sizeof(comm)), 0);
	assert_int_equal(hang_proc_threads(-1, out, sizeof(out), &live), 0);
}

static void test_dump_line(void **state)
{
	struct buf b;
	(void)state;
	buf_init(&b, 1 << 16);
	assert_int_equal(control_write_dump(&b, "t-1", "/x/dump.json"), 0);
	assert_string_equal(
	    buf_cstr(&b),
	    "{\"type\":\"dump\",\"id\":\"t-1\",\"path\":\"/x/dump.json\"}\n");
	buf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_proc_read),
	    cmocka_unit_test(test_state_names),
	    cmocka_unit_test(test_text),
	    cmocka_unit_test(test_ids),
	    cmocka_unit_test(test_report_bound),
	    cmocka_unit_test(test_dump_line),
	    cmocka_unit_test(test_proc_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
