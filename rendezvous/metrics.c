/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.c - what GET /metrics exposes, in the Prometheus text format
 * with Prometheus's naming (base units, _total counters, _seconds): jobs
 * by state, members, rounds, restarts, heartbeats, evictions; per job its
 * state, round, members, spares, restarts and the age of its round; hang
 * diagnoses (triggers by kind, reports, stuck ranks); the journal (size,
 * compactions, write failures, writable); parked long polls; request
 * counts by endpoint and status and latency histograms by
 * endpoint.
 */
#include "metrics.h"

#include <inttypes.h>
#include <stdlib.h>

#include "dlaunch/error.h"

#define NSTATUS 600

static const double bucket_s[] = {0.0005, 0.001, 0.005, 0.01, 0.05, 0.1,
				  0.5,	  1,	 5,	10,   30,   60};
#define NBUCKETS (sizeof(bucket_s) / sizeof(bucket_s[0]))

struct rdzv_metrics {
	uint64_t requests[RDZV_EP_COUNT][NSTATUS];
	uint64_t buckets[RDZV_EP_COUNT][NBUCKETS];
	uint64_t count[RDZV_EP_COUNT];
	double sum_s[RDZV_EP_COUNT];
};

struct rdzv_metrics *rdzv_metrics_new(void)
{
	return calloc(1, sizeof(struct rdzv_metrics));
}

void rdzv_metrics_free(struct rdzv_metrics *m)
{
	free(m);
}

void rdzv_metrics_observe(struct rdzv_metrics *m, enum rdzv_endpoint ep,
			  int status, uint64_t duration_ns)
{
	double s = (double)duration_ns / 1e9;
	if ((unsigned)ep >= RDZV_EP_COUNT)
		ep = RDZV_EP_OTHER;
	if (status < 0 || status >= NSTATUS)
		status = 0;
	m->requests[ep][status]++;
	m->count[ep]++;
	m->sum_s[ep] += s;
	for (size_t b = 0; b < NBUCKETS; b++)
		if (s <= bucket_s[b])
			m->buckets[ep][b]++;
}

/* gauge/counter headers: HELP and TYPE lines */
static int head(struct buf *out, const char *name, const char *type,
		const char *help)
{
	return buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
			  type);
}

static int one(struct buf *out, const char *name, const char *type,
	       const char *help, uint64_t v)
{
	return head(out, name, type, help) |
	       buf_printf(out, "%s %" PRIu64 "\n", name, v);
}

/* render_state: the state machine's gauges and counters, the parked
 * polls and the journal. Returns non-zero when out is full. */
static int render_state(const struct rdzv_metrics_src *src, struct buf *out)
{
	uint64_t by_state[RDZV_JOB_NSTATES], members;
	struct rdzv_counters c;
	int rc = 0;

	rdzv_state_stats(src->st, by_state, &members, &c);
	rc |= head(out, "dlaunch_rdzv_jobs", "gauge",
		   "Jobs the server keeps, by state.");
	for (int s = 0; s < RDZV_JOB_NSTATES; s++)
		rc |= buf_printf(
		    out, "dlaunch_rdzv_jobs{state=\"%s\"} %" PRIu64 "\n",
		    rdzv_job_state_name((enum rdzv_job_state)s), by_state[s]);
	rc |= one(out, "dlaunch_rdzv_members", "gauge",
		  "Members of the rounds of the jobs that have not ended.",
		  members);
	rc |= one(out, "dlaunch_rdzv_rounds_total", "counter",
		  "Rounds formed (closed with their members).", c.rounds_total);
	rc |= one(out, "dlaunch_rdzv_restarts_total", "counter",
		  "Restarts charged to jobs for failures.", c.restarts_total);
	rc |= one(out, "dlaunch_rdzv_heartbeats_total", "counter",
		  "Heartbeats received.", c.heartbeats_total);
	rc |= one(out, "dlaunch_rdzv_evictions_total", "counter",
		  "Nodes evicted: silent past the heartbeat timeout.",
		  c.evictions_total);
	rc |= head(out, "dlaunch_rdzv_round_entries_total", "counter",
		   "Members entering a round, by how their workers did: "
		   "started (first round), in_place (kept and re-formed), "
		   "restarted (stopped and started again).");
	for (int i = RDZV_RECOVERY_STARTED; i < RDZV_RECOVERY_N; i++)
		rc |= buf_printf(out,
				 "dlaunch_rdzv_round_entries_total{how=\"%s\"} "
				 "%" PRIu64 "\n",
				 rdzv_recovery_name((enum rdzv_recovery)i),
				 c.recoveries_total[i]);
	rc |= head(out, "dlaunch_rdzv_hang_triggers_total", "counter",
		   "Hang diagnoses opened, by what set them off: dump (asked "
		   "for), progress-timeout, stall, exit.");
	for (int i = 0; i < RDZV_HANG_NKINDS; i++)
		rc |=
		    buf_printf(out,
			       "dlaunch_rdzv_hang_triggers_total{kind=\"%s\"} "
			       "%" PRIu64 "\n",
			       rdzv_hang_kind_name((enum rdzv_hang_kind)i),
			       c.hang_triggers_total[i]);
	rc |= one(out, "dlaunch_rdzv_hang_reports_total", "counter",
		  "Node reports stored for hang diagnoses.",
		  c.hang_reports_total);
	rc |= one(out, "dlaunch_rdzv_hang_stuck_ranks", "gauge",
		  "Ranks the latest hang analysis named as stuck.",
		  c.hang_stuck_ranks);
	rc |= head(out, "dlaunch_rdzv_long_polls_parked", "gauge",
		   "Long polls held open, by endpoint (join, watch, kv).");
	rc |= buf_printf(out,
			 "dlaunch_rdzv_long_polls_parked{endpoint=\"join\"} "
			 "%" PRIu64 "\n"
			 "dlaunch_rdzv_long_polls_parked{endpoint=\"watch\"} "
			 "%" PRIu64 "\n"
			 "dlaunch_rdzv_long_polls_parked{endpoint=\"kv\"} "
			 "%" PRIu64 "\n",
			 src->parked[RDZV_EP_JOIN], src->parked[RDZV_EP_WATCH],
			 src->parked[RDZV_EP_KV]);
	rc |= one(out, "dlaunch_rdzv_journal_bytes", "gauge",
		  "Size of the journal file (0 without --state-dir).",
		  rdzv_journal_bytes(src->journal));
	rc |= one(out, "dlaunch_rdzv_journal_compactions_total", "counter",
		  "Journal compactions into a snapshot.",
		  rdzv_journal_compactions(src->journal));
	rc |= one(out, "dlaunch_rdzv_journal_write_failures_total", "counter",
		  "Journal appends and rewrites that failed.",
		  rdzv_api_journal_failures(src->api));
	rc |= one(out, "dlaunch_rdzv_journal_writable", "gauge",
		  "1 when every change is journaled, 0 while one is not "
		  "(changes are refused with 503).",
		  (uint64_t)rdzv_api_durable(src->api));
	return rc;
}

static uint64_t js_round(const struct rdzv_job_stats *s)
{
	return s->round;
}
static uint64_t js_members(const struct rdzv_job_stats *s)
{
	return s->members;
}
static uint64_t js_waiting(const struct rdzv_job_stats *s)
{
	return s->waiting;
}
static uint64_t js_restarts(const struct rdzv_job_stats *s)
{
	return s->restart_count;
}
static uint64_t js_max_restarts(const struct rdzv_job_stats *s)
{
	return s->max_restarts;
}

/* The per-job gauges with one integer sample per job. */
static const struct {
	const char *name, *help;
	uint64_t (*get)(const struct rdzv_job_stats *s);
} job_gauges[] = {
    {"dlaunch_rdzv_job_round", "The job's current round.", js_round},
    {"dlaunch_rdzv_job_members", "Members of the job's round.", js_members},
    {"dlaunch_rdzv_job_waiting_nodes",
     "Nodes waiting for the job's next round (joiners and spares).",
     js_waiting},
    {"dlaunch_rdzv_job_restarts", "Restarts charged to the job.", js_restarts},
    {"dlaunch_rdzv_job_max_restarts",
     "The job's restart budget (max_restarts).", js_max_restarts},
};

/* render_jobs: each job's state, round, members, spares, restarts and the
 * time since its round changed. Job names are [A-Za-z0-9._:-]: nothing
 * to escape in a label. The label is rdzv_id, not job: Prometheus gives
 * every target a job label of its own. */
static int render_jobs(const struct rdzv_metrics_src *src, struct buf *out)
{
	struct rdzv_job_stats js;
	int rc = 0;

	rc |= head(out, "dlaunch_rdzv_job_state", "gauge",
		   "1 for the state each job is in, 0 for the others.");
	for (size_t i = 0; rdzv_job_stats_at(src->st, i, src->now_ms, &js) == 0;
	     i++)
		for (int s = 0; s < RDZV_JOB_NSTATES; s++)
			rc |= buf_printf(
			    out,
			    "dlaunch_rdzv_job_state{rdzv_id=\"%s\",state=\"%"
			    "s\"} "
			    "%d\n",
			    js.job, rdzv_job_state_name((enum rdzv_job_state)s),
			    js.state == (enum rdzv_job_state)s);
	for (size_t g = 0; g < sizeof(job_gauges) / sizeof(job_gauges[0]);
	     g++) {
		rc |=
		    head(out, job_gauges[g].name, "gauge", job_gauges[g].help);
		for (size_t i = 0;
		     rdzv_job_stats_at(src->st, i, src->now_ms, &js) == 0; i++)
			rc |= buf_printf(
			    out, "%s{rdzv_id=\"%s\"} %" PRIu64 "\n",
			    job_gauges[g].name, js.job, job_gauges[g].get(&js));
	}
	rc |= head(out, "dlaunch_rdzv_job_round_age_seconds", "gauge",
		   "Seconds since the job's round last changed (opened, "
		   "formed or ended).");
	for (size_t i = 0; rdzv_job_stats_at(src->st, i, src->now_ms, &js) == 0;
	     i++)
		rc |= buf_printf(
		    out,
		    "dlaunch_rdzv_job_round_age_seconds{rdzv_id=\"%s\"} "
		    "%.3f\n",
		    js.job, (double)js.since_change_ms / 1000.0);
	return rc;
}

/* render_requests: the requests answered, by endpoint and status. */
static int render_requests(const struct rdzv_metrics *m, struct buf *out)
{
	int rc = 0;

	rc |=
	    buf_append_str(out, "# HELP dlaunch_rdzv_requests_total Requests "
				"answered, by endpoint and status.\n"
				"# TYPE dlaunch_rdzv_requests_total counter\n");
	for (int e = 0; e < RDZV_EP_COUNT; e++)
		for (int s = 0; s < NSTATUS; s++)
			if (m->requests[e][s])
				rc |= buf_printf(
				    out,
				    "dlaunch_rdzv_requests_total{endpoint="
				    "\"%s\",code=\"%d\"} %" PRIu64 "\n",
				    rdzv_endpoint_name((enum rdzv_endpoint)e),
				    s, m->requests[e][s]);
	return rc;
}

/* render_durations: the latency histograms, by endpoint. */
static int render_durations(const struct rdzv_metrics *m, struct buf *out)
{
	int rc = 0;

	rc |= buf_append_str(
	    out, "# HELP dlaunch_rdzv_request_duration_seconds Time to "
		 "answer, by endpoint (long polls included).\n"
		 "# TYPE dlaunch_rdzv_request_duration_seconds histogram\n");
	for (int e = 0; e < RDZV_EP_COUNT; e++) {
		const char *name = rdzv_endpoint_name((enum rdzv_endpoint)e);
		if (!m->count[e])
			continue;
		for (size_t b = 0; b < NBUCKETS; b++)
			rc |= buf_printf(
			    out,
			    "dlaunch_rdzv_request_duration_seconds_bucket{"
			    "endpoint=\"%s\",le=\"%g\"} %" PRIu64 "\n",
			    name, bucket_s[b], m->buckets[e][b]);
		rc |= buf_printf(
		    out,
		    "dlaunch_rdzv_request_duration_seconds_bucket{endpoint="
		    "\"%s\",le=\"+Inf\"} %" PRIu64 "\n"
		    "dlaunch_rdzv_request_duration_seconds_sum{endpoint="
		    "\"%s\"} %.6f\n"
		    "dlaunch_rdzv_request_duration_seconds_count{endpoint="
		    "\"%s\"} %" PRIu64 "\n",
		    name, m->count[e], name, m->sum_s[e], name, m->count[e]);
	}
	return rc;
}

int rdzv_metrics_render(const struct rdzv_metrics *m,
			const struct rdzv_metrics_src *src, struct buf *out)
{
	int rc = render_state(src, out);
	rc |= render_jobs(src, out);
	rc |= render_requests(m, out);
	rc |= render_durations(m, out);
	return rc ? DL_ELIMIT : 0;
}
