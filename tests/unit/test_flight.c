/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_flight.c - unit tests of dlaunch-train's flight recorder
 * (trainer/dist_flight.c) and of its answer to the agent's dump
 * (trainer/control_dump.c, and over a real socket pair through the
 * control channel's reader thread, trainer/control.c): the ring wraps
 * keeping the newest entries oldest first, sequence numbers start at 1 in
 * each group, entered and finished states and times, N = 0 records
 * nothing, DLAUNCH_FLIGHT_ENTRIES is checked, a reader copying while a
 * writer records never sees a torn entry, and the dump file is one JSON
 * object of the contract (docs/worker-protocol.md), read back with
 * jansson as the agent reads it. Recording inside real collectives (both
 * kinds of operation, every rank the same numbers) and the hang hooks are
 * in test_dist.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../trainer/control.h"
#include "../../trainer/dist/dist_flight.h"
#include "dlaunch/buf.h"
#include "dlaunch/error.h"

static int64_t now_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* the newest entries, oldest first, once the ring has come round */
static void test_ring_wraps(void **state)
{
	struct dist_flight *f = dist_flight_new(4);
	struct dist_flight_entry e[8];
	uint64_t h[10];
	int64_t before = now_wall_ms() - 50;

	(void)state;
	assert_non_null(f);
	assert_int_equal(dist_flight_entries(f), 4);
	assert_int_equal(dist_flight_rank(f), -1);
	dist_flight_begin_group(f, 3);
	assert_int_equal(dist_flight_rank(f), 3);
	for (int i = 0; i < 10; i++) {
		dist_flight_set_step(f, 100 + i);
		h[i] = dist_flight_enter(f, (enum dist_flight_op)(i % 5),
					 (uint64_t)i * 8);
		assert_true(h[i] != 0);
		if (i != 8) /* the one before last stays in flight */
			dist_flight_finish(f, h[i]);
	}
	assert_int_equal(dist_flight_snapshot(f, e, 8), 4);
	for (int i = 0; i < 4; i++) {
		int k = 6 + i; /* the 7th to the 10th collective */
		assert_int_equal(e[i].seq, (uint64_t)k + 1);
		assert_int_equal(e[i].op, k % 5);
		assert_int_equal(e[i].bytes, (uint64_t)k * 8);
		assert_int_equal(e[i].step, 100 + k);
		assert_true(e[i].t_ms >= before);
		assert_true(e[i].t_ms <= now_wall_ms() + 50);
		assert_int_equal(e[i].finished, k != 8);
		if (k != 8)
			assert_true(e[i].done_ms >= e[i].t_ms);
		else
			assert_int_equal(e[i].done_ms, 0);
	}
	/* a snapshot smaller than the ring: the newest */
	assert_int_equal(dist_flight_snapshot(f, e, 2), 2);
	assert_int_equal(e[0].seq, 9);
	assert_int_equal(e[1].seq, 10);
	/* a handle whose slot was reused, and 0, are ignored; so is a
	 * second finish (done_ms stays) */
	dist_flight_finish(f, h[4]); /* slot of h[8] */
	dist_flight_finish(f, 0);
	assert_int_equal(dist_flight_snapshot(f, e, 8), 4);
	assert_int_equal(e[2].finished, 0);
	int64_t done = e[3].done_ms;
	dist_flight_finish(f, h[9]);
	assert_int_equal(dist_flight_snapshot(f, e, 8), 4);
	assert_int_equal(e[3].done_ms, done);
	dist_flight_free(f);
}

/* a new group numbers from 1 again and hides the old group's entries */
static void test_groups(void **state)
{
	struct dist_flight *f = dist_flight_new(16);
	struct dist_flight_entry e[16];

	(void)state;
	dist_flight_begin_group(f, 0);
	for (int i = 0; i < 5; i++)
		dist_flight_finish(
		    f, dist_flight_enter(f, DIST_FLIGHT_ALL_REDUCE, 4));
	assert_int_equal(dist_flight_snapshot(f, e, 16), 5);
	assert_int_equal(e[4].seq, 5);
	dist_flight_begin_group(f, 2);
	assert_int_equal(dist_flight_snapshot(f, e, 16), 0);
	assert_int_equal(dist_flight_rank(f), 2);
	dist_flight_enter(f, DIST_FLIGHT_BARRIER, 0);
	dist_flight_enter(f, DIST_FLIGHT_BROADCAST, 12);
	assert_int_equal(dist_flight_snapshot(f, e, 16), 2);
	assert_int_equal(e[0].seq, 1);
	assert_int_equal(e[0].op, DIST_FLIGHT_BARRIER);
	assert_int_equal(e[1].seq, 2);
	assert_int_equal(e[1].finished, 0);
	assert_int_equal(e[0].step, -1); /* no step set */
	dist_flight_free(f);
}

/* N = 0: nothing recorded, where the loop stands still known; NULL is
 * accepted everywhere */
static void test_off(void **state)
{
	struct dist_flight *f = dist_flight_new(0);
	struct dist_flight_entry e[2];
	struct buf b;
	json_t *j;

	(void)state;
	assert_non_null(f);
	assert_int_equal(dist_flight_entries(f), 0);
	dist_flight_begin_group(f, 1);
	dist_flight_set_step(f, 7);
	dist_flight_set_phase(f, "train_step");
	assert_int_equal(dist_flight_enter(f, DIST_FLIGHT_ALL_REDUCE, 4), 0);
	dist_flight_finish(f, 1);
	assert_int_equal(dist_flight_snapshot(f, e, 2), 0);
	buf_init(&b, 1 << 16);
	assert_int_equal(buf_append_str(&b, "{\"pid\":1"), 0);
	assert_int_equal(dist_flight_format_dump(f, &b), 0);
	assert_int_equal(buf_append_str(&b, "}"), 0);
	j = json_loads(buf_cstr(&b), 0, NULL);
	assert_non_null(j);
	assert_null(json_object_get(j, "flight"));
	assert_int_equal(json_integer_value(json_object_get(j, "rank")), 1);
	assert_non_null(
	    strstr(json_string_value(json_object_get(j, "threads")), "step 7"));
	assert_non_null(strstr(json_string_value(json_object_get(j, "threads")),
			       "not recorded"));
	json_decref(j);
	buf_release(&b);
	dist_flight_free(f);

	/* NULL: no recorder at all */
	assert_int_equal(dist_flight_enter(NULL, DIST_FLIGHT_BARRIER, 0), 0);
	dist_flight_finish(NULL, 3);
	dist_flight_begin_group(NULL, 0);
	dist_flight_set_step(NULL, 1);
	dist_flight_set_phase(NULL, "x");
	assert_int_equal(dist_flight_snapshot(NULL, e, 2), 0);
	assert_int_equal(dist_flight_step(NULL), -1);
	assert_null(dist_flight_phase(NULL));
	buf_init(&b, 1024);
	assert_int_equal(dist_flight_format_json(NULL, &b), 0);
	assert_string_equal(buf_cstr(&b), "[]");
	buf_release(&b);
	assert_null(dist_flight_new(DIST_FLIGHT_MAX_ENTRIES + 1));
}

static void test_from_env(void **state)
{
	struct dist_flight *f = NULL;
	char err[256];
	static const char *bad[] = {"-1", "x", "4097", "1e3", " 5"};

	(void)state;
	unsetenv("DLAUNCH_FLIGHT_ENTRIES");
	assert_int_equal(dist_flight_from_env(&f, err, sizeof(err)), 0);
	assert_int_equal(dist_flight_entries(f), DIST_FLIGHT_DEFAULT_ENTRIES);
	dist_flight_free(f);
	setenv("DLAUNCH_FLIGHT_ENTRIES", "0", 1);
	assert_int_equal(dist_flight_from_env(&f, err, sizeof(err)), 0);
	assert_non_null(f);
	assert_int_equal(dist_flight_entries(f), 0);
	dist_flight_free(f);
	setenv("DLAUNCH_FLIGHT_ENTRIES", "4096", 1);
	assert_int_equal(dist_flight_from_env(&f, err, sizeof(err)), 0);
	assert_int_equal(dist_flight_entries(f), 4096);
	dist_flight_free(f);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("DLAUNCH_FLIGHT_ENTRIES", bad[i], 1);
		f = (struct dist_flight *)&f; /* must be reset */
		assert_int_equal(dist_flight_from_env(&f, err, sizeof(err)),
				 DL_EINVAL);
		assert_null(f);
		assert_non_null(strstr(err, "DLAUNCH_FLIGHT_ENTRIES"));
	}
	unsetenv("DLAUNCH_FLIGHT_ENTRIES");
}

/* ---- a reader while a writer records ---- */

struct race {
	struct dist_flight *f;
	atomic_int stop;
};

static void *race_writer(void *arg)
{
	struct race *r = arg;
	uint64_t i = 0;

	while (!atomic_load(&r->stop)) {
		dist_flight_set_step(r->f, (int64_t)i);
		/* bytes and step are a function of the seq: a torn copy
		 * shows as a mismatch */
		uint64_t h = dist_flight_enter(r->f, DIST_FLIGHT_ALL_REDUCE,
					       (i + 1) * 3);
		dist_flight_finish(r->f, h);
		i++;
	}
	return NULL;
}

static void test_concurrent_reader(void **state)
{
	struct race r = {dist_flight_new(8), 0};
	struct dist_flight_entry e[8];
	pthread_t t;
	size_t total = 0;

	(void)state;
	dist_flight_begin_group(r.f, 0);
	assert_int_equal(pthread_create(&t, NULL, race_writer, &r), 0);
	/* 20000 copies, at least 5000 of them while entries are there
	 * (the writer thread may start late), within 20 s */
	time_t give_up = time(NULL) + 20;
	for (int k = 0, full = 0;
	     k < 20000 || (full < 5000 && time(NULL) < give_up); k++) {
		size_t n = dist_flight_snapshot(r.f, e, 8);
		for (size_t i = 0; i < n; i++) {
			assert_int_equal(e[i].bytes, e[i].seq * 3);
			assert_int_equal(e[i].step, (int64_t)e[i].seq - 1);
			if (i > 0)
				assert_true(e[i].seq > e[i - 1].seq);
		}
		total += n;
		full += n > 0;
	}
	atomic_store(&r.stop, 1);
	pthread_join(t, NULL);
	assert_true(total > 0);
	dist_flight_free(r.f);
}

/* ---- the dump file ---- */

static json_t *load_file(const char *path)
{
	json_error_t jerr;
	json_t *j = json_load_file(path, 0, &jerr);

	if (j == NULL)
		fprintf(stderr, "%s: %s\n", path, jerr.text);
	return j;
}

/* check_dump: the contract's reader: pid, rank, flight entries with
 * every member of the right type, threads text */
static void check_dump(json_t *j, int rank, size_t entries)
{
	json_t *fl = json_object_get(j, "flight"), *e;
	size_t i;

	assert_true(json_is_object(j));
	assert_int_equal(json_integer_value(json_object_get(j, "pid")),
			 getpid());
	assert_int_equal(json_integer_value(json_object_get(j, "rank")), rank);
	assert_true(json_is_string(json_object_get(j, "threads")));
	assert_true(json_is_array(fl));
	assert_int_equal(json_array_size(fl), entries);
	json_array_foreach(fl, i, e)
	{
		const char *op = json_string_value(json_object_get(e, "op"));
		const char *st = json_string_value(json_object_get(e, "state"));

		assert_int_equal(json_integer_value(json_object_get(e, "seq")),
				 (json_int_t)i + 1);
		assert_non_null(op);
		assert_true(strcmp(op, "all_reduce") == 0 ||
			    strcmp(op, "broadcast") == 0 ||
			    strcmp(op, "barrier") == 0);
		assert_true(json_is_integer(json_object_get(e, "bytes")));
		assert_true(json_is_integer(json_object_get(e, "t_ms")));
		assert_true(json_is_integer(json_object_get(e, "step")));
		assert_non_null(st);
		if (strcmp(st, "finished") == 0)
			assert_true(
			    json_integer_value(json_object_get(e, "done_ms")) >=
			    json_integer_value(json_object_get(e, "t_ms")));
		else
			assert_string_equal(st, "entered");
		if (strcmp(st, "entered") == 0)
			assert_null(json_object_get(e, "done_ms"));
	}
}

static int dump_hook(void *ctx, struct buf *out)
{
	return dist_flight_format_dump(ctx, out);
}

/* a recorder of two finished collectives and one in flight */
static struct dist_flight *sample_recorder(void)
{
	struct dist_flight *f = dist_flight_new(64);

	dist_flight_begin_group(f, 5);
	dist_flight_set_step(f, 41);
	dist_flight_set_phase(f, "train_step");
	dist_flight_finish(f, dist_flight_enter(f, DIST_FLIGHT_BROADCAST, 8));
	dist_flight_finish(f, dist_flight_enter(f, DIST_FLIGHT_BARRIER, 0));
	dist_flight_enter(f, DIST_FLIGHT_ALL_REDUCE, 4096);
	return f;
}

static void test_dump_file(void **state)
{
	struct dist_flight *f = sample_recorder();
	char dir[] = "/tmp/test_flight.XXXXXX", path[256], tmp[300];
	char err[256];
	const char *where;
	struct stat st;
	json_t *j;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/dump.json", dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	assert_int_equal(
	    control_dump_write(path, dump_hook, f, err, sizeof(err)), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(access(tmp, F_OK), -1); /* renamed, not left */
	j = load_file(path);
	assert_non_null(j);
	check_dump(j, 5, 3);
	where = json_string_value(json_object_get(j, "threads"));
	assert_non_null(strstr(where, "rank 5, step 41, phase train_step"));
	assert_non_null(strstr(where, "in all_reduce seq 3 (4096 bytes"));
	json_decref(j);

	/* no hook: the pid alone */
	assert_int_equal(control_dump_write(path, NULL, NULL, err, sizeof(err)),
			 0);
	j = load_file(path);
	assert_non_null(j);
	assert_int_equal(json_object_size(j), 1);
	json_decref(j);

	/* bad paths: an error, nothing written */
	assert_int_equal(
	    control_dump_write("relative.json", dump_hook, f, err, sizeof(err)),
	    DL_EINVAL);
	assert_non_null(strstr(err, "not absolute"));
	snprintf(path, sizeof(path), "%s/no/such/dir.json", dir);
	assert_int_equal(
	    control_dump_write(path, dump_hook, f, err, sizeof(err)), DL_ESYS);
	assert_non_null(strstr(err, "cannot write"));
	/* a link where the temporary file goes is not followed */
	snprintf(path, sizeof(path), "%s/dump.json", dir);
	unlink(path);
	{
		char target[300];
		snprintf(target, sizeof(target), "%s/target", dir);
		assert_int_equal(symlink(target, tmp), 0);
		assert_int_not_equal(
		    control_dump_write(path, dump_hook, f, err, sizeof(err)),
		    0);
		assert_int_equal(access(target, F_OK), -1);
		assert_int_equal(access(path, F_OK), -1);
	}
	unlink(tmp);
	rmdir(dir);
	dist_flight_free(f);
}

static void test_dumped_line(void **state)
{
	char line[256];
	char small[16];

	(void)state;
	assert_true(control_format_dumped(line, sizeof(line), "t-1:x", NULL) >
		    0);
	assert_string_equal(line, "{\"type\":\"dumped\",\"id\":\"t-1:x\"}\n");
	assert_true(control_format_dumped(line, sizeof(line), "a\"b\\",
					  "no \xff file\n") > 0);
	assert_string_equal(line, "{\"type\":\"dumped\",\"id\":\"a\\\"b\\\\\","
				  "\"error\":\"no \\ufffd file\\n\"}\n");
	assert_int_equal(
	    control_format_dumped(small, sizeof(small), "abcdefghij", NULL),
	    -1);
}

/* ---- through the channel: the reader thread answers ---- */

static void read_line(int fd, char *out, size_t size)
{
	size_t n = 0;

	while (n + 1 < size) {
		ssize_t k = read(fd, out + n, 1);
		assert_true(k == 1);
		if (out[n++] == '\n')
			break;
	}
	out[n] = '\0';
}

static void say(int fd, const char *line)
{
	size_t n = strlen(line);
	assert_int_equal(write(fd, line, n), (ssize_t)n);
}

static void test_channel_dump(void **state)
{
	struct dist_flight *f = sample_recorder();
	char dir[] = "/tmp/test_flight.XXXXXX", fdtext[16], line[512];
	char msg[768], path[256], err[256];
	struct control *c;
	struct timeval tv = {10, 0};
	json_t *j;
	uint64_t round;
	int sv[2];

	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	snprintf(fdtext, sizeof(fdtext), "%d", sv[1]);
	setenv("DLAUNCH_CONTROL_FD", fdtext, 1);
	assert_int_equal(control_open(&c, err, sizeof(err)), 0);
	read_line(sv[0], line, sizeof(line));
	assert_string_equal(line, "{\"type\":\"hello\",\"version\":1,"
				  "\"handles\":[\"abort\",\"membership\","
				  "\"preempt\",\"dump\"]}\n");
	control_set_dump_hook(c, dump_hook, f);
	snprintf(path, sizeof(path), "%s/w0.json", dir);
	snprintf(msg, sizeof(msg),
		 "{\"type\":\"dump\",\"id\":\"trig-7\",\"path\":\"%s\"}\n",
		 path);
	/* no welcome needed, and nothing from the main thread: the reader
	 * answers by itself */
	say(sv[0], msg);
	read_line(sv[0], line, sizeof(line));
	assert_string_equal(line, "{\"type\":\"dumped\",\"id\":\"trig-7\"}\n");
	j = load_file(path);
	assert_non_null(j);
	check_dump(j, 5, 3);
	json_decref(j);
	/* a path it cannot write: answered, with the reason */
	say(sv[0], "{\"type\":\"dump\",\"id\":\"t2\",\"path\":\"/nonexistent-"
		   "dir/x.json\"}\n");
	read_line(sv[0], line, sizeof(line));
	assert_non_null(strstr(line, "\"id\":\"t2\",\"error\":\"cannot write"));
	/* a dump without its path breaks the protocol: the channel ends */
	say(sv[0], "{\"type\":\"dump\",\"id\":\"t3\"}\n");
	assert_int_equal(control_wait_abort(c, 10000, &round), DL_ECLOSED);
	control_set_dump_hook(c, NULL, NULL);
	control_close(c);
	close(sv[0]);
	unlink(path);
	rmdir(dir);
	unsetenv("DLAUNCH_CONTROL_FD");
	dist_flight_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ring_wraps),
	    cmocka_unit_test(test_groups),
	    cmocka_unit_test(test_off),
	    cmocka_unit_test(test_from_env),
	    cmocka_unit_test(test_concurrent_reader),
	    cmocka_unit_test(test_dump_file),
	    cmocka_unit_test(test_dumped_line),
	    cmocka_unit_test(test_channel_dump),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
