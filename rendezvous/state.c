/*
 * state.c - the rendezvous state machine: jobs, rounds, membership, ranks.
 *
 * No I/O: every entry point takes the current monotonic time and changes
 * the jobs in memory, marking what changed; the HTTP layer journals and
 * answers. Each state change is logged as one structured line
 * ("job=J round=N event=E ...").
 *
 * A job's round is either open (WAITING for the first round, RESTARTING
 * after one ended: nodes join) or closed (RUNNING: members with node ranks).
 * Ending a round opens the next one at once (round + 1); the members that
 * did not fail, leave or die become survivors, expected back, and keep
 * their relative order in the next round.
 */
#include "state_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/error.h"
#include "dlaunch/log.h"

#define ERR(code, ...) (snprintf(err, err_size, __VA_ARGS__), (code))

void rdzv_limits_init(struct rdzv_limits *limits)
{
	limits->max_jobs = 1024;
	limits->max_nodes_per_job = 65536;
	limits->max_keys_per_job = 1024;
	limits->max_value_bytes = 64 * 1024;
}

void rdzv_job_config_init(struct rdzv_job_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->min_nodes = 1;
	cfg->max_nodes = 1;
	cfg->join_timeout_ms = 600000;
	cfg->last_call_timeout_ms = 5000;
	cfg->heartbeat_interval_ms = 1000;
	cfg->heartbeat_timeout_ms = 5000;
}

const char *rdzv_job_state_name(enum rdzv_job_state s)
{
	static const char *const names[] = {"WAITING", "RUNNING", "RESTARTING",
					    "SUCCEEDED", "FAILED"};
	return (unsigned)s < RDZV_JOB_NSTATES ? names[s] : "UNKNOWN";
}

const char *rdzv_action_name(enum rdzv_action a)
{
	switch (a) {
	case RDZV_ACTION_CONTINUE: return "continue";
	case RDZV_ACTION_RESTART: return "restart";
	case RDZV_ACTION_STOP: return "stop";
	}
	return "continue";
}

const char *rdzv_member_status_name(enum rdzv_member_status s)
{
	switch (s) {
	case RDZV_MEMBER_RUNNING: return "running";
	case RDZV_MEMBER_SUCCEEDED: return "succeeded";
	case RDZV_MEMBER_FAILED: return "failed";
	}
	return "running";
}

int rdzv_name_valid(const char *s, size_t max_len)
{
	size_t n = 0;
	if (!s || !*s || *s == '.')
		return 0;
	for (; s[n]; n++) {
		char c = s[n];
		if (n >= max_len)
			return 0;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == ':' || c == '-'))
			return 0;
	}
	return 1;
}

struct rdzv_state *rdzv_state_new(const struct rdzv_limits *limits)
{
	struct rdzv_state *st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	if (limits)
		st->limits = *limits;
	else
		rdzv_limits_init(&st->limits);
	return st;
}

static void job_free(struct job *j)
{
	if (!j)
		return;
	free(j->members);
	free(j->member_slots);
	free(j->waiters);
	free(j->survivors);
	json_decref(j->failures);
	rdzv_kv_free(j->kv);
	free(j);
}

void rdzv_state_free(struct rdzv_state *st)
{
	if (!st)
		return;
	for (size_t i = 0; i < st->njobs; i++)
		job_free(st->jobs[i]);
	free(st->jobs);
	free(st->deleted);
	free(st);
}

int job_reserve(void **arr, size_t *cap, size_t need, size_t elem)
{
	size_t ncap;
	void *p;
	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap : 4;
	while (ncap < need)
		ncap *= 2;
	p = realloc(*arr, ncap * elem);
	if (!p)
		return DL_ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

struct job *state_find_job(const struct rdzv_state *st, const char *name)
{
	for (size_t i = 0; i < st->njobs; i++)
		if (strcmp(st->jobs[i]->name, name) == 0)
			return st->jobs[i];
	return NULL;
}

/* FNV-1a: node ids are short and chosen by clients; the index only has to
 * spread them, a collision costs a probe */
static uint64_t name_hash(const char *s)
{
	uint64_t h = 14695981039346656037ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

void job_index_members(struct job *j)
{
	size_t cap = 16;
	while (cap < 2 * j->nmembers)
		cap *= 2;
	if (cap > j->member_slots_cap) {
		uint32_t *slots =
		    realloc(j->member_slots, cap * sizeof(*slots));
		if (!slots) {
			/* lookups fall back to scanning */
			free(j->member_slots);
			j->member_slots = NULL;
			j->member_slots_cap = 0;
			return;
		}
		j->member_slots = slots;
		j->member_slots_cap = cap;
	}
	cap = j->member_slots_cap;
	memset(j->member_slots, 0, cap * sizeof(j->member_slots[0]));
	for (size_t i = 0; i < j->nmembers; i++) {
		size_t h = name_hash(j->members[i].info.node_id) & (cap - 1);
		while (j->member_slots[h])
			h = (h + 1) & (cap - 1);
		j->member_slots[h] = (uint32_t)i + 1;
	}
}

/* job_find_member is on every heartbeat's path: hashed, so one server core
 * keeps up with heartbeats of a job of many thousand nodes */
struct member *job_find_member(const struct job *j, const char *node_id)
{
	size_t cap = j->member_slots_cap, h;
	if (!j->nmembers)
		return NULL;
	if (!cap) {
		for (size_t i = 0; i < j->nmembers; i++)
			if (strcmp(j->members[i].info.node_id, node_id) == 0)
				return &j->members[i];
		return NULL;
	}
	for (h = name_hash(node_id) & (cap - 1); j->member_slots[h];
	     h = (h + 1) & (cap - 1)) {
		struct member *m = &j->members[j->member_slots[h] - 1];
		if (strcmp(m->info.node_id, node_id) == 0)
			return m;
	}
	return NULL;
}

struct waiter *job_find_waiter(const struct job *j, const char *node_id)
{
	for (size_t i = 0; i < j->nwaiters; i++)
		if (strcmp(j->waiters[i].info.node_id, node_id) == 0)
			return &j->waiters[i];
	return NULL;
}

static struct survivor *job_find_survivor(const struct job *j,
					  const char *node_id)
{
	for (size_t i = 0; i < j->nsurvivors; i++)
		if (strcmp(j->survivors[i].node_id, node_id) == 0)
			return &j->survivors[i];
	return NULL;
}

int job_is_open(const struct job *j)
{
	return j->state == RDZV_JOB_WAITING || j->state == RDZV_JOB_RESTARTING;
}

unsigned job_master_port(const struct job *j)
{
	if (!j->nmembers || !j->members[0].info.master_port)
		return 29500;
	return j->members[0].info.master_port;
}

int job_is_ended(const struct job *j)
{
	return j->state == RDZV_JOB_SUCCEEDED || j->state == RDZV_JOB_FAILED;
}

static void mark(struct job *j, unsigned what)
{
	j->changed |= what;
}

struct job *state_add_job(struct rdzv_state *st, const char *name,
			  const struct rdzv_job_config *cfg)
{
	struct job *j;
	if (job_reserve((void **)&st->jobs, &st->jobs_cap, st->njobs + 1,
			sizeof(st->jobs[0])))
		return NULL;
	j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->failures = json_array();
	j->kv = rdzv_kv_new();
	if (!j->failures || !j->kv) {
		job_free(j);
		return NULL;
	}
	snprintf(j->name, sizeof(j->name), "%s", name);
	j->cfg = *cfg;
	j->round = 1;
	j->state = RDZV_JOB_WAITING;
	st->jobs[st->njobs++] = j;
	/* a job deleted and re-created before the marks were popped must
	 * not be journaled as deleted */
	for (size_t i = 0; i < st->ndeleted; i++) {
		if (strcmp(st->deleted[i], name) == 0) {
			memmove(&st->deleted[i], &st->deleted[i + 1],
				(st->ndeleted - i - 1) *
				    sizeof(st->deleted[0]));
			st->ndeleted--;
			break;
		}
	}
	return j;
}

static void remove_job(struct rdzv_state *st, struct job *j, int journal)
{
	for (size_t i = 0; i < st->njobs; i++) {
		if (st->jobs[i] != j)
			continue;
		if (journal &&
		    job_reserve((void **)&st->deleted, &st->deleted_cap,
				st->ndeleted + 1, sizeof(st->deleted[0])) == 0)
			memcpy(st->deleted[st->ndeleted++], j->name,
			       sizeof(st->deleted[0]));
		memmove(&st->jobs[i], &st->jobs[i + 1],
			(st->njobs - i - 1) * sizeof(st->jobs[0]));
		st->njobs--;
		job_free(j);
		return;
	}
}

void rdzv_job_delete(struct rdzv_state *st, const char *job)
{
	struct job *j = state_find_job(st, job);
	if (j)
		remove_job(st, j, 0);
}

static void fill_reply(const struct job *j, enum rdzv_action action,
		       struct rdzv_reply *reply)
{
	if (!reply)
		return;
	reply->round = j->round;
	reply->state = j->state;
	reply->restart_count = j->restart_count;
	reply->action = job_is_ended(j) ? RDZV_ACTION_STOP : action;
}

/* The action for node_id right now: continue for a member of a running
 * round, stop once the job ended, restart (join again) otherwise. */
static enum rdzv_action action_for(const struct job *j, const char *node_id)
{
	if (job_is_ended(j))
		return RDZV_ACTION_STOP;
	if (node_id && j->state == RDZV_JOB_RUNNING &&
	    job_find_member(j, node_id))
		return RDZV_ACTION_CONTINUE;
	return RDZV_ACTION_RESTART;
}

/* track_min keeps the open round's clocks: when min_nodes were reached
 * (the last call runs from there) and since when the round has been short
 * of them (the join timeout runs from there). */
static void track_min(struct job *j, uint64_t now_ms)
{
	int enough = j->nwaiters >= j->cfg.min_nodes;
	if (enough && !j->min_reached) {
		j->min_reached = 1;
		j->min_reached_ms = now_ms;
	} else if (!enough && j->min_reached) {
		j->min_reached = 0;
		j->below_min_since_ms = now_ms;
	}
}

static void finish_job(struct rdzv_state *st, struct job *j,
		       enum rdzv_job_state state, const char *reason)
{
	j->state = state;
	j->nwaiters = 0;
	j->nsurvivors = 0;
	j->ended_seq = ++st->end_seq;
	mark(j, RDZV_CHANGED_JOB | RDZV_CHANGED_WAKE);
	log_info("job=%s round=%" PRIu64 " event=job_%s reason=%s "
		 "restart_count=%" PRIu32,
		 j->name, j->round,
		 state == RDZV_JOB_SUCCEEDED ? "succeeded" : "failed", reason,
		 j->restart_count);
}

/* close_round turns the open round's waiters into members: survivors of
 * the previous round first in their old order, then new nodes in join
 * order, at most max_nodes; the rest stay as spares. */
static int close_round(struct rdzv_state *st, struct job *j, uint64_t now_ms)
{
	size_t take =
	    j->nwaiters < j->cfg.max_nodes ? j->nwaiters : j->cfg.max_nodes;
	size_t n = 0, kept = 0;
	unsigned char *picked = calloc(j->nwaiters ? j->nwaiters : 1, 1);
	uint64_t offset = 0;

	if (!picked || job_reserve((void **)&j->members, &j->members_cap, take,
				   sizeof(j->members[0]))) {
		free(picked);
		return DL_ENOMEM;
	}
	j->nmembers = 0;
	for (size_t s = 0; s < j->nsurvivors && n < take; s++) {
		for (size_t w = 0; w < j->nwaiters; w++) {
			if (!picked[w] &&
			    strcmp(j->waiters[w].info.node_id,
				   j->survivors[s].node_id) == 0) {
				picked[w] = 1;
				n++;
				break;
			}
		}
	}
	for (size_t w = 0; w < j->nwaiters && n < take; w++) {
		if (!picked[w]) {
			picked[w] = 2;
			n++;
		}
	}
	/* survivors (1) in survivor order, then new nodes (2) in join order */
	for (int pass = 1; pass <= 2; pass++) {
		size_t limit = pass == 1 ? j->nsurvivors : 1;
		for (size_t s = 0; s < limit; s++) {
			for (size_t w = 0; w < j->nwaiters; w++) {
				struct member *m;
				if (picked[w] != pass)
					continue;
				if (pass == 1 &&
				    strcmp(j->waiters[w].info.node_id,
					   j->survivors[s].node_id) != 0)
					continue;
				m = &j->members[j->nmembers];
				memset(m, 0, sizeof(*m));
				m->info = j->waiters[w].info;
				m->node_rank = (uint32_t)j->nmembers;
				m->rank_offset = offset;
				m->status = RDZV_MEMBER_RUNNING;
				m->last_seen_ms = now_ms;
				offset += m->info.nproc;
				j->nmembers++;
			}
		}
	}
	for (size_t w = 0; w < j->nwaiters; w++)
		if (!picked[w])
			j->waiters[kept++] = j->waiters[w];
	j->nwaiters = kept;
	free(picked);
	j->nsurvivors = 0;
	j->had_survivors = 0;
	j->world_size = offset;
	j->state = RDZV_JOB_RUNNING;
	job_index_members(j);
	st->counters.rounds_total++;
	mark(j, RDZV_CHANGED_JOB | RDZV_CHANGED_WAKE);
	log_info("job=%s round=%" PRIu64 " event=round_closed nnodes=%zu "
		 "world_size=%" PRIu64 " master=%s:%u spares=%zu",
		 j->name, j->round, j->nmembers, j->world_size,
		 j->members[0].info.addr, job_master_port(j), j->nwaiters);
	return 0;
}

/* try_close closes the open round when it is complete: min_nodes are there
 * and either every survivor of the previous round is back (or max_nodes
 * joined in a first round), or the last call has passed. */
static void try_close(struct rdzv_state *st, struct job *j, uint64_t now_ms)
{
	int all_back = 1;
	if (!job_is_open(j) || j->nwaiters < j->cfg.min_nodes ||
	    j->nwaiters == 0)
		return;
	for (size_t s = 0; s < j->nsurvivors; s++)
		if (!job_find_waiter(j, j->survivors[s].node_id))
			all_back = 0;
	if (all_back && (j->had_survivors || j->nwaiters >= j->cfg.max_nodes)) {
		close_round(st, j, now_ms);
		return;
	}
	if (j->min_reached &&
	    now_ms >= j->min_reached_ms + j->cfg.last_call_timeout_ms)
		close_round(st, j, now_ms);
}

/* end_round ends the running round: the members not marked gone survive;
 * round + 1 opens at once. */
static void end_round(struct rdzv_state *st, struct job *j, uint64_t now_ms,
		      const char *reason, const char *node_id)
{
	size_t ns = 0;
	if (job_reserve((void **)&j->survivors, &j->survivors_cap, j->nmembers,
			sizeof(j->survivors[0])) == 0) {
		for (size_t i = 0; i < j->nmembers; i++) {
			if (j->members[i].gone)
				continue;
			memcpy(j->survivors[ns].node_id,
			       j->members[i].info.node_id,
			       sizeof(j->survivors[0].node_id));
			j->survivors[ns].last_seen_ms =
			    j->members[i].last_seen_ms;
			ns++;
		}
	}
	log_info("job=%s round=%" PRIu64 " event=round_ended reason=%s "
		 "node=%s survivors=%zu restart_count=%" PRIu32,
		 j->name, j->round, reason, node_id ? node_id : "-", ns,
		 j->restart_count);
	j->nsurvivors = ns;
	j->had_survivors = ns > 0;
	j->nmembers = 0;
	j->world_size = 0;
	j->round++;
	j->state = RDZV_JOB_RESTARTING;
	j->min_reached = 0;
	j->below_min_since_ms = now_ms;
	track_min(j, now_ms);
	mark(j, RDZV_CHANGED_JOB | RDZV_CHANGED_WAKE);
	try_close(st, j, now_ms);
}

static int config_mismatch(const struct job *j, const struct rdzv_job_config *c,
			   char *err, size_t err_size)
{
	const struct rdzv_job_config *h = &j->cfg;
	const char *field = NULL;
	if (h->min_nodes != c->min_nodes)
		field = "min_nodes";
	else if (h->max_nodes != c->max_nodes)
		field = "max_nodes";
	else if (h->max_restarts != c->max_restarts)
		field = "max_restarts";
	else if (h->join_timeout_ms != c->join_timeout_ms)
		field = "join_timeout";
	else if (h->last_call_timeout_ms != c->last_call_timeout_ms)
		field = "last_call_timeout";
	else if (h->heartbeat_interval_ms != c->heartbeat_interval_ms)
		field = "heartbeat_interval";
	else if (h->heartbeat_timeout_ms != c->heartbeat_timeout_ms)
		field = "heartbeat_timeout";
	if (!field)
		return 0;
	return ERR(DL_ECONFLICT,
		   "field '%s' disagrees with the configuration of job %s",
		   field, j->name);
}

static int check_config(const struct rdzv_state *st,
			const struct rdzv_job_config *c, char *err,
			size_t err_size)
{
	if (c->min_nodes < 1 || c->max_nodes < c->min_nodes)
		return ERR(
		    DL_EINVAL,
		    "min_nodes must be at least 1 and at most max_nodes");
	if (c->max_nodes > st->limits.max_nodes_per_job)
		return ERR(DL_ELIMIT,
			   "max_nodes is above the server's limit "
			   "of %" PRIu32 " nodes per job",
			   st->limits.max_nodes_per_job);
	if (c->max_restarts > RDZV_MAX_RESTARTS)
		return ERR(DL_EINVAL, "max_restarts is out of range");
	if (!c->heartbeat_timeout_ms || !c->heartbeat_interval_ms ||
	    !c->join_timeout_ms)
		return ERR(DL_EINVAL, "timeouts must be positive");
	return 0;
}

/* make_room drops the job that ended first when the job table is full. */
static int make_room(struct rdzv_state *st, char *err, size_t err_size)
{
	struct job *oldest = NULL;
	if (st->njobs < st->limits.max_jobs)
		return 0;
	for (size_t i = 0; i < st->njobs; i++) {
		struct job *j = st->jobs[i];
		if (j->ended_seq &&
		    (!oldest || j->ended_seq < oldest->ended_seq))
			oldest = j;
	}
	if (!oldest)
		return ERR(DL_ELIMIT,
			   "too many jobs (the server's limit is %" PRIu32 ")",
			   st->limits.max_jobs);
	log_info("job=%s round=%" PRIu64 " event=job_forgotten reason=max_jobs",
		 oldest->name, oldest->round);
	remove_job(st, oldest, 1);
	return 0;
}

static int add_waiter(struct rdzv_state *st, struct job *j,
		      const struct rdzv_node_info *node, int hold,
		      uint64_t now_ms, char *err, size_t err_size)
{
	struct waiter *w = job_find_waiter(j, node->node_id);
	if (w) {
		if (strcmp(w->info.incarnation, node->incarnation) != 0)
			log_info("job=%s round=%" PRIu64
				 " event=node_restarted "
				 "node=%s",
				 j->name, j->round, node->node_id);
		if (memcmp(&w->info, node, sizeof(*node)) != 0)
			mark(j, RDZV_CHANGED_JOB);
		w->info = *node;
	} else {
		if (j->nwaiters + j->nmembers >= st->limits.max_nodes_per_job)
			return ERR(DL_ELIMIT,
				   "too many nodes in job %s (the server's "
				   "limit is %" PRIu32 ")",
				   j->name, st->limits.max_nodes_per_job);
		if (job_reserve((void **)&j->waiters, &j->waiters_cap,
				j->nwaiters + 1, sizeof(j->waiters[0])))
			return ERR(DL_ENOMEM, "out of memory");
		w = &j->waiters[j->nwaiters++];
		memset(w, 0, sizeof(*w));
		w->info = *node;
		w->seq = ++j->next_seq;
		/* no wake-up: a new waiter alone answers no parked poll (the
		 * round closing or ending does), and waking every parked join
		 * on every join made forming an n-node round O(n^3) */
		mark(j, RDZV_CHANGED_JOB);
		log_info("job=%s round=%" PRIu64 " event=node_joined node=%s "
			 "addr=%s nproc=%" PRIu32 " waiting=%zu",
			 j->name, j->round, node->node_id, node->addr,
			 node->nproc, j->nwaiters);
	}
	w->last_seen_ms = now_ms;
	if (hold)
		w->polls_open++;
	return 0;
}

int rdzv_join(struct rdzv_state *st, const char *job,
	      const struct rdzv_node_info *node,
	      const struct rdzv_job_config *cfg, int hold, uint64_t now_ms,
	      struct rdzv_reply *reply, char *err, size_t err_size)
{
	struct job *j;
	struct member *m;
	int rc;

	if (!rdzv_name_valid(job, RDZV_NAME_MAX))
		return ERR(DL_EINVAL, "invalid job name");
	if (!rdzv_name_valid(node->node_id, RDZV_NAME_MAX) ||
	    !rdzv_name_valid(node->incarnation, RDZV_INCARNATION_MAX))
		return ERR(DL_EINVAL, "invalid node_id or incarnation");
	if (node->nproc < 1 || node->nproc > RDZV_MAX_NPROC)
		return ERR(DL_EINVAL, "nproc must be between 1 and %d",
			   RDZV_MAX_NPROC);
	rc = check_config(st, cfg, err, err_size);
	if (rc)
		return rc;
	j = state_find_job(st, job);
	if (!j) {
		rc = make_room(st, err, err_size);
		if (rc)
			return rc;
		j = state_add_job(st, job, cfg);
		if (!j)
			return ERR(DL_ENOMEM, "out of memory");
		j->below_min_since_ms = now_ms;
		mark(j, RDZV_CHANGED_JOB | RDZV_CHANGED_WAKE);
		log_info("job=%s round=1 event=job_created min_nodes=%" PRIu32
			 " max_nodes=%" PRIu32 " max_restarts=%" PRIu32,
			 job, cfg->min_nodes, cfg->max_nodes,
			 cfg->max_restarts);
	} else {
		rc = config_mismatch(j, cfg, err, err_size);
		if (rc) {
			fill_reply(j, action_for(j, node->node_id), reply);
			return rc;
		}
	}
	if (job_is_ended(j)) {
		fill_reply(j, RDZV_ACTION_STOP, reply);
		return ERR(DL_EGONE, "job %s has ended (%s)", j->name,
			   rdzv_job_state_name(j->state));
	}
	m = job_find_member(j, node->node_id);
	if (m && strcmp(m->info.incarnation, node->incarnation) == 0) {
		/* a repeated join of a member: the same answer again */
		m->last_seen_ms = now_ms;
		fill_reply(j, RDZV_ACTION_CONTINUE, reply);
		return RDZV_DONE;
	}
	if (m) {
		/* the node's agent restarted: its old incarnation is gone */
		m->gone = 1;
		end_round(st, j, now_ms, "node_restarted", node->node_id);
	}
	rc = add_waiter(st, j, node, hold, now_ms, err, err_size);
	if (rc)
		return rc;
	if (j->state == RDZV_JOB_RUNNING) {
		int done = 0;
		for (size_t i = 0; i < j->nmembers; i++)
			if (j->members[i].status == RDZV_MEMBER_SUCCEEDED)
				done = 1;
		/* scale up, unless the job is full (a spare) or finishing */
		if (j->nmembers < j->cfg.max_nodes && !done)
			end_round(st, j, now_ms, "scale_up", node->node_id);
	} else {
		track_min(j, now_ms);
		try_close(st, j, now_ms);
	}
	fill_reply(j, action_for(j, node->node_id), reply);
	return job_find_member(j, node->node_id) ? RDZV_DONE : RDZV_WAIT;
}

int rdzv_join_check(struct rdzv_state *st, const char *job, const char *node_id,
		    const char *incarnation, struct rdzv_reply *reply,
		    char *err, size_t err_size)
{
	struct job *j = state_find_job(st, job);
	struct member *m;
	struct waiter *w;

	if (!j)
		return ERR(DL_EGONE, "job %s no longer exists", job);
	if (job_is_ended(j)) {
		fill_reply(j, RDZV_ACTION_STOP, reply);
		return ERR(DL_EGONE, "job %s has ended (%s)", j->name,
			   rdzv_job_state_name(j->state));
	}
	m = job_find_member(j, node_id);
	w = job_find_waiter(j, node_id);
	fill_reply(j, action_for(j, node_id), reply);
	if ((m && strcmp(m->info.incarnation, incarnation) != 0) ||
	    (w && strcmp(w->info.incarnation, incarnation) != 0))
		return ERR(DL_ESTALE,
			   "stale incarnation %s of node %s (job %s)",
			   incarnation, node_id, j->name);
	if (m && j->state == RDZV_JOB_RUNNING)
		return RDZV_DONE;
	if (w)
		return RDZV_WAIT;
	return ERR(DL_ESTALE,
		   "node %s is no longer waiting in job %s at "
		   "round %" PRIu64 " (join again)",
		   node_id, j->name, j->round);
}

void rdzv_join_poll_end(struct rdzv_state *st, const char *job,
			const char *node_id, const char *incarnation,
			uint64_t now_ms)
{
	struct job *j = state_find_job(st, job);
	struct waiter *w;
	struct member *m;
	if (!j)
		return;
	w = job_find_waiter(j, node_id);
	if (w) {
		/* counted per node: polls of an old incarnation end too */
		if (w->polls_open)
			w->polls_open--;
		if (strcmp(w->info.incarnation, incarnation) == 0)
			w->last_seen_ms = now_ms;
	}
	m = job_find_member(j, node_id);
	if (m && strcmp(m->info.incarnation, incarnation) == 0)
		m->last_seen_ms = now_ms;
}

/* fence checks that node_id (incarnation) is a member of job j's running
 * round; otherwise it fills reply and returns DL_ESTALE. */
static int fence(struct job *j, const char *node_id, const char *incarnation,
		 uint64_t round, struct member **out, struct rdzv_reply *reply,
		 char *err, size_t err_size)
{
	struct member *m = job_find_member(j, node_id);
	fill_reply(j, RDZV_ACTION_RESTART, reply);
	if (m && strcmp(m->info.incarnation, incarnation) != 0)
		return ERR(DL_ESTALE,
			   "stale incarnation %s of node %s (job %s)",
			   incarnation, node_id, j->name);
	if (round != j->round)
		return ERR(DL_ESTALE,
			   "stale round %" PRIu64
			   " (job %s is at round %" PRIu64 ")",
			   round, j->name, j->round);
	if (!m || j->state != RDZV_JOB_RUNNING)
		return ERR(DL_ESTALE,
			   "node %s is not a member of round %" PRIu64
			   " of job %s",
			   node_id, j->round, j->name);
	*out = m;
	fill_reply(j, RDZV_ACTION_CONTINUE, reply);
	return 0;
}

/* ended answers a request to an ended job: 200 stop for a member of the
 * last round, 410 for anyone else. */
static int ended(struct job *j, const char *node_id, const char *incarnation,
		 struct rdzv_reply *reply, char *err, size_t err_size)
{
	struct member *m = job_find_member(j, node_id);
	fill_reply(j, RDZV_ACTION_STOP, reply);
	if (m && strcmp(m->info.incarnation, incarnation) == 0)
		return 0;
	return ERR(DL_EGONE, "job %s has ended (%s)", j->name,
		   rdzv_job_state_name(j->state));
}

int rdzv_heartbeat(struct rdzv_state *st, const char *job, const char *node_id,
		   const char *incarnation, uint64_t round, uint64_t now_ms,
		   struct rdzv_reply *reply, char *err, size_t err_size)
{
	struct job *j = state_find_job(st, job);
	struct member *m = NULL;
	int rc;

	if (!j)
		return ERR(DL_ENOTFOUND, "no job %s", job);
	st->counters.heartbeats_total++;
	if (job_is_ended(j))
		return ended(j, node_id, incarnation, reply, err, err_size);
	rc = fence(j, node_id, incarnation, round, &m, reply, err, err_size);
	if (rc)
		return rc;
	m->last_seen_ms = now_ms;
	return 0;
}

int rdzv_watch(struct rdzv_state *st, const char *job, const char *node_id,
	       const char *incarnation, uint64_t round, uint64_t now_ms,
	       struct rdzv_reply *reply, char *err, size_t err_size)
{
	struct job *j = state_find_job(st, job);
	if (!j)
		return ERR(DL_ENOTFOUND, "no job %s", job);
	if (node_id) {
		struct member *m = job_find_member(j, node_id);
		struct waiter *w = job_find_waiter(j, node_id);
		if (m && (!incarnation ||
			  strcmp(m->info.incarnation, incarnation) == 0))
			m->last_seen_ms = now_ms;
		if (w && (!incarnation ||
			  strcmp(w->info.incarnation, incarnation) == 0))
			w->last_seen_ms = now_ms;
	}
	/* an anonymous watcher (a dashboard, a script) is told whether the
	 * round it named is still the job's: continue, or restart */
	fill_reply(j,
		   node_id	       ? action_for(j, node_id)
		   : j->round == round ? RDZV_ACTION_CONTINUE
				       : RDZV_ACTION_RESTART,
		   reply);
	if (job_is_ended(j) || j->round != round)
		return RDZV_DONE;
	return RDZV_WAIT;
}

static void add_failures(struct job *j, const char *node_id, json_t *failures)
{
	size_t i;
	json_t *f;
	if (!json_is_array(failures))
		return;
	json_array_foreach(failures, i, f)
	{
		json_t *copy;
		if (json_array_size(j->failures) >= RDZV_MAX_FAILURES)
			return;
		if (!json_is_object(f))
			continue;
		copy = json_deep_copy(f);
		if (!copy)
			return;
		json_object_set_new(copy, "round",
				    json_integer((json_int_t)j->round));
		json_object_set_new(copy, "node_id", json_string(node_id));
		json_array_append_new(j->failures, copy);
	}
}

int rdzv_report(struct rdzv_state *st, const char *job, const char *node_id,
		const char *incarnation, uint64_t round, int succeeded,
		json_t *failures, uint64_t now_ms, struct rdzv_reply *reply,
		char *err, size_t err_size)
{
	struct job *j = state_find_job(st, job);
	struct member *m = NULL;
	int rc;

	if (!j)
		return ERR(DL_ENOTFOUND, "no job %s", job);
	if (job_is_ended(j))
		return ended(j, node_id, incarnation, reply, err, err_size);
	rc = fence(j, node_id, incarnation, round, &m, reply, err, err_size);
	if (rc)
		return rc;
	m->last_seen_ms = now_ms;
	if (succeeded) {
		size_t done = 0;
		if (m->status != RDZV_MEMBER_SUCCEEDED) {
			m->status = RDZV_MEMBER_SUCCEEDED;
			mark(j, RDZV_CHANGED_JOB | RDZV_CHANGED_WAKE);
			log_info("job=%s round=%" PRIu64
				 " event=node_succeeded "
				 "node=%s",
				 j->name, j->round, node_id);
		}
		for (size_t i = 0; i < j->nmembers; i++)
			done += j->members[i].status == RDZV_MEMBER_SUCCEEDED;
		if (done == j->nmembers)
			finish_job(st, j, RDZV_JOB_SUCCEEDED, "all_succeeded");
		fill_reply(j, RDZV_ACTION_CONTINUE, reply);
		return 0;
	}
	m->status = RDZV_MEMBER_FAILED;
	add_failures(j, node_id, failures);
	log_info("job=%s round=%" PRIu64 " event=node_failed node=%s "
		 "failures=%zu",
		 j->name, j->round, node_id,
		 json_is_array(failures) ? json_array_size(failures) : 0);
	if (j->restart_count >= j->cfg.max_restarts) {
		finish_job(st, j, RDZV_JOB_FAILED, "restart_budget_exhausted");
	} else {
		j->restart_count++;
		st->counters.restarts_total++;
		end_round(st, j, now_ms, "failure", node_id);
	}
	fill_reply(j, action_for(j, node_id), reply);
	return 0;
}

int rdzv_leave(struct rdzv_state *st, const char *job, const char *node_id,
	       const char *incarnation, uint64_t now_ms,
	       struct rdzv_reply *reply, char *err, size_t err_size)
{
	struct job *j = state_find_job(st, job);
	struct member *m;
	struct waiter *w;
	struct survivor *s;

	if (!j)
		return ERR(DL_ENOTFOUND, "no job %s", job);
	fill_reply(j, RDZV_ACTION_STOP, reply);
	if (job_is_ended(j))
		return 0;
	m = job_find_member(j, node_id);
	w = job_find_waiter(j, node_id);
	if ((m && strcmp(m->info.incarnation, incarnation) != 0) ||
	    (w && strcmp(w->info.incarnation, incarnation) != 0))
		return ERR(DL_ESTALE,
			   "stale incarnation %s of node %s (job %s)",
			   incarnation, node_id, j->name);
	if (m && m->status != RDZV_MEMBER_SUCCEEDED &&
	    j->state == RDZV_JOB_RUNNING) {
		m->gone = 1;
		end_round(st, j, now_ms, "leave", node_id);
	}
	if (w) {
		size_t at = (size_t)(w - j->waiters);
		memmove(w, w + 1, (j->nwaiters - at - 1) * sizeof(*w));
		j->nwaiters--;
		mark(j, RDZV_CHANGED_JOB | RDZV_CHANGED_WAKE);
		log_info("job=%s round=%" PRIu64 " event=node_left node=%s "
			 "waiting=%zu",
			 j->name, j->round, node_id, j->nwaiters);
	}
	s = job_find_survivor(j, node_id);
	if (s) {
		size_t at = (size_t)(s - j->survivors);
		memmove(s, s + 1, (j->nsurvivors - at - 1) * sizeof(*s));
		j->nsurvivors--;
		mark(j, RDZV_CHANGED_JOB | RDZV_CHANGED_WAKE);
	}
	if (job_is_open(j)) {
		track_min(j, now_ms);
		try_close(st, j, now_ms);
	}
	fill_reply(j, RDZV_ACTION_STOP, reply);
	return 0;
}

static void tick_running(struct rdzv_state *st, struct job *j, uint64_t now_ms)
{
	const char *first = NULL;
	size_t dead = 0;
	for (size_t i = 0; i < j->nmembers; i++) {
		struct member *m = &j->members[i];
		if (m->status == RDZV_MEMBER_SUCCEEDED ||
		    now_ms < m->last_seen_ms + j->cfg.heartbeat_timeout_ms)
			continue;
		m->gone = 1;
		dead++;
		if (!first)
			first = m->info.node_id;
		st->counters.evictions_total++;
		log_info("job=%s round=%" PRIu64 " event=node_evicted node=%s "
			 "silent_ms=%" PRIu64,
			 j->name, j->round, m->info.node_id,
			 now_ms - m->last_seen_ms);
	}
	if (dead) {
		char node[RDZV_NAME_MAX + 1];
		snprintf(node, sizeof(node), "%s", first);
		end_round(st, j, now_ms, "heartbeat_timeout", node);
	}
}

static void tick_open(struct rdzv_state *st, struct job *j, uint64_t now_ms)
{
	size_t kept = 0;
	uint64_t hbt = j->cfg.heartbeat_timeout_ms;
	for (size_t i = 0; i < j->nwaiters; i++) {
		struct waiter *w = &j->waiters[i];
		if (w->polls_open == 0 && now_ms >= w->last_seen_ms + hbt) {
			log_info("job=%s round=%" PRIu64 " event=node_dropped "
				 "node=%s reason=not_polling",
				 j->name, j->round, w->info.node_id);
			mark(j, RDZV_CHANGED_JOB | RDZV_CHANGED_WAKE);
			continue;
		}
		j->waiters[kept++] = *w;
	}
	j->nwaiters = kept;
	kept = 0;
	for (size_t i = 0; i < j->nsurvivors; i++) {
		struct survivor *s = &j->survivors[i];
		if (!job_find_waiter(j, s->node_id) &&
		    now_ms >= s->last_seen_ms + hbt) {
			log_info("job=%s round=%" PRIu64 " event=node_dropped "
				 "node=%s reason=did_not_rejoin",
				 j->name, j->round, s->node_id);
			mark(j, RDZV_CHANGED_JOB | RDZV_CHANGED_WAKE);
			continue;
		}
		j->survivors[kept++] = *s;
	}
	j->nsurvivors = kept;
	track_min(j, now_ms);
	if (!j->min_reached &&
	    now_ms >= j->below_min_since_ms + j->cfg.join_timeout_ms) {
		finish_job(st, j, RDZV_JOB_FAILED, "join_timeout");
		return;
	}
	try_close(st, j, now_ms);
}

void rdzv_state_tick(struct rdzv_state *st, uint64_t now_ms)
{
	for (size_t i = 0; i < st->njobs; i++) {
		struct job *j = st->jobs[i];
		if (j->state == RDZV_JOB_RUNNING)
			tick_running(st, j, now_ms);
		if (job_is_open(j))
			tick_open(st, j, now_ms);
	}
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

uint64_t rdzv_state_next_deadline(const struct rdzv_state *st)
{
	uint64_t next = UINT64_MAX;
	for (size_t i = 0; i < st->njobs; i++) {
		const struct job *j = st->jobs[i];
		uint64_t hbt = j->cfg.heartbeat_timeout_ms;
		if (j->state == RDZV_JOB_RUNNING) {
			for (size_t k = 0; k < j->nmembers; k++)
				if (j->members[k].status !=
				    RDZV_MEMBER_SUCCEEDED)
					next = min_u64(
					    next,
					    j->members[k].last_seen_ms + hbt);
		}
		if (!job_is_open(j))
			continue;
		for (size_t k = 0; k < j->nwaiters; k++)
			if (!j->waiters[k].polls_open)
				next = min_u64(
				    next, j->waiters[k].last_seen_ms + hbt);
		/* a survivor that rejoined waits like any joiner */
		for (size_t k = 0; k < j->nsurvivors; k++)
			if (!job_find_waiter(j, j->survivors[k].node_id))
				next = min_u64(
				    next, j->survivors[k].last_seen_ms + hbt);
		if (j->min_reached)
			next = min_u64(next, j->min_reached_ms +
						 j->cfg.last_call_timeout_ms);
		else
			next = min_u64(next, j->below_min_since_ms +
						 j->cfg.join_timeout_ms);
	}
	return next;
}

int rdzv_kv_put(struct rdzv_state *st, const char *job, const char *key,
		const void *data, size_t len, char *err, size_t err_size)
{
	struct job *j = state_find_job(st, job);
	int rc;
	if (!j)
		return ERR(DL_ENOTFOUND, "no job %s", job);
	if (!rdzv_name_valid(key, RDZV_NAME_MAX))
		return ERR(DL_EINVAL, "invalid key name");
	if (len > st->limits.max_value_bytes)
		return ERR(DL_ELIMIT, "value of key %s is over %zu bytes", key,
			   st->limits.max_value_bytes);
	rc = rdzv_kv_set(j->kv, key, data, len, st->limits.max_keys_per_job);
	if (rc == DL_ELIMIT)
		return ERR(DL_ELIMIT,
			   "too many keys in job %s (at most %" PRIu32 ")", job,
			   st->limits.max_keys_per_job);
	if (rc)
		return ERR(rc, "cannot store key %s: %s", key, dl_strerror(rc));
	mark(j, RDZV_CHANGED_WAKE);
	return 0;
}

int rdzv_kv_get(const struct rdzv_state *st, const char *job, const char *key,
		const void **data, size_t *len)
{
	const struct job *j = state_find_job(st, job);
	if (!j)
		return DL_ENOTFOUND;
	return rdzv_kv_lookup(j->kv, key, data, len);
}

int rdzv_kv_each(const struct rdzv_state *st, const char *job,
		 int (*fn)(void *ctx, const char *key, const void *data,
			   size_t len),
		 void *ctx)
{
	const struct job *j = state_find_job(st, job);
	if (!j)
		return DL_ENOTFOUND;
	return rdzv_kv_foreach(j->kv, fn, ctx);
}

unsigned rdzv_state_pop_changed(struct rdzv_state *st, char *name)
{
	if (st->ndeleted) {
		st->ndeleted--;
		memcpy(name, st->deleted[st->ndeleted], RDZV_NAME_MAX + 1);
		return RDZV_CHANGED_JOB | RDZV_CHANGED_WAKE;
	}
	for (size_t i = 0; i < st->njobs; i++) {
		unsigned what = st->jobs[i]->changed;
		if (what) {
			st->jobs[i]->changed = 0;
			memcpy(name, st->jobs[i]->name, RDZV_NAME_MAX + 1);
			return what;
		}
	}
	return 0;
}

int rdzv_job_exists(const struct rdzv_state *st, const char *job)
{
	return state_find_job(st, job) != NULL;
}

size_t rdzv_job_count(const struct rdzv_state *st)
{
	return st->njobs;
}

const char *rdzv_job_name_at(const struct rdzv_state *st, size_t i)
{
	return i < st->njobs ? st->jobs[i]->name : NULL;
}

void rdzv_state_stats(const struct rdzv_state *st,
		      uint64_t jobs_by_state[RDZV_JOB_NSTATES],
		      uint64_t *members, struct rdzv_counters *counters)
{
	memset(jobs_by_state, 0, RDZV_JOB_NSTATES * sizeof(uint64_t));
	*members = 0;
	for (size_t i = 0; i < st->njobs; i++) {
		jobs_by_state[st->jobs[i]->state]++;
		if (!job_is_ended(st->jobs[i]))
			*members += st->jobs[i]->nmembers;
	}
	*counters = st->counters;
}
