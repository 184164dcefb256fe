/* SPDX-License-Identifier: Apache-2.0 */
/*
 * status.c - `dlaunch status`: a readable table of the rendezvous' jobs,
 * or of one job's members and failures, from GET /v1/jobs[/{job}]. Its
 * options are a table for the shared engine (dlaunch/opt.h); the job name
 * is checked with the server's rule and the token read by fs_read_token,
 * as everywhere else.
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
#include "launcher.h"
#include "dlaunch/opt.h"
#include "dlaunch/parse.h"
#include "etcd_options.h"
#include "rdzv_cli.h"

extern char **environ;

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

/* print_hang: the job's last hang diagnosis ("hang" of the job's detail,
 * docs/http-api.md), where there is one */
static void print_hang(json_t *j)
{
	json_t *h = json_object_get(j, "hang");
	json_t *t = json_object_get(h, "trigger");
	json_t *an = json_object_get(h, "analysis");
	char when[32];
	long long tm = num(t, "time_ms");
	if (!json_is_object(t))
		return;
	clock_format_wall(tm > 0 ? (uint64_t)tm : 0, when, sizeof(when));
	printf("last hang diagnosis: trigger %s (%s by %s) at %s\n",
	       str(t, "id"), str(t, "kind"), str(t, "by"), when);
	if (json_is_object(an))
		printf("  verdict %s: %s\n", str(an, "verdict"),
		       str(an, "reason"));
	else
		printf("  (no analysis yet)\n");
}

static void print_job(json_t *j)
{
	json_t *members = json_object_get(j, "members"), *m;
	json_t *waiting = json_object_get(j, "waiting");
	json_t *failures = json_object_get(j, "failures");
	json_t *runs = json_object_get(j, "runs");
	size_t i;
	printf("job %s: %s, round %lld, restarts %lld/%lld, nodes %lld-%lld, "
	       "world size %lld, master %s:%lld\n",
	       str(j, "job"), str(j, "state"), num(j, "round"),
	       num(j, "restart_count"), num(j, "max_restarts"),
	       num(j, "min_nodes"), num(j, "max_nodes"), num(j, "world_size"),
	       str(j, "master_addr"), num(j, "master_port"));
	/* a preempted job: the one step every rank stops after */
	if (json_is_integer(json_object_get(j, "preempt_step")))
		printf("preempted: every rank stops after step %lld\n",
		       num(j, "preempt_step"));
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
	/* how each member's workers entered the round, where it said */
	json_array_foreach(members, i, m)
	{
		json_t *rec = json_object_get(m, "recovery");
		if (!json_is_object(rec))
			continue;
		printf("entered: %s %s (%s)\n", str(m, "node_id"),
		       str(rec, "how"), str(rec, "why"));
	}
	if (json_array_size(waiting) > 0) {
		printf("waiting:");
		json_array_foreach(waiting, i, m)
		    printf(" %s", str(m, "node_id"));
		printf("\n");
	}
	print_hang(j);
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
	/* a job id run again (docs/http-api.md, "Ended jobs"): the runs
	 * that ended before this one */
	if (json_array_size(runs) > 0) {
		printf("run %lld; earlier runs:", num(j, "run"));
		json_array_foreach(runs, i, m)
		{
			printf(" %lld %s (round %lld, restarts %lld)%s",
			       num(m, "run"), str(m, "state"), num(m, "round"),
			       num(m, "restart_count"),
			       i + 1 < json_array_size(runs) ? "," : "");
		}
		printf("\n");
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

struct status_options {
	int help;
	struct rdzv_cli r;
	const char *job;
};

#define SO(f) OPT_FIELD(struct status_options, f)

static const struct opt_spec status_specs[] = {
    {.name = "help",
     .short_name = 'h',
     .type = OPT_FLAG,
     .flags = OPT_STOP,
     SO(help),
     .help = "show this help and exit"},
    RDZV_CLI_SPECS(struct status_options, r),
    {.name = "rdzv-id",
     .type = OPT_NAME,
     SO(job),
     .max = PARSE_NAME_MAX,
     .metavar = "ID",
     .unset = "all jobs",
     .help = "show this job's members and failures"},
    {.name = NULL},
};

static const struct opt_table status_table = {
    .prog = "dlaunch status",
    .usage = "usage: dlaunch status --rdzv-endpoint HOST:PORT [--rdzv-id ID] "
	     "[--rdzv-token-file FILE] [--rdzv-ca FILE]\n"
	     "       dlaunch status --rdzv-backend etcd --rdzv-endpoint "
	     "HOST[:PORT],... [--rdzv-id ID]\n"
	     "                      [--rdzv-conf K=V,...]\n"
	     "\n"
	     "Shows the rendezvous' jobs, or one job's members and failures "
	     "(the first\nis the root cause).\n\n"
	     "Options ('_' may replace '-'):\n",
    .specs = status_specs,
};

/* status_parse reads the command line; returns -1 to go on, else the exit
 * status. */
static int status_parse(int argc, char **argv, struct status_options *o)
{
	char err[512];
	int next;
	memset(o, 0, sizeof(*o));
	if (opt_parse(&status_table, o, argc, argv, environ, &next, err,
		      sizeof(err)) != 0) {
		fprintf(stderr, "dlaunch: error: status: %s\n", err);
		return 2;
	}
	if (o->help) {
		struct status_options defaults = {0};
		opt_usage(&status_table, &defaults, stdout);
		return 0;
	}
	if (next < argc) {
		fprintf(stderr,
			"dlaunch: error: status: unexpected argument '%s'\n",
			argv[next]);
		return 2;
	}
	if (!o->r.endpoint) {
		fprintf(stderr,
			"dlaunch: error: status needs --rdzv-endpoint\n");
		return 2;
	}
	return -1;
}

static int status_etcd(const struct status_options *o)
{
	struct launcher_options *lo = calloc(1, sizeof(*lo));
	char err[2048];
	json_t *j = NULL;
	int rc = 2;
	if (!lo) {
		fprintf(stderr, "dlaunch: error: out of memory\n");
		return 1;
	}
	if (rdzv_cli_etcd_config(&o->r, lo, err, sizeof(err)) != 0) {
		fprintf(stderr, "dlaunch: error: status: %s\n", err);
		goto out;
	}
	rc = 1;
	if (agent_etcd_status(&lo->cfg, o->job, &j, err, sizeof(err)) != 0) {
		fprintf(stderr, "dlaunch: %s\n", err);
		goto out;
	}
	if (o->job)
		print_job(j);
	else
		print_jobs(j);
	rc = 0;
out:
	json_decref(j);
	free(lo);
	return rc;
}

int status_main(int argc, char **argv)
{
	struct status_options o;
	char path[512];
	struct client *c = NULL;
	struct status_ctx s = {0};
	int rc = status_parse(argc, argv, &o), etcd;

	if (rc >= 0)
		return rc;
	etcd = rdzv_cli_is_etcd(&o.r, "status");
	if (etcd)
		return etcd > 0 ? status_etcd(&o) : 2;
	s.endpoint = o.r.endpoint;
	s.rc = 1;
	s.one_job = o.job != NULL;
	rc = rdzv_cli_client(&o.r, &s.base, &c);
	if (rc) {
		s.rc = rc;
		goto out;
	}
	if (o.job)
		snprintf(path, sizeof(path), "/v1/jobs/%s", o.job);
	else
		snprintf(path, sizeof(path), "/v1/jobs");
	if (!client_call(c, "GET", path, NULL, 10000, on_reply, &s))
		goto out;
	event_base_dispatch(s.base);
out:
	rdzv_cli_client_free(s.base, c);
	return s.rc;
}
