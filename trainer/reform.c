/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reform.c - dlaunch-train's process group: its formation (from the
 * environment at start, from the agent's membership on a re-form), the
 * state agreement after each formation, and the in-place re-form on the
 * agent's abort (docs/worker-protocol.md, "dlaunch-train"). The contracts
 * are in reform.h; the training loop that calls them is main.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "dist/dist.h"
#include "dist/dist_flight.h"
#include "mlp.h"
#include "reform.h"
#include "ddp.h"
#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"

/* stop_asked: dist_config.stop, asked while the group forms: a stopping
 * signal ends the wait for peers that may never come (a round torn down
 * while its workers start) instead of running to --timeout */
static int stop_asked(void *arg)
{
	struct run *r = arg;
	return r->stopping != NULL && r->stopping(r);
}

/* setup_dist forms the group from the environment, or (m != NULL) from
 * the agent's membership of a new round, which replaces it. */
static int setup_dist(struct run *r, const struct control_membership *m)
{
	struct dist_config cfg;
	char err[256];
	int rc;

	rc = dist_config_from_env(&cfg, err, sizeof(err));
	if (rc != 0) {
		log_error("%s", err);
		return rc;
	}
	if (m != NULL) {
		snprintf(cfg.master_addr, sizeof(cfg.master_addr), "%s",
			 m->master_addr);
		cfg.master_port = m->master_port;
		cfg.rank = m->rank;
		cfg.world_size = m->world_size;
	}
	r->rank = cfg.rank;
	r->world = cfg.world_size;
	r->wait_ms = r->o.timeout_ms ? r->o.timeout_ms : cfg.timeout_ms;
	if (r->world == 1) { /* one process: no group needed */
		dist_flight_begin_group(r->flight, r->rank);
		return 0;
	}
	cfg.flight = r->flight;
	cfg.backend =
	    r->o.backend == BACKEND_NCCL ? DIST_BACKEND_NCCL : DIST_BACKEND_TCP;
	cfg.cuda_device = r->gpu; /* the kernels' device (setup_device) */
	if (r->o.timeout_ms)
		cfg.timeout_ms = r->o.timeout_ms;
	cfg.cancel = control_abort_flag(r->ctl); /* a newer round */
	cfg.stop = stop_asked;			 /* a SIGTERM */
	cfg.stop_arg = r;
	rc = dist_init(&cfg, &r->dist, err, sizeof(err));
	if (rc != 0 && cfg.cancel && atomic_load(cfg.cancel))
		log_info("rank %d: %s (an abort came)", r->rank, err);
	else if (rc != 0 && stop_asked(r))
		log_warn("rank %d: stopped by a signal while forming the "
			 "process group",
			 r->rank);
	else if (rc != 0)
		log_error("rank %d: cannot form the process group: %s", r->rank,
			  err);
	return rc;
}

/* on_abort: the control channel's reader thread cancels the collective
 * in flight (the main thread may be inside it) */
static void on_abort(void *ctx)
{
	dist_abort(ctx);
}

/* reform_size_for_world: the batch buffers and the model hold this world
 * size's largest slice of the global batch. On a re-form to a smaller
 * world the slice grows: the model is rebuilt around its parameters
 * (the optimizer state lives apart and stays). */
int reform_size_for_world(struct run *r)
{
	int need = (int)((r->o.global_batch + (uint32_t)r->world - 1) /
			 (uint32_t)r->world);
	void *x, *y, *idx;
	int rc = 0;

	r->max_local = need;
	if (need <= r->max_local_alloc)
		return 0;
	x = realloc(r->x, (size_t)need * r->train.dim * sizeof(float));
	if (x)
		r->x = x;
	y = realloc(r->y, (size_t)need * sizeof(int32_t));
	if (y)
		r->y = y;
	idx = realloc(r->idx, (size_t)(need + 1) * sizeof(uint32_t));
	if (idx)
		r->idx = idx;
	if (!x || !y || !idx) {
		log_error("out of memory for the batch buffers");
		return DL_ENOMEM;
	}
	if (r->model != NULL) {
		struct mlp *m = NULL;

		rc = mlp_get_params(r->model, r->ck.params, r->ck.buffers);
		if (rc == 0)
			rc = mlp_new(&r->o.shape, &r->be, need, &m);
		if (rc == 0)
			rc = mlp_set_params(m, r->ck.params, r->ck.buffers);
		if (rc != 0) {
			mlp_free(m);
			log_error("cannot resize the model: %s",
				  dl_strerror(rc));
			return rc;
		}
		mlp_free(r->model);
		r->model = m;
	}
	r->max_local_alloc = need;
	return 0;
}

/* is_group_failure: an error of the group (a peer gone, an abort), after
 * which the agent may re-form it in place; others end the worker. */
static int is_group_failure(const struct run *r, int rc)
{
	return dist_aborted(r->dist) || rc == DL_ECLOSED ||
	       rc == DL_ETIMEDOUT || rc == DL_EPROTO;
}

/* reform_fill_state copies the model, optimizer and position into r->ck. */
int reform_fill_state(struct run *r)
{
	struct ckpt_state *ck = &r->ck;
	int rc = mlp_get_params(r->model, ck->params, ck->buffers);

	if (rc == 0)
		rc = train_optim_get(&r->optim, ck->momentum);
	ck->step = r->step;
	ck->epoch = r->epoch;
	ck->epoch_offset = r->offset;
	ck->seed = r->o.seed;
	ck->rng_key = r->rng.key;
	ck->rng_counter = r->rng.counter;
	ck->global_batch = r->o.global_batch;
	ck->has_momentum = (uint32_t)r->optim.has_state;
	return rc;
}

/* reform_apply_state: the model, optimizer and position from st */
int reform_apply_state(struct run *r, const struct ckpt_state *st)
{
	int rc = mlp_set_params(r->model, st->params, st->buffers);

	if (rc == 0)
		rc = train_optim_set(&r->optim, st->momentum,
				     (int)st->has_momentum);
	if (rc != 0)
		return rc;
	r->o.seed = st->seed;
	r->step = st->step;
	r->epoch = st->epoch;
	r->offset = st->epoch_offset;
	r->rng.key = st->rng_key;
	r->rng.counter = st->rng_counter;
	return 0;
}

/* reform_agree: the group's state agreement (control_agree): afterwards every
 * rank holds the state of the lowest rank at the highest committed
 * step, checked by digest. */
int reform_agree(struct run *r, struct control_agreement *ag)
{
	char err[512];
	int rc = reform_fill_state(r);

	dist_flight_set_phase(r->flight, "agree");
	if (rc == 0)
		rc = control_agree(r->dist, &r->ck, ag, err, sizeof(err));
	else
		snprintf(err, sizeof(err), "cannot copy the model: %s",
			 dl_strerror(rc));
	if (rc == 0 && ag->received)
		rc = reform_apply_state(r, &r->ck);
	if (rc != 0) {
		if (!dist_aborted(r->dist))
			log_error("rank %d: state agreement failed: %s",
				  r->rank, err);
		return rc;
	}
	if (ag->received)
		log_info("rank %d: took the state of step %llu from rank %d",
			 r->rank, (unsigned long long)ag->step, ag->leader);
	return 0;
}

/* reform_sampler_for_state: the sampler follows the seed and epoch of the state
 * (a state taken from a checkpoint or a peer may have another seed) */
int reform_sampler_for_state(struct run *r)
{
	if (r->sampler.seed != r->o.seed || r->sampler.perm == NULL) {
		train_sampler_release(&r->sampler);
		int rc = train_sampler_init(&r->sampler, r->train.n, r->o.seed);
		if (rc != 0) {
			log_error("cannot set up the sampler: %s",
				  dl_strerror(rc));
			return rc;
		}
	}
	train_sampler_set_epoch(&r->sampler, r->epoch);
	return 0;
}

/* leave_group: the group is over (aborted); its state stays */
static void leave_group(struct run *r)
{
	control_set_abort_hook(r->ctl, NULL, NULL);
	train_ddp_free(r->ddp);
	r->ddp = NULL;
	dist_free(r->dist);
	r->dist = NULL;
}

/* reform_join_group: a new group (from m, or the environment when m is NULL),
 * cancelled by the agent's aborts from now on, with DDP over it */
int reform_join_group(struct run *r, const struct control_membership *m)
{
	int rc = setup_dist(r, m);

	if (rc != 0)
		return rc;
	control_set_abort_hook(r->ctl, on_abort, r->dist);
	if (m != NULL) {
		rc = reform_size_for_world(r);
		if (rc == 0)
			rc = train_ddp_new(r->dist, r->model, &r->be,
					   r->o.bucket_bytes, &r->ddp);
	}
	return rc;
}

/*
 * reform_aborts: the in-place path of docs/worker-protocol.md. For each pending
 * abort: leave the group keeping the committed state (the unfinished step
 * was dropped where it failed), answer `aborted`, wait for the round's
 * `membership`, form the new group, agree on the state (control_agree)
 * and answer `reformed`. A newer abort during any of it starts over. 0:
 * training goes on; an error ends the worker, which sends its node to
 * the agent's restart path.
 */
int reform_aborts(struct run *r)
{
	struct control_membership m;
	struct control_agreement ag;
	uint64_t round;
	int rc = DL_ECLOSED;

	while (control_abort_pending(r->ctl, &round)) {
		uint64_t t0 = clock_now_ms();

		dist_flight_set_phase(r->flight, "reform");
		leave_group(r);
		control_take_abort(r->ctl);
		/* an end of epoch cut short: its evaluation is skipped, its
		 * move to the next epoch is not (all ranks must agree) */
		if (r->offset >= r->train.n) {
			r->epoch++;
			r->offset = 0;
		}
		control_send_aborted(r->ctl, round, r->step);
		rc = control_wait_membership(
		    r->ctl, round,
		    control_membership_wait_ms(r->ctl, r->wait_ms), &m);
		if (rc != 0) {
			log_error("rank %d: no membership from the agent after "
				  "the abort of round %llu: %s",
				  r->rank, (unsigned long long)round,
				  dl_strerror(rc));
			return rc;
		}
		r->round = m.round;
		r->local_rank = m.local_rank;
		r->local_world = m.local_world_size;
		rc = reform_join_group(r, &m);
		if (rc == 0)
			rc = reform_agree(r, &ag);
		if (rc != 0) {
			if (control_abort_pending(r->ctl, &round))
				continue; /* a newer round: start over */
			return rc;
		}
		rc = reform_sampler_for_state(r);
		if (rc != 0)
			return rc;
		r->reforms++;
		r->evaluated_at_end = 0; /* the same on every rank */
		log_info("rank %d of %d: re-formed in place for round %llu in "
			 "%llu ms, resuming after step %llu%s",
			 r->rank, r->world, (unsigned long long)r->round,
			 (unsigned long long)(clock_now_ms() - t0),
			 (unsigned long long)r->step,
			 ag.received ? " (state received)" : "");
		control_send_reformed(r->ctl, r->round, r->step);
		return 0;
	}
	return rc;
}

/* reform_recover: what follows a failed collective. A plain worker (no channel,
 * or not welcomed) fails as it always did; an in-place one waits for its
 * agent's abort (bounded) and re-forms. */
int reform_recover(struct run *r, int rc)
{
	uint64_t round;

	if (!control_in_place(r->ctl) || !is_group_failure(r, rc))
		return rc;
	if (!control_abort_pending(r->ctl, &round)) {
		dist_flight_set_phase(r->flight, "wait_abort");
		log_info("rank %d: the group failed (%s); waiting for the "
			 "agent's abort",
			 r->rank, dl_strerror(rc));
		if (control_wait_abort(r->ctl, r->wait_ms, &round) != 0) {
			log_error("rank %d: the group failed (%s) and no abort "
				  "came from the agent",
				  r->rank, dl_strerror(rc));
			return rc;
		}
	}
	return reform_aborts(r);
}
