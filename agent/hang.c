/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hang.c - a hang diagnosis from trigger to verdict, on this node
 * (docs/hangs.md).
 *
 * A diagnosis goes through these phases, one at a time per agent:
 *
 *   IDLE --hang_diagnose--> OPENING (the backend opens a job-wide
 *        trigger: dlaunch-rdzv's POST /dump, etcd's hang/trigger key;
 *        static mode makes a local one) --opened--> COLLECTING
 *   IDLE --heard (another node's or `dlaunch dump`'s trigger)--> COLLECTING
 *   COLLECTING (hang_collect.c) --> POSTING (this node's report to the
 *        backend) --> GATHERING (every node's reports, polled until
 *        complete or HANG_GATHER_MS) --> the analysis --> IDLE
 *
 * Every phase is bounded: an open that fails or takes over OPEN_MS falls
 * back to a local trigger, a post or a fetch that fails or runs past the
 * gathering deadline ends in the analysis of what is there. The analysis
 * (include/dlaunch/hang.h) is printed as a block on stderr and written to
 * LOG_DIR/hang-report.json and hang-report.txt. A diagnosis started by
 * --progress-timeout or a stall then posts its failures (each message
 * followed by the verdict) to the round loop: the kill and restart of
 * before, later by the diagnosis' few seconds.
 */
#include <event2/event.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/buf.h"
#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/fsutil.h"
#include "dlaunch/hang.h"
#include "dlaunch/log.h"
#include "dlaunch/parse.h"
#include "hang.h"
#include "internal.h"

#define OPEN_MS	       2000 /* the backend's answer to an open */
#define FETCH_EVERY_MS 250
#define SEEN_IDS       8
#define TEXT_MAX       (4 * 1024 * 1024)

enum hang_phase {
	HP_IDLE,
	HP_OPENING,
	HP_COLLECTING,
	HP_POSTING,
	HP_GATHERING
};

struct agent_hang {
	struct agent *a;
	enum hang_phase phase;
	json_t *trigger; /* the one being diagnosed */
	char id[HANG_ID_MAX + 1];
	char seen[SEEN_IDS][HANG_ID_MAX + 1]; /* diagnosed already */
	int seen_next;
	unsigned n_local;
	struct hang_collect *col;
	json_t *own; /* this node's report */
	char kind[32];
	json_t *failures; /* posted when it is over (progress, stall) */
	uint64_t failures_round;
	struct event *timer;
	void (*on_timer)(struct agent_hang *h);
	uint64_t deadline; /* of the phase */
	char last_reason[1024];
	uint64_t round;	     /* the round collected in, + 1 */
	uint64_t hung_round; /* the last round with a hang's verdict, + 1 */
};

static struct agent_hang *H(const struct agent *a)
{
	return a->hang;
}

static struct agent_rdzv *backend(struct agent_hang *h)
{
	return h->a->rdzv;
}

static void after(struct agent_hang *h, uint64_t ms,
		  void (*fn)(struct agent_hang *))
{
	struct timeval tv = {(time_t)(ms / 1000),
			     (suseconds_t)(ms % 1000) * 1000};
	h->on_timer = fn;
	evtimer_add(h->timer, &tv);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct agent_hang *h = arg;
	void (*fn)(struct agent_hang *) = h->on_timer;
	(void)fd;
	(void)what;
	h->on_timer = NULL;
	if (fn)
		fn(h);
}

static int seen(const struct agent_hang *h, const char *id)
{
	for (int i = 0; i < SEEN_IDS; i++)
		if (strcmp(h->seen[i], id) == 0)
			return 1;
	return 0;
}

/* ------------------------------------------------------------ verdict */

static void print_verdict(struct agent_hang *h, json_t *analysis,
			  const char *txt_path, int n_reports)
{
	struct agent *a = h->a;
	const char *verdict =
	    json_string_value(json_object_get(analysis, "verdict"));
	const char *reason =
	    json_string_value(json_object_get(analysis, "reason"));
	const char *by = json_string_value(json_object_get(h->trigger, "by"));
	const char *kind =
	    json_string_value(json_object_get(h->trigger, "kind"));
	json_t *stuck = json_object_get(analysis, "stuck");
	json_t *missing = json_object_get(analysis, "missing_nodes");
	char ranks[256] = "";
	size_t k = 0, i;
	json_t *v;
	FILE *fp = stderr;
	json_array_foreach(stuck, i, v)
	{
		if (k + 16 >= sizeof(ranks))
			break;
		k += (size_t)snprintf(ranks + k, sizeof(ranks) - k, "%s%lld",
				      k ? "," : "",
				      (long long)json_integer_value(v));
	}
	snprintf(h->last_reason, sizeof(h->last_reason), "%s",
		 reason ? reason : "");
	fprintf(fp,
		"============================================================"
		"\n");
	fprintf(fp,
		"dlaunch: hang diagnosis of job %s (trigger %s: %s by %s)\n",
		a->cfg.run_id, h->id, kind ? kind : "?", by ? by : "?");
	fprintf(fp, "  %-10s: %s\n", "verdict", verdict ? verdict : "?");
	if (*ranks)
		fprintf(fp, "  %-10s: %s\n", "stuck", ranks);
	fprintf(fp, "  %-10s: %s\n", "reason", reason ? reason : "");
	fprintf(fp, "  %-10s: %d node(s)%s\n", "reports", n_reports,
		json_array_size(missing) ? ", some missing" : "");
	if (txt_path)
		fprintf(fp, "  %-10s: %s\n", "details", txt_path);
	fprintf(fp,
		"============================================================"
		"\n");
	fflush(fp);
}

/* write_files: LOG_DIR/hang-report.json and .txt; path of the text
 * version into txt (or "") */
static void write_files(struct agent_hang *h, json_t *reports, json_t *analysis,
			int complete, const char *text, char *txt,
			size_t txt_size)
{
	struct agent *a = h->a;
	char path[PATH_MAX + 32];
	json_t *all = json_object();
	char *s;
	txt[0] = '\0';
	json_object_set(all, "trigger", h->trigger);
	json_object_set_new(all, "complete", json_boolean(complete));
	json_object_set(all, "analysis", analysis);
	json_object_set(all, "reports", reports);
	s = json_dumps(all, JSON_INDENT(1));
	json_decref(all);
	snprintf(path, sizeof(path), "%s/hang-report.json", a->log_dir);
	if (!s || fs_write_file_atomic(path, s, strlen(s), 0644) != 0)
		log_warn("cannot write %s", path);
	free(s);
	snprintf(path, sizeof(path), "%s/hang-report.txt", a->log_dir);
	if (fs_write_file_atomic(path, text, strlen(text), 0644) != 0) {
		log_warn("cannot write %s", path);
		return;
	}
	snprintf(txt, txt_size, "%s", path);
	a->hang_kept = 1; /* a temporary log directory stays for it */
}

/* fail_with_verdict posts the failures that waited for the diagnosis,
 * their messages followed by the verdict; only to the round they were
 * found in, and only while it runs */
static void fail_with_verdict(struct agent_hang *h)
{
	struct agent *a = h->a;
	json_t *f = h->failures, *v;
	struct agent_event ev;
	size_t i;
	h->failures = NULL;
	if (!f)
		return;
	if (a->fsm.state != AGENT_RUNNING ||
	    a->fsm.r.round != h->failures_round) {
		json_decref(f);
		return;
	}
	json_array_foreach(f, i, v)
	{
		const char *m =
		    json_string_value(json_object_get(v, "message"));
		struct buf b;
		if (!h->last_reason[0])
			break;
		buf_init(&b, 8192);
		buf_printf(&b, "%s\nhang diagnosis: %s", m ? m : "",
			   h->last_reason);
		json_object_set_new(v, "message", json_string(buf_cstr(&b)));
		buf_release(&b);
	}
	memset(&ev, 0, sizeof(ev));
	ev.kind = AGENT_EV_WORKER_FAILED;
	ev.json = f;
	agent_fsm_post(&a->fsm, &ev);
}

/* kill_after_verdict: the verdict of a hang (any trigger but a dump) is
 * out, so this round's workers are stopped with SIGKILL from now on
 * (hang_round_hung); a stop already under way (the job ended, or the
 * round, while this node was still collecting) is made a SIGKILL now:
 * ranks stuck in a collective never reach the step boundary a SIGTERM
 * waits for, and the stacks are taken */
static void kill_after_verdict(struct agent_hang *h)
{
	struct agent *a = h->a;
	const char *kind =
	    json_string_value(json_object_get(h->trigger, "kind"));
	if (!kind || strcmp(kind, "dump") == 0 ||
	    h->round != a->fsm.r.round + 1)
		return;
	h->hung_round = h->round;
	if (a->n_live > 0 && a->kill_timer &&
	    evtimer_pending(a->kill_timer, NULL)) {
		log_info("hang diagnosis %s is done: killing this node's %d "
			 "worker(s) being stopped (SIGKILL; a rank stuck in "
			 "a collective never reaches a graceful end)",
			 h->id, a->n_live);
		workers_kill_all(a);
	}
}

/* keep: the backend keeps the verdict for `dlaunch status`, in the form
 * dlaunch-rdzv's job detail gives it ("hang", docs/http-api.md) */
static void keep(struct agent_hang *h, json_t *reports, json_t *analysis,
		 int complete)
{
	json_t *summary;
	if (!analysis || !backend(h)->ops->hang_keep)
		return;
	summary = json_pack(
	    "{s:O, s:b, s:I, s:I, s:O}", "trigger", h->trigger, "complete",
	    complete, "reported", (json_int_t)json_array_size(reports), "asked",
	    (json_int_t)h->a->fsm.r.nnodes, "analysis", analysis);
	if (summary)
		backend(h)->ops->hang_keep(backend(h), summary);
	json_decref(summary);
}

static void finish(struct agent_hang *h, json_t *reports, int complete)
{
	struct buf text;
	char txt[PATH_MAX + 32];
	json_t *analysis;
	evtimer_del(h->timer);
	h->on_timer = NULL;
	if (backend(h)->ops->hang_cancel)
		backend(h)->ops->hang_cancel(backend(h));
	analysis = dl_hang_analyse(reports, (int64_t)clock_wall_ms());
	buf_init(&text, TEXT_MAX);
	if (analysis)
		dl_hang_format_text(reports, analysis, &text);
	write_files(h, reports, analysis, complete, buf_cstr(&text), txt,
		    sizeof(txt));
	buf_release(&text);
	keep(h, reports, analysis, complete);
	if (analysis)
		print_verdict(h, analysis, txt[0] ? txt : NULL,
			      (int)json_array_size(reports));
	log_info("job=%s event=hang_diagnosed trigger=%s verdict=%s "
		 "complete=%d",
		 h->a->cfg.run_id, h->id,
		 analysis
		     ? json_string_value(json_object_get(analysis, "verdict"))
		     : "?",
		 complete);
	json_decref(analysis);
	json_decref(h->own);
	h->own = NULL;
	kill_after_verdict(h);
	json_decref(h->trigger);
	h->trigger = NULL;
	h->phase = HP_IDLE;
	fail_with_verdict(h);
	if (h->a->exit_after_hang)
		event_base_loopexit(h->a->base, NULL);
}

/* finish_own: the analysis of this node's report alone */
static void finish_own(struct agent_hang *h)
{
	json_t *reports = json_array();
	if (h->own)
		json_array_append(reports, h->own);
	finish(h, reports, backend(h)->ops->hang_fetch == NULL);
	json_decref(reports);
}

/* ----------------------------------------------------------- gathering */

static void fetch(struct agent_hang *h)
{
	if (h->phase != HP_GATHERING)
		return;
	if (clock_now_ms() >= h->deadline) {
		log_warn("hang diagnosis %s: not every node's report within "
			 "%d ms; analysing what this node has",
			 h->id, HANG_GATHER_MS);
		finish_own(h);
		return;
	}
	backend(h)->ops->hang_fetch(backend(h), h->id);
}

static void on_fetched(void *ctx, json_t *answer)
{
	struct agent_hang *h = ctx;
	json_t *reports = json_object_get(answer, "reports");
	int complete = json_is_true(json_object_get(answer, "complete"));
	if (h->phase != HP_GATHERING)
		return;
	if (json_is_array(reports) &&
	    (complete || clock_now_ms() + FETCH_EVERY_MS >= h->deadline)) {
		/* our own report may be newer than what the store holds */
		finish(h, reports, complete);
		return;
	}
	after(h, FETCH_EVERY_MS, fetch);
}

static void on_posted(void *ctx, int ok)
{
	struct agent_hang *h = ctx;
	if (h->phase != HP_POSTING)
		return;
	if (!ok) {
		log_warn("hang diagnosis %s: this node's report could not be "
			 "stored; analysing this node's alone",
			 h->id);
		finish_own(h);
		return;
	}
	h->phase = HP_GATHERING;
	fetch(h);
}

static void post_late(struct agent_hang *h)
{
	if (h->phase == HP_POSTING || h->phase == HP_GATHERING) {
		log_warn("hang diagnosis %s: the rendezvous did not answer "
			 "within %d ms; analysing this node's report alone",
			 h->id, HANG_GATHER_MS);
		finish_own(h);
	}
}

static void free_collect(struct agent_hang *h)
{
	hang_collect_free(h->col);
	h->col = NULL;
	if (backend(h)->ops->hang_post) {
		h->phase = HP_POSTING;
		h->deadline = clock_now_ms() + HANG_GATHER_MS;
		after(h, HANG_GATHER_MS, post_late);
		backend(h)->ops->hang_post(backend(h), h->own);
		return;
	}
	finish_own(h);
}

static void on_collected(struct agent *a, json_t *report)
{
	struct agent_hang *h = H(a);
	h->own = report;
	/* the collection is freed out of its own callback */
	after(h, 0, free_collect);
}

/* ---------------------------------------------------------- triggering */

static void collect(struct agent_hang *h, json_t *trigger)
{
	const char *id = json_string_value(json_object_get(trigger, "id"));
	json_decref(h->trigger);
	h->trigger = json_deep_copy(trigger);
	snprintf(h->id, sizeof(h->id), "%s", id);
	snprintf(h->seen[h->seen_next], sizeof(h->seen[0]), "%s", id);
	h->seen_next = (h->seen_next + 1) % SEEN_IDS;
	evtimer_del(h->timer);
	h->phase = HP_COLLECTING;
	h->round = h->a->fsm.r.round + 1;
	log_info("hang diagnosis %s (%s by %s): collecting the stacks of this "
		 "node's %d worker(s)",
		 id, json_string_value(json_object_get(trigger, "kind")),
		 json_string_value(json_object_get(trigger, "by")),
		 h->a->n_workers);
	h->col = hang_collect_start(h->a, h->trigger, on_collected);
	if (!h->col) {
		log_warn("hang diagnosis %s: out of memory", id);
		h->phase = HP_IDLE;
		json_decref(h->failures);
		h->failures = NULL;
		if (h->a->exit_after_hang)
			event_base_loopexit(h->a->base, NULL);
	}
}

/* local_trigger: a trigger of this node's own (static mode, or the
 * backend could not open one) */
static void local_trigger(struct agent_hang *h)
{
	char id[HANG_ID_MAX + 1];
	json_t *t;
	/* the node's id may be long: its first 32 bytes do */
	snprintf(id, sizeof(id), "%.32s-%llu-%u", h->a->node_id,
		 (unsigned long long)clock_wall_ms(), ++h->n_local);
	parse_name_sanitize(id);
	if (!hang_id_valid(id))
		snprintf(id, sizeof(id), "local-%llu-%u",
			 (unsigned long long)clock_wall_ms(), h->n_local);
	t = json_pack("{s:s,s:s,s:s,s:I}", "id", id, "kind", h->kind, "by",
		      h->a->node_id, "time_ms", (json_int_t)clock_wall_ms());
	collect(h, t);
	json_decref(t);
}

static int trigger_valid(json_t *t)
{
	return json_is_object(t) &&
	       hang_id_valid(json_string_value(json_object_get(t, "id"))) &&
	       json_is_string(json_object_get(t, "kind"));
}

static void on_opened(void *ctx, json_t *trigger)
{
	struct agent_hang *h = ctx;
	if (h->phase != HP_OPENING)
		return;
	if (!trigger_valid(trigger)) {
		log_warn("hang diagnosis: the rendezvous did not open a "
			 "trigger; this node collects and analyses alone");
		local_trigger(h);
		return;
	}
	collect(h, trigger);
}

static void open_late(struct agent_hang *h)
{
	if (h->phase != HP_OPENING)
		return;
	if (backend(h)->ops->hang_cancel)
		backend(h)->ops->hang_cancel(backend(h));
	on_opened(h, NULL);
}

static void on_heard(void *ctx, json_t *trigger)
{
	struct agent_hang *h = ctx;
	const char *id;
	if (!trigger_valid(trigger))
		return;
	id = json_string_value(json_object_get(trigger, "id"));
	if (seen(h, id))
		return;
	if (h->phase == HP_OPENING) {
		/* ours, heard before the open's answer, or another node's
		 * opened first: the same diagnosis either way */
		if (backend(h)->ops->hang_cancel)
			backend(h)->ops->hang_cancel(backend(h));
		collect(h, trigger);
		return;
	}
	if (h->phase != HP_IDLE) {
		log_info("hang diagnosis %s under way: trigger %s ignored",
			 h->id, id);
		return;
	}
	collect(h, trigger);
}

void hang_diagnose(struct agent *a, const char *kind, json_t *failures)
{
	struct agent_hang *h = H(a);
	if (!h) {
		json_decref(failures);
		return;
	}
	if (failures) {
		if (h->failures) {
			json_array_extend(h->failures, failures);
			json_decref(failures);
		} else {
			h->failures = failures;
			h->failures_round = a->fsm.r.round;
		}
	}
	if (h->phase != HP_IDLE)
		return; /* its end posts the failures */
	if (hang_round_hung(a)) {
		/* this node printed the verdict of this round's hang already
		 * (another node's trigger, heard first): its own finding of
		 * the same hang a moment later is no new one. A second
		 * diagnosis would collect from workers that are being
		 * killed and name them as gone; the failures go with the
		 * verdict there is. */
		log_info("%s on this node: round %llu's hang has its verdict "
			 "already; reporting the failure without a new "
			 "diagnosis",
			 kind, (unsigned long long)a->fsm.r.round);
		fail_with_verdict(h);
		return;
	}
	snprintf(h->kind, sizeof(h->kind), "%s", kind);
	if (!a->rdzv->ops->hang_open) {
		local_trigger(h);
		return;
	}
	h->phase = HP_OPENING;
	after(h, OPEN_MS, open_late);
	a->rdzv->ops->hang_open(a->rdzv, kind);
}

void hang_on_trigger(struct agent *a, json_t *trigger)
{
	if (H(a))
		on_heard(H(a), trigger);
}

int hang_busy(const struct agent *a)
{
	return H(a) && H(a)->phase != HP_IDLE;
}

int hang_failing(const struct agent *a)
{
	return H(a) && H(a)->failures != NULL;
}

int hang_round_hung(const struct agent *a)
{
	return H(a) && H(a)->hung_round != 0 &&
	       H(a)->hung_round == a->fsm.r.round + 1;
}

const char *hang_last_reason(const struct agent *a)
{
	return H(a) && H(a)->last_reason[0] ? H(a)->last_reason : NULL;
}

int hang_reaped(struct agent *a, pid_t pid, int status)
{
	return H(a) && hang_collect_reaped(H(a)->col, pid, status);
}

int hang_owns(const struct agent *a, pid_t pid)
{
	return H(a) && hang_collect_owns(H(a)->col, pid);
}

void hang_dumped(struct agent_worker *w, const char *id)
{
	if (H(w->a))
		hang_collect_dumped(H(w->a)->col, w, id);
}

int hang_new(struct agent *a)
{
	struct agent_hang *h = calloc(1, sizeof(*h));
	if (!h)
		return DL_ENOMEM;
	h->a = a;
	h->timer = evtimer_new(a->base, on_timer, h);
	if (!h->timer) {
		free(h);
		return DL_ENOMEM;
	}
	a->hang = h;
	a->rdzv->hang.opened = on_opened;
	a->rdzv->hang.heard = on_heard;
	a->rdzv->hang.posted = on_posted;
	a->rdzv->hang.fetched = on_fetched;
	a->rdzv->hang.ctx = h;
	return 0;
}

void hang_free(struct agent *a)
{
	struct agent_hang *h = H(a);
	if (!h)
		return;
	hang_collect_free(h->col);
	if (h->timer)
		event_free(h->timer);
	json_decref(h->trigger);
	json_decref(h->own);
	json_decref(h->failures);
	free(h);
	a->hang = NULL;
}
