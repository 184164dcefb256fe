/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hang.h - the hang analysis: from the node reports of one trigger (every
 * worker's state, steps, collective flight records and stacks) to a verdict
 * naming the stuck rank(s), and a text version for people.
 *
 * Pure functions over jansson values: no I/O, no clock. Used by the agent
 * (the job-wide report, hang-report.json/.txt) and by dlaunch-rdzv (GET
 * /v1/jobs/{job}/hang, the status page, metrics). The report format is in
 * docs/hangs.md; the rules, in order (the first that names a rank wins):
 *
 *   1. stopped-process: a worker stopped (SIGSTOP, a tracer), a zombie,
 *      dead or gone.
 *   2. missing-from-collective: in the flight records (sequence numbers are
 *      per rank and equal across ranks for the same collective), the lowest
 *      seq that some rank entered but not every rank finished; the ranks
 *      that never entered it are stuck (or, all in it, the ranks in it as
 *      another op than the majority: they took another branch).
 *   3. outside-collective: the rank(s) not inside any collective (flight
 *      record, a Python frame in torch/distributed/, a native frame of a
 *      collective library) while the others are.
 *   4. first-stopped: the ranks at the lowest step, or whose step stopped
 *      moving clearly first (largest step_age_ms by a margin).
 *
 * Rules 2-4 need evidence that the job stopped moving: the trigger's kind
 * (progress-timeout, stall), a collective waited in for min_wait_ms before
 * the trigger, or every rank's step unchanged for stall_ms. Without it a
 * dump of a healthy job answers "none" (or "straggler"). Bad input (wrong
 * types, missing fields) is skipped, never a crash; sizes are bounded.
 */
#ifndef DLAUNCH_HANG_H
#define DLAUNCH_HANG_H

#include <jansson.h>
#include <stdint.h>

#include "buf.h"

/* What the analysis reads at most; more is ignored (not an error). */
#define DL_HANG_MAX_REPORTS 4096  /* node reports */
#define DL_HANG_MAX_RANKS   65536 /* workers over all reports */
#define DL_HANG_MAX_FLIGHT  1024  /* the newest flight entries of a worker */
#define DL_HANG_ID_MAX	    64	  /* bytes in a trigger's id */

/* Thresholds of the rules; dl_hang_params_default fills the defaults. */
struct dl_hang_params {
	/* a collective entered this long before the trigger is a wait, not
	 * a collective in progress (default 3000: a healthy job's largest
	 * all-reduce takes less) */
	int64_t min_wait_ms;
	/* every rank's step unchanged this long means the job stopped,
	 * whatever the trigger (default 10000) */
	int64_t stall_ms;
	/* rule 4 names the ranks whose step_age_ms exceeds every other's by
	 * at least this much (default 1000) */
	int64_t step_margin_ms;
	/* a straggler is more than this many steps behind the median while
	 * the others move (default 2) */
	int64_t straggler_steps;
};

void dl_hang_params_default(struct dl_hang_params *p);

/* dl_hang_id_valid: id is a trigger's id, 1 to DL_HANG_ID_MAX of
 * [A-Za-z0-9._:-] (NULL is not). The agent checks every id it hears of
 * (a watch answer, an etcd trigger key) before it names a file or a key
 * after it. */
int dl_hang_id_valid(const char *id);

/*
 * dl_hang_analyse: reports is a JSON array of node reports (docs/hangs.md,
 * "The node report"); reports of a trigger other than the newest one in
 * the array are left out. now_ms (unix ms) stands in for times a report
 * lacks. Returns a new object the caller must json_decref:
 *   {"verdict": "hang"|"straggler"|"none"|"incomplete",
 *    "stuck": [ranks], "stragglers": [ranks],
 *    "rule": "stopped-process"|"missing-from-collective"|
 *            "outside-collective"|"first-stopped"|"none",
 *    "reason": "<one sentence naming the rank(s), their node and why>",
 *    "ranks_seen": n, "nodes": [node ids reported], "missing_nodes": [],
 *    "collective": {"seq", "op", "entered": [ranks], "wait_ms"}  (rule 2)}
 * NULL only when memory runs out; anything else, a non-array included,
 * gives an answer ("incomplete" when there is nothing to judge).
 */
json_t *dl_hang_analyse(json_t *reports, int64_t now_ms);

/*
 * dl_hang_analyse_members is dl_hang_analyse with the node ids expected to
 * report (members: an array of strings, or NULL): those that did not go
 * to "missing_nodes", and a verdict no rule reaches is "incomplete" while
 * any is missing. params NULL means the defaults.
 */
json_t *dl_hang_analyse_members(json_t *reports, json_t *members,
				const struct dl_hang_params *params,
				int64_t now_ms);

/*
 * dl_hang_format_text appends the report for people to out: the trigger,
 * the verdict and reason, then per rank (sorted) its node, state, step,
 * CPU, wait channel, notes and flight tail, then the stacks, identical
 * ones folded ("ranks 1-3,5: same as rank 0"; addresses and thread ids
 * do not count). analysis may be NULL (no verdict lines). When out's
 * maximum is reached the text ends with a "...[cut]" line. Returns 0 or
 * DL_ENOMEM.
 */
int dl_hang_format_text(json_t *reports, json_t *analysis, struct buf *out);

#endif
