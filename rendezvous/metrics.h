/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.h - request counters and latency histograms, and the Prometheus
 * text rendering of GET /metrics (private to rendezvous/). The names,
 * types and units are listed in docs/http-api.md.
 */
#ifndef DLAUNCH_RDZV_METRICS_H
#define DLAUNCH_RDZV_METRICS_H

#include <stdint.h>

#include "api.h"
#include "dlaunch/buf.h"
#include "journal.h"

struct rdzv_metrics;

/* What /metrics reads besides the request counters, all borrowed. */
struct rdzv_metrics_src {
	const struct rdzv_state *st;
	const struct rdzv_journal *journal; /* NULL: no --state-dir */
	const struct rdzv_api *api;
	uint64_t parked[RDZV_EP_COUNT]; /* long polls parked, by endpoint */
	uint64_t now_ms;		/* monotonic */
};

struct rdzv_metrics *rdzv_metrics_new(void);
void rdzv_metrics_free(struct rdzv_metrics *m);

/* rdzv_metrics_observe counts one answered request. */
void rdzv_metrics_observe(struct rdzv_metrics *m, enum rdzv_endpoint ep,
			  int status, uint64_t duration_ns);

/* rdzv_metrics_render appends the exposition text to out; DL_ELIMIT when
 * out is full. */
int rdzv_metrics_render(const struct rdzv_metrics *m,
			const struct rdzv_metrics_src *src, struct buf *out);

#endif
