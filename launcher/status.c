/*
 * status.c - `dlaunch status`: a readable table of the rendezvous' jobs,
 * or of one job's members and failures, from GET /v1/jobs[/{job}].
 */
#include <event2/event.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/agent_client.h"
#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/fsutil.h"
#include "dlaunch/launcher.h"
#include "dlaunch/parse.h"

struct status_ctx {
	struct event_base *base;
	int rc;
	int one_job;
	const char *endpoint;
};

static long long num(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

static const char *str(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_string(v) ? json_string_value(v) : "-";
}

static void print_jobs(json_t *j)
{
	json_t *jobs = json_object_get(j, "jobs"), *job;
	size_t i;
	printf("%-32s %-11s %6s %6s %6s %9s\n", "JOB", "STATE", "ROUND",
	       "NODES", "WORLD", "RESTARTS");
	json_array_foreach(jobs, i, job)
	{
		printf("%-32s %-11s %6lld %6lld %6lld %4lld/%-4lld\n",
		       str(job, "job"), str(job, "state"), num(job, "round"),
		       num(job, "nnodes"), num(job, "world_size"),
		       num(job, "restart_count"), num(job, "max_restarts"));
	}
	if (json_array_size(jobs) == 0)
		printf("(no jobs)\n");
}

static void print_job(json_t *j)
{
	json_t *members = json_object_get(j, "members"), *m;
	json_t *waiting = json_object_get(j, "waiting");
	json_t *failures = json_object_get(j, "failures");
	size_t i;
	printf("job %s: %s, round %lld, restarts %lld/%lld, nodes %lld-%lld, "
	       "world size %lld, master %s:%lld\n",
	       str(j, "job"), str(j, "state"), num(j, "round"),
	       num(j, "restart_count"), num(j, "max_restarts"),
	       num(j, "min_nodes"), num(j, "max_nodes"), num(j, "world_size"),
	       str(j, "master_addr"), num(j, "master_port"));
	printf("%-5s %-32s %-20s %6s %8s %-10s %10s\n", "RANK", "NODE", "ADDR",
	       "NPROC", "RANKS", "STATUS", "SEEN(ms)");
	json_array_foreach(members, i, m)
	{
		char ranks[32];
		long long off = num(m, "rank_offset"), n = num(m, "nproc");
		snprintf(ranks, sizeof(ranks), "%lld-%lld", off, off + n - 1);
		printf("%-5lld %-32s %-20s %6lld %8s %-10s %10lld\n",
		       num(m, "node_rank"), str(m, "node_id"), str(m, "addr"),
		       n, ranks, str(m, "status"), num(m, "last_seen_ms_ago"));
	}
	if (json_array_size(waiting) > 0) {
		printf("waiting:");
		json_array_foreach(waiting, i, m)
		    printf(" %s", str(m, "node_id"));
		printf("\n");
	}
	if (json_array_size(failures) > 0) {
		printf("failures (first is the root cause):\n");
		json_array_foreach(failures, i, m)
		{
			char when[32];
			const char *msg = str(m, "message");
			const char *nl = strchr(msg, '\n');
			long long t = num(m, "time_ms");
			clock_format_wall(t > 0 ? (uint64_t)t : 0, when,
					  sizeof(when));
			printf(
			    "  %s round %lld node %s rank %lld exit %lld%s%s: "
			    "%.*s\n",
			    when, num(m, "round"), str(m, "node_id"),
			    num(m, "rank"), num(m, "exitcode"),
			    json_is_string(json_object_get(m, "signal")) ? " "
									 : "",
			    json_is_string(json_object_get(m, "signal"))
				? str(m, "signal")
				: "",
			    nl ? (int)(nl - msg) : (int)strlen(msg), msg);
		}
	}
}

static void on_reply(void *arg, const struct client_reply *r)
{
	struct status_ctx *s = arg;
	if (r->transport_failed) {
		fprintf(stderr,
			"dlaunch: cannot reach rendezvous at %s: %s (is "
			"dlaunch-rdzv running?)\n",
			s->endpoint, r->error);
		s->rc = 1;
	} else if (r->status != 200 || !r->json) {
		fprintf(stderr, "dlaunch: rendezvous at %s answered %ld: %s\n",
			s->endpoint, r->status,
			*r->error ? r->error : "not a JSON object");
		s->rc = 1;
	} else {
		if (s->one_job)
			print_job(r->json);
		else
			print_jobs(r->json);
		s->rc = 0;
	}
	event_base_loopexit(s->base, NULL);
}

int status_main(int argc, char **argv)
{
	const char *endpoint = getenv("PET_RDZV_ENDPOINT"), *job = NULL;
	const char *token_file = NULL, *ca = NULL;
	char err[512], path[512], *token = NULL;
	struct client *c = NULL;
	struct status_ctx s = {0};
	int i;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL;
		const char *eq = strchr(a, '=');
		char name[64];
		size_t len = eq ? (size_t)(eq - a) : strlen(a);
		if (len >= sizeof(name))
			len = sizeof(name) - 1;
		memcpy(name, a, len);
		name[len] = '\0';
		for (char *p = name; *p; p++)
			if (*p == '_')
				*p = '-';
		if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0) {
			printf(
			    "usage: dlaunch status --rdzv-endpoint HOST:PORT "
			    "[--rdzv-id ID] [--rdzv-token-file FILE] "
			    "[--rdzv-ca FILE]\n");
			return 0;
		}
		if (eq)
			v = eq + 1;
		else if (i + 1 < argc)
			v = argv[i + 1];
		if (!v) {
			fprintf(stderr,
				"dlaunch: error: status: option %s "
				"needs a value\n",
				name);
			return 2;
		}
		if (strcmp(name, "--rdzv-endpoint") == 0)
			endpoint = v;
		else if (strcmp(name, "--rdzv-id") == 0)
			job = v;
		else if (strcmp(name, "--rdzv-token-file") == 0)
			token_file = v;
		else if (strcmp(name, "--rdzv-ca") == 0)
			ca = v;
		else {
			fprintf(stderr,
				"dlaunch: error: status: unknown option '%s'\n",
				a);
			return 2;
		}
		if (!eq)
			i++;
	}
	if (!endpoint) {
		fprintf(stderr,
			"dlaunch: error: status needs --rdzv-endpoint\n");
		return 2;
	}
	if (job && (strlen(job) > 128 ||
		    strspn(job, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrs"
				"tuvwxyz0123456789._:-") != strlen(job) ||
		    !*job)) {
		fprintf(stderr, "dlaunch: error: status: bad --rdzv-id '%s'\n",
			job);
		return 2;
	}
	if (token_file) {
		size_t len;
		if (fs_read_file(token_file, 4096, &token, &len) != 0) {
			fprintf(stderr,
				"dlaunch: error: cannot read token file "
				"%s\n",
				token_file);
			return 2;
		}
		while (len && strchr("\r\n ", token[len - 1]))
			token[--len] = '\0';
	}
	s.base = event_base_new();
	s.endpoint = endpoint;
	s.rc = 1;
	s.one_job = job != NULL;
	if (!s.base || client_new(s.base, endpoint, token, ca, &c, err,
				  sizeof(err)) != 0) {
		fprintf(stderr, "dlaunch: error: %s\n",
			s.base ? err : "cannot create event loop");
		goto out;
	}
	if (job)
		snprintf(path, sizeof(path), "/v1/jobs/%s", job);
	else
		snprintf(path, sizeof(path), "/v1/jobs");
	if (!client_call(c, "GET", path, NULL, 10000, on_reply, &s))
		goto out;
	event_base_dispatch(s.base);
out:
	client_free(c);
	if (s.base)
		event_base_free(s.base);
	free(token);
	return s.rc;
}
