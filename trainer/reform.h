/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reform.h - dlaunch-train's process group and its in-place re-form
 * (reform.c): forming the group from the environment or from the agent's
 * `membership`, the state agreement that follows every formation, the
 * copies between the run and its host state (r->ck), and what runs on the
 * agent's `abort` or after a failed collective (docs/worker-protocol.md,
 * "dlaunch-train"). The training loop (main.c) calls these; it owns the
 * run (run.h), these functions only replace what the run holds (the
 * group, DDP, the batch buffers and model when the world shrinks).
 *
 * Every function returns 0 or a negative DL_E* code; failures are logged
 * here (except where said otherwise), so the caller only decides to go on
 * or to end the worker.
 */
#ifndef DLAUNCH_TRAIN_REFORM_H
#define DLAUNCH_TRAIN_REFORM_H

#include "run.h"

struct control_membership;
struct control_agreement;

/* reform_join_group forms a new group: from m (a round's membership,
 * which also sets r->rank and r->world) or, with m NULL, from the
 * environment. From then on the agent's aborts cancel its collectives
 * (the channel's abort hook) and its bootstrap (dist_config.cancel). With
 * m, the batch buffers and model are resized for the new world
 * (reform_size_for_world) and DDP is rebuilt over the group; with m NULL
 * the caller builds DDP (setup_model). */
int reform_join_group(struct run *r, const struct control_membership *m);

/* reform_size_for_world: r->max_local is this world's largest slice of
 * the global batch; the batch buffers (and the model, rebuilt around its
 * parameters, when there is one) grow to hold it and never shrink. */
int reform_size_for_world(struct run *r);

/* reform_fill_state copies the model, optimizer, position and RNG into
 * r->ck (host memory); reform_apply_state loads them from st (r->ck or a
 * checkpoint). Neither logs. */
int reform_fill_state(struct run *r);
int reform_apply_state(struct run *r, const struct ckpt_state *st);

/* reform_agree: the group's state agreement (control_agree): afterwards
 * every rank holds the state of the lowest rank at the highest committed
 * step, checked by digest; *ag says which and whether this rank received
 * it. A failure because of an abort is not logged (a re-form follows). */
int reform_agree(struct run *r, struct control_agreement *ag);

/* reform_sampler_for_state: the sampler follows the seed and epoch of the
 * state (one taken from a checkpoint or a peer may have another seed). */
int reform_sampler_for_state(struct run *r);

/* reform_aborts: the in-place path, run while the agent's abort is
 * pending: leave the group (its state stays), answer `aborted`, wait for
 * the round's `membership`, join the new group, agree on the state and
 * answer `reformed`; a newer abort during any of it starts over. 0:
 * training goes on from r->step; an error ends the worker (the agent then
 * restarts its node). */
int reform_aborts(struct run *r);

/* reform_recover: what follows a collective that failed with rc. A plain
 * worker (no channel, or not welcomed), or an error that is not the
 * group's, returns rc unchanged; an in-place one waits (bounded) for the
 * agent's abort and re-forms (reform_aborts). */
int reform_recover(struct run *r, int rc);

#endif
