/* SPDX-License-Identifier: Apache-2.0 */
/*
 * report.c - what a failed worker tells: failure records for the
 * rendezvous server and the job-wide root-cause report every agent prints.
 *
 * The message of a failure is the worker's TORCHELASTIC_ERROR_FILE when it
 * wrote one (the JSON form of PyTorch's @record), else the tail of its
 * stderr; a hung worker's (progress.c) says so, then gives that tail.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/fsutil.h"
#include "dlaunch/jsonh.h"
#include "dlaunch/parse.h"
#include "dlaunch/spawn.h"
#include "internal.h"
#include "report.h"

#define ERROR_FILE_MAX_BYTES (1u << 20)

int agent_error_file_message(const char *data, size_t len, char *out,
			     size_t out_size, uint64_t *timestamp_s)
{
	json_t *root = NULL, *msg, *extra, *v;
	const char *text = NULL, *stack = NULL;
	int rc = DL_EINVAL;

	if (jsonh_parse(data, len, 16, &root, NULL, 0) != 0)
		return DL_EINVAL;
	msg = json_object_get(root, "message");
	if (json_is_string(msg)) {
		text = json_string_value(msg);
	} else if (json_is_object(msg)) {
		v = json_object_get(msg, "message");
		if (json_is_string(v))
			text = json_string_value(v);
		extra = json_object_get(msg, "extraInfo");
		if (json_is_object(extra)) {
			v = json_object_get(extra, "py_callstack");
			if (json_is_string(v))
				stack = json_string_value(v);
			v = json_object_get(extra, "timestamp");
			if (timestamp_s && json_is_string(v)) {
				uint64_t ts;
				if (parse_u64(json_string_value(v), 0,
					      UINT64_MAX / 1000, &ts) == 0)
					*timestamp_s = ts;
			} else if (timestamp_s && json_is_integer(v) &&
				   json_integer_value(v) >= 0) {
				*timestamp_s = (uint64_t)json_integer_value(v);
			}
		}
	}
	if (!text)
		goto out;
	if (stack && *stack)
		snprintf(out, out_size, "%s\n%s", text, stack);
	else
		snprintf(out, out_size, "%s", text);
	rc = 0;
out:
	json_decref(root);
	return rc;
}

/* tail_text copies the ring of w's last stderr bytes into out, starting at
 * a line boundary when the ring had wrapped. */
static void tail_text(const struct agent_worker *w, char *out, size_t size)
{
	size_t n = w->tail_len, start, i, k = 0;
	start = (w->tail_pos + AGENT_TAIL_BYTES - n) % AGENT_TAIL_BYTES;
	for (i = 0; i < n && k + 1 < size; i++)
		out[k++] = w->tail[(start + i) % AGENT_TAIL_BYTES];
	out[k] = '\0';
	if (n == AGENT_TAIL_BYTES) {
		char *nl = strchr(out, '\n');
		if (nl && nl[1])
			memmove(out, nl + 1, strlen(nl + 1) + 1);
	}
	while (k > 0 && (out[k - 1] == '\n' || out[k - 1] == '\r'))
		out[--k] = '\0';
}

json_t *report_failure(const struct agent_worker *w)
{
	char msg[AGENT_MESSAGE_MAX], tmp[16];
	char *data = NULL;
	size_t len = 0;
	uint64_t ts_s = 0;
	json_t *f;
	int have = 0;

	msg[0] = '\0';
	if (!w->spawn_failed && w->error_file[0] &&
	    fs_read_file(w->error_file, ERROR_FILE_MAX_BYTES, &data, &len) ==
		0) {
		have = agent_error_file_message(data, len, msg, sizeof(msg),
						&ts_s) == 0;
		free(data);
	}
	if (!have)
		tail_text(w, msg, sizeof(msg));
	f = json_object();
	if (!f)
		return NULL;
	json_object_set_new(f, "rank", json_integer(w->rank));
	json_object_set_new(f, "local_rank", json_integer(w->local_rank));
	json_object_set_new(f, "pid", json_integer(w->pid));
	if (!w->spawn_failed && WIFSIGNALED(w->wstatus)) {
		int sig = WTERMSIG(w->wstatus);
		json_object_set_new(f, "exitcode", json_integer(-sig));
		json_object_set_new(
		    f, "signal",
		    json_string(spawn_signal_name(sig, tmp, sizeof(tmp))));
	} else {
		json_object_set_new(
		    f, "exitcode",
		    json_integer(w->spawn_failed ? 127
						 : WEXITSTATUS(w->wstatus)));
		json_object_set_new(f, "signal", json_null());
	}
	json_object_set_new(f, "time_ms",
			    json_integer(ts_s ? (json_int_t)(ts_s * 1000)
					      : (json_int_t)w->end_wall_ms));
	json_object_set_new(f, "message", json_string(msg));
	return f;
}

json_t *report_hang(const struct agent_worker *w, uint64_t timeout_ms)
{
	static const char head[] = "\nlast stderr output:\n";
	char msg[AGENT_MESSAGE_MAX], tail[AGENT_TAIL_BYTES + 1];
	json_t *f = json_object();
	int k;
	if (!f)
		return NULL;
	/* the first line says what happened; its stderr may say where */
	k = snprintf(msg, sizeof(msg), "no progress for %g s (hung?)",
		     (double)timeout_ms / 1000);
	tail_text(w, tail, sizeof(tail));
	if (*tail && k > 0 && (size_t)k + sizeof(head) < sizeof(msg)) {
		/* what fits of the tail, its newest bytes */
		size_t room = sizeof(msg) - (size_t)k - sizeof(head);
		size_t len = strlen(tail);
		const char *t = tail + (len > room ? len - room : 0);
		memcpy(msg + k, head, sizeof(head) - 1);
		memcpy(msg + (size_t)k + sizeof(head) - 1, t, strlen(t) + 1);
	}
	json_object_set_new(f, "rank", json_integer(w->rank));
	json_object_set_new(f, "local_rank", json_integer(w->local_rank));
	json_object_set_new(f, "pid", json_integer(w->pid));
	/* alive when found: no exit status and no signal of its own */
	json_object_set_new(f, "exitcode", json_integer(-1));
	json_object_set_new(f, "signal", json_null());
	json_object_set_new(f, "time_ms",
			    json_integer((json_int_t)clock_wall_ms()));
	json_object_set_new(f, "message", json_string(msg));
	return f;
}

static void print_indented(FILE *fp, const char *label, const char *text)
{
	const char *p = text;
	int lines = 0;
	fprintf(fp, "  %-10s: ", label);
	if (!*p) {
		fprintf(fp, "<no error file, no stderr output>\n");
		return;
	}
	while (*p && lines < 40) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		fprintf(fp, "%s%.*s\n", lines ? "              " : "", (int)n,
			p);
		lines++;
		p += n;
		if (*p == '\n')
			p++;
	}
}

void report_print(const char *job, json_t *failures, int n_total,
		  const char *hang_reason)
{
	json_t *f = json_array_get(failures, 0);
	char when[32];
	json_int_t exitcode;
	json_t *sig, *node, *msg, *t, *round;
	FILE *fp = stderr;

	fprintf(fp,
		"============================================================"
		"\n");
	fprintf(fp, "dlaunch: job %s FAILED\n", job);
	if (!json_is_object(f)) {
		fprintf(fp, "  no failure was recorded (the job failed "
			    "without a worker failure, e.g. too few nodes)\n");
		goto out;
	}
	t = json_object_get(f, "time_ms");
	node = json_object_get(f, "node_id");
	sig = json_object_get(f, "signal");
	msg = json_object_get(f, "message");
	round = json_object_get(f, "round");
	exitcode = json_integer_value(json_object_get(f, "exitcode"));
	clock_format_wall(json_is_integer(t) ? (uint64_t)json_integer_value(t)
					     : 0,
			  when, sizeof(when));
	fprintf(fp, "root cause (first observed failure):\n");
	fprintf(fp, "  %-10s: %s\n", "time", when);
	fprintf(fp, "  %-10s: %s\n", "node",
		json_is_string(node) ? json_string_value(node) : "?");
	if (json_is_integer(round))
		fprintf(fp, "  %-10s: %lld\n", "round",
			(long long)json_integer_value(round));
	fprintf(
	    fp, "  %-10s: %lld (local_rank: %lld)\n", "rank",
	    (long long)json_integer_value(json_object_get(f, "rank")),
	    (long long)json_integer_value(json_object_get(f, "local_rank")));
	if (json_is_string(sig))
		fprintf(fp, "  %-10s: %lld (killed by %s)\n", "exitcode",
			(long long)exitcode, json_string_value(sig));
	else
		fprintf(fp, "  %-10s: %lld\n", "exitcode", (long long)exitcode);
	print_indented(fp, "error",
		       json_is_string(msg) ? json_string_value(msg) : "");
	if (n_total > 1)
		fprintf(fp, "other failures: %d (dlaunch status shows them)\n",
			n_total - 1);
out:
	/* this node's last hang diagnosis, where one ran */
	if (hang_reason)
		fprintf(fp, "last hang diagnosis: %s\n", hang_reason);
	fprintf(fp,
		"============================================================"
		"\n");
	fflush(fp);
}
