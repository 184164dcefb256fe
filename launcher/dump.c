/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dump.c - `dlaunch dump`: the hang report of a live job, on demand
 * (docs/hangs.md). It opens a trigger of kind "dump" (dlaunch-rdzv's POST
 * /v1/jobs/{job}/dump; with etcd the job's hang/trigger key), which every
 * agent of the job hears within a second and answers with its node report
 * without stopping anything; then it reads the reports back until every
 * node of the round has sent one or --timeout, runs the analysis and
 * prints the text report (or, with --json, the reports, the analysis and
 * the text as one JSON object). Exit status 0 when every node reported,
 * 1 otherwise (what came is still printed), 2 for a usage error.
 */
#include <event2/event.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/agent_client.h"
#include "dlaunch/buf.h"
#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/fsutil.h"
#include "dlaunch/hang.h"
#include "launcher.h"
#include "dlaunch/opt.h"
#include "dlaunch/parse.h"
#include "etcd_options.h"
#include "rdzv_cli.h"

extern char **environ;

#define POLL_MS	   250
#define CALL_MS	   5000
#define TEXT_LIMIT (16 * 1024 * 1024)

struct dump_options {
	int help;
	int json;
	struct rdzv_cli r;
	const char *job;
	uint64_t timeout_ms;
};

struct dump_run {
	const struct dump_options *o;
	struct event_base *base;
	struct client *c;
	struct event *poll;
	char id[80];
	char path[600];
	uint64_t deadline;
	json_t *answer; /* the last GET /hang answer */
	int rc;
};

/* id_ok: a trigger id as docs/hangs.md has them, 1-64 of
 * [A-Za-z0-9._:-]; one that is not never reaches a URL */
static int id_ok(const char *id)
{
	size_t n = strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS"
			      "TUVWXYZ0123456789._:-");
	return n > 0 && n <= 64 && id[n] == '\0';
}

static void finish(struct dump_run *d, int rc)
{
	d->rc = rc;
	event_base_loopexit(d->base, NULL);
}

static void fetch(struct dump_run *d);

static void on_poll(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	fetch(arg);
}

static void on_hang(void *arg, const struct client_reply *r)
{
	struct dump_run *d = arg;
	struct timeval tv = {0, POLL_MS * 1000};
	if (r->status == 200 && r->json) {
		json_decref(d->answer);
		d->answer = json_incref(r->json);
		if (json_is_true(json_object_get(r->json, "complete"))) {
			finish(d, 0);
			return;
		}
	} else if (r->status == 404 || r->status == 410) {
		fprintf(stderr, "dlaunch: dump: trigger %s of job %s: %s\n",
			d->id, d->o->job, *r->error ? r->error : "gone");
		finish(d, 1);
		return;
	}
	if (clock_now_ms() >= d->deadline) {
		fprintf(stderr,
			"dlaunch: dump: not every node of job %s reported "
			"within %g s; printing what came\n",
			d->o->job, (double)d->o->timeout_ms / 1000);
		finish(d, 1);
		return;
	}
	evtimer_add(d->poll, &tv);
}

static void fetch(struct dump_run *d)
{
	if (!client_call(d->c, "GET", d->path, NULL, CALL_MS, on_hang, d))
		finish(d, 1);
}

static void on_open(void *arg, const struct client_reply *r)
{
	struct dump_run *d = arg;
	const char *id = NULL;
	if (r->transport_failed) {
		fprintf(stderr,
			"dlaunch: cannot reach rendezvous at %s: %s (is "
			"dlaunch-rdzv running?)\n",
			d->o->r.endpoint, r->error);
		finish(d, 1);
		return;
	}
	if (r->status != 200 || !r->json ||
	    !(id = json_string_value(json_object_get(r->json, "id"))) ||
	    !id_ok(id)) {
		fprintf(stderr,
			"dlaunch: dump: rendezvous at %s answered %ld: %s\n",
			d->o->r.endpoint, r->status,
			*r->error ? r->error : "no trigger id");
		finish(d, 1);
		return;
	}
	snprintf(d->id, sizeof(d->id), "%s", id);
	snprintf(d->path, sizeof(d->path), "/v1/jobs/%s/hang?id=%s", d->o->job,
		 d->id);
	fprintf(stderr, "dlaunch: dump: trigger %s opened for job %s\n", d->id,
		d->o->job);
	fetch(d);
}

/* print the answer ({"trigger", "complete", "reports", ...}): the
 * analysis made here, then its text or everything as JSON */
static void print_answer(const struct dump_run *d)
{
	json_t *reports = json_object_get(d->answer, "reports");
	json_t *analysis;
	struct buf text;
	if (!json_is_array(reports)) {
		fprintf(stderr, "dlaunch: dump: no report came\n");
		return;
	}
	analysis = dl_hang_analyse(reports, (int64_t)clock_wall_ms());
	buf_init(&text, TEXT_LIMIT);
	dl_hang_format_text(reports, analysis, &text);
	if (d->o->json) {
		json_t *all = json_pack(
		    "{s:O,s:O,s:O,s:O,s:s}", "trigger",
		    json_object_get(d->answer, "trigger"), "complete",
		    json_object_get(d->answer, "complete"), "reports", reports,
		    "analysis", analysis ? analysis : json_null(), "text",
		    buf_cstr(&text));
		char *s = all ? json_dumps(all, JSON_INDENT(1)) : NULL;
		if (s)
			printf("%s\n", s);
		free(s);
		json_decref(all);
	} else {
		fputs(buf_cstr(&text), stdout);
	}
	buf_release(&text);
	json_decref(analysis);
}

/* ------------------------------------------------------------ options */

#define DO(f) OPT_FIELD(struct dump_options, f)

static const struct opt_spec dump_specs[] = {
    {.name = "help",
     .short_name = 'h',
     .type = OPT_FLAG,
     .flags = OPT_STOP,
     DO(help),
     .help = "show this help and exit"},
    RDZV_CLI_SPECS(struct dump_options, r),
    {.name = "rdzv-id",
     .type = OPT_NAME,
     DO(job),
     .max = PARSE_NAME_MAX,
     .env = "PET_RDZV_ID",
     .metavar = "ID",
     .unset = "required",
     .help = "the job to dump"},
    {.name = "timeout",
     .type = OPT_DURATION,
     DO(timeout_ms),
     .min = 1,
     .max = 3600000,
     .metavar = "DURATION",
     .help = "how long to wait for every node's report"},
    {.name = "json",
     .type = OPT_FLAG,
     DO(json),
     .help = "print the trigger, the reports, the analysis and the text "
	     "as one JSON object"},
    {.name = NULL},
};

static const struct opt_table dump_table = {
    .prog = "dlaunch dump",
    .usage = "usage: dlaunch dump --rdzv-endpoint HOST:PORT --rdzv-id ID "
	     "[--json] [--timeout DURATION]\n"
	     "                    [--rdzv-token-file FILE] [--rdzv-ca FILE]\n"
	     "       dlaunch dump --rdzv-backend etcd --rdzv-endpoint "
	     "HOST[:PORT],... --rdzv-id ID\n"
	     "                    [--rdzv-conf K=V,...] [--json]\n"
	     "\n"
	     "Collects every rank's stacks, state and collective flight "
	     "record from a\nrunning job, without stopping it, and prints "
	     "the hang report (docs/hangs.md).\n\n"
	     "Options ('_' may replace '-'):\n",
    .specs = dump_specs,
};

static int dump_parse(int argc, char **argv, struct dump_options *o)
{
	char err[512];
	int next;
	memset(o, 0, sizeof(*o));
	o->timeout_ms = 20000;
	if (opt_parse(&dump_table, o, argc, argv, environ, &next, err,
		      sizeof(err)) != 0) {
		fprintf(stderr, "dlaunch: error: dump: %s\n", err);
		return 2;
	}
	if (o->help) {
		struct dump_options defaults = {.timeout_ms = 20000};
		opt_usage(&dump_table, &defaults, stdout);
		return 0;
	}
	if (next < argc) {
		fprintf(stderr,
			"dlaunch: error: dump: unexpected argument '%s'\n",
			argv[next]);
		return 2;
	}
	if (!o->r.endpoint || !o->job) {
		fprintf(stderr, "dlaunch: error: dump needs --rdzv-endpoint "
				"and --rdzv-id\n");
		return 2;
	}
	return -1;
}

static int dump_etcd(const struct dump_options *o, struct dump_run *d)
{
	struct launcher_options *lo = calloc(1, sizeof(*lo));
	char err[2048];
	int rc = 2;
	if (!lo) {
		fprintf(stderr, "dlaunch: error: out of memory\n");
		return 1;
	}
	if (rdzv_cli_etcd_config(&o->r, lo, err, sizeof(err)) != 0) {
		fprintf(stderr, "dlaunch: error: dump: %s\n", err);
		goto out;
	}
	rc = agent_etcd_dump(&lo->cfg, o->job, o->timeout_ms, &d->answer, err,
			     sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "dlaunch: dump: %s\n", err);
		rc = 1;
		if (!d->answer)
			goto out;
	}
	if (rc > 0)
		fprintf(stderr,
			"dlaunch: dump: not every node of job %s reported "
			"within %g s; printing what came\n",
			o->job, (double)o->timeout_ms / 1000);
	print_answer(d);
	rc = rc ? 1 : 0;
out:
	free(lo);
	return rc;
}

int dump_main(int argc, char **argv)
{
	struct dump_options o;
	struct dump_run d;
	char path[512];
	json_t *body = NULL;
	int rc = dump_parse(argc, argv, &o), etcd;

	if (rc >= 0)
		return rc;
	memset(&d, 0, sizeof(d));
	d.o = &o;
	d.rc = 1;
	etcd = rdzv_cli_is_etcd(&o.r, "dump");
	if (etcd < 0)
		return 2;
	if (etcd) {
		rc = dump_etcd(&o, &d);
		json_decref(d.answer);
		return rc;
	}
	d.deadline = clock_now_ms() + o.timeout_ms;
	rc = rdzv_cli_client(&o.r, &d.base, &d.c);
	if (rc) {
		d.rc = rc;
		goto out;
	}
	d.poll = evtimer_new(d.base, on_poll, &d);
	body = json_pack("{s:s,s:s}", "kind", "dump", "by", "cli");
	snprintf(path, sizeof(path), "/v1/jobs/%s/dump", o.job);
	if (!d.poll || !body ||
	    !client_call(d.c, "POST", path, body, CALL_MS, on_open, &d))
		goto out;
	event_base_dispatch(d.base);
	if (d.answer)
		print_answer(&d);
out:
	json_decref(body);
	json_decref(d.answer);
	if (d.poll)
		event_free(d.poll);
	rdzv_cli_client_free(d.base, d.c);
	return d.rc;
}
