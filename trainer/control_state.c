/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control_state.c - the state agreement of dlaunch-train after a group
 * forms (at start and after every in-place re-form): who is ahead, who
 * receives what, and the check that all replicas agree. The rule and why
 * it is enough are in docs/worker-protocol.md ("dlaunch-train").
 */
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "control.h"
#include "dist/dist.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"

static uint64_t fnv1a64(const unsigned char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

uint64_t control_state_digest(const struct ckpt_state *st, int *rc)
{
	unsigned char *img = NULL;
	size_t len = 0;
	uint64_t h;

	*rc = ckpt_encode(st, &img, &len);
	if (*rc != 0)
		return 0;
	h = fnv1a64(img, len);
	free(img);
	return h;
}

/* swap_state: st takes the arrays and values of from (released after) */
static void swap_state(struct ckpt_state *st, struct ckpt_state *from)
{
	struct ckpt_state old = *st;

	*st = *from;
	*from = old;
	ckpt_state_release(from);
}

int control_agree(struct dist *d, struct ckpt_state *st,
		  struct control_agreement *out, char *err, size_t err_size)
{
	int world = d ? dist_world_size(d) : 1, me = d ? dist_rank(d) : 0;
	uint64_t mine[2], *all = NULL, len = 0;
	unsigned char *img = NULL;
	size_t img_len = 0;
	int rc, leader = 0;

	memset(out, 0, sizeof(*out));
	rc = ckpt_encode(st, &img, &img_len);
	if (rc != 0)
		return dl_errorf(err, err_size, rc, "cannot encode the state");
	mine[0] = st->step;
	mine[1] = fnv1a64(img, img_len);
	out->step = st->step;
	out->digest = mine[1];
	if (d == NULL)
		goto out;
	all = malloc((size_t)world * sizeof(mine));
	if (all == NULL) {
		rc = DL_ENOMEM;
		goto out;
	}
	rc = dist_all_gather(d, mine, all, 2, DIST_INT64);
	if (rc != 0) {
		dl_errorf(err, err_size, rc, "cannot exchange committed steps");
		goto out;
	}
	for (int p = 1; p < world; p++)
		if (all[2 * p] > all[2 * leader])
			leader = p;
	out->leader = leader;
	out->step = all[2 * leader];
	for (int p = 0; p < world; p++) {
		if (all[2 * p] < out->step)
			out->n_behind++;
		else if (all[2 * p + 1] != all[2 * leader + 1]) {
			rc = dl_errorf(
			    err, err_size, DL_ECONFLICT,
			    "ranks %d and %d are both at step %llu but their "
			    "states differ (digests %016llx and %016llx): the "
			    "replicas diverged",
			    leader, p, (unsigned long long)out->step,
			    (unsigned long long)all[2 * leader + 1],
			    (unsigned long long)all[2 * p + 1]);
			goto out;
		}
	}
	if (me == leader) {
		len = img_len;
		for (int p = 0; p < world && rc == 0; p++)
			if (all[2 * p] < out->step) {
				rc = dist_send(d, &len, 1, DIST_INT64, p);
				if (rc == 0)
					rc = dist_send(d, img, img_len,
						       DIST_UINT8, p);
			}
	} else if (mine[0] < out->step) {
		struct ckpt_state got;
		char why[256];

		rc = dist_recv(d, &len, 1, DIST_INT64, leader);
		/* the same model encodes to the same size everywhere */
		if (rc == 0 && len != img_len) {
			rc =
			    dl_errorf(err, err_size, DL_EPROTO,
				      "rank %d sent a state of %llu bytes, "
				      "not %zu",
				      leader, (unsigned long long)len, img_len);
			goto out;
		}
		if (rc == 0)
			rc = dist_recv(d, img, img_len, DIST_UINT8, leader);
		if (rc == 0) {
			rc = ckpt_decode(img, img_len, &got, why, sizeof(why));
			if (rc != 0) {
				dl_errorf(err, err_size, rc,
					  "the state from rank %d is damaged: "
					  "%s",
					  leader, why);
				goto out;
			}
			swap_state(st, &got);
			out->received = 1;
			mine[1] = all[2 * leader + 1];
		}
	}
	if (rc != 0) {
		dl_errorf(err, err_size, rc,
			  "cannot transfer the state of "
			  "rank %d",
			  leader);
		goto out;
	}
	/* every replica must now be the leader's, bit for bit */
	mine[0] = mine[1];
	if (out->received) { /* what this rank now holds, re-encoded */
		mine[0] = control_state_digest(st, &rc);
		if (rc != 0)
			goto out;
	}
	mine[1] = out->step;
	rc = dist_all_gather(d, mine, all, 2, DIST_INT64);
	if (rc != 0) {
		dl_errorf(err, err_size, rc, "cannot compare state digests");
		goto out;
	}
	for (int p = 0; p < world; p++)
		if (all[2 * p] != all[2 * leader]) {
			rc =
			    dl_errorf(err, err_size, DL_ECONFLICT,
				      "after the state transfer rank %d's "
				      "state (digest %016llx) differs from "
				      "rank %d's (%016llx)",
				      p, (unsigned long long)all[2 * p], leader,
				      (unsigned long long)all[2 * leader]);
			goto out;
		}
	out->digest = all[2 * leader];
out:
	free(all);
	free(img);
	return rc;
}
