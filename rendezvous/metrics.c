/*
 * metrics.c - what GET /metrics exposes, in the Prometheus text format:
 * jobs by state, members, rounds, restarts, heartbeats, evictions, request
 * counts by endpoint and status, request latency histograms by endpoint,
 * parked long polls and journal size.
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

/* render_state: the state machine's gauges and counters, the parked
 * polls and the journal. Returns non-zero when out is full. */
static int render_state(const struct rdzv_state *st,
			const struct rdzv_journal *jr, uint64_t pending_polls,
			struct buf *out)
{
	uint64_t by_state[RDZV_JOB_NSTATES], members;
	struct rdzv_counters c;
	int rc = 0;

	rdzv_state_stats(st, by_state, &members, &c);
	rc |= buf_append_str(out, "# HELP dlaunch_rdzv_jobs Jobs by state.\n"
				  "# TYPE dlaunch_rdzv_jobs gauge\n");
	for (int s = 0; s < RDZV_JOB_NSTATES; s++)
		rc |= buf_printf(
		    out, "dlaunch_rdzv_jobs{state=\"%s\"} %" PRIu64 "\n",
		    rdzv_job_state_name((enum rdzv_job_state)s), by_state[s]);
	rc |= buf_printf(
	    out,
	    "# HELP dlaunch_rdzv_members Members of the current rounds.\n"
	    "# TYPE dlaunch_rdzv_members gauge\n"
	    "dlaunch_rdzv_members %" PRIu64 "\n"
	    "# HELP dlaunch_rdzv_rounds_total Rounds closed.\n"
	    "# TYPE dlaunch_rdzv_rounds_total counter\n"
	    "dlaunch_rdzv_rounds_total %" PRIu64 "\n"
	    "# HELP dlaunch_rdzv_restarts_total Restarts charged.\n"
	    "# TYPE dlaunch_rdzv_restarts_total counter\n"
	    "dlaunch_rdzv_restarts_total %" PRIu64 "\n"
	    "# HELP dlaunch_rdzv_heartbeats_total Heartbeats received.\n"
	    "# TYPE dlaunch_rdzv_heartbeats_total counter\n"
	    "dlaunch_rdzv_heartbeats_total %" PRIu64 "\n"
	    "# HELP dlaunch_rdzv_evictions_total Nodes evicted for "
	    "silence.\n"
	    "# TYPE dlaunch_rdzv_evictions_total counter\n"
	    "dlaunch_rdzv_evictions_total %" PRIu64 "\n"
	    "# HELP dlaunch_rdzv_pending_polls Long polls parked.\n"
	    "# TYPE dlaunch_rdzv_pending_polls gauge\n"
	    "dlaunch_rdzv_pending_polls %" PRIu64 "\n"
	    "# HELP dlaunch_rdzv_journal_bytes Size of the journal.\n"
	    "# TYPE dlaunch_rdzv_journal_bytes gauge\n"
	    "dlaunch_rdzv_journal_bytes %" PRIu64 "\n"
	    "# HELP dlaunch_rdzv_journal_compactions_total Compactions.\n"
	    "# TYPE dlaunch_rdzv_journal_compactions_total counter\n"
	    "dlaunch_rdzv_journal_compactions_total %" PRIu64 "\n",
	    members, c.rounds_total, c.restarts_total, c.heartbeats_total,
	    c.evictions_total, pending_polls, rdzv_journal_bytes(jr),
	    rdzv_journal_compactions(jr));
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
			const struct rdzv_state *st,
			const struct rdzv_journal *jr, uint64_t pending_polls,
			struct buf *out)
{
	int rc = render_state(st, jr, pending_polls, out);
	rc |= render_requests(m, out);
	rc |= render_durations(m, out);
	return rc ? DL_ELIMIT : 0;
}
