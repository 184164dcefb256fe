/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backoff.h - the pause before the next try of a failed request:
 * exponential, capped and jittered, so that clients that failed together
 * (thousands of agents when dlaunch-rdzv restarts) do not come back
 * together.
 *
 * The schedule has a base that starts at first_ms and doubles after each
 * try up to max_ms; each pause is drawn uniformly from [base/2, base]
 * (whole milliseconds), so a pause is never above max_ms and never below
 * half the base. backoff_reset starts the schedule over after a success.
 *
 * A struct backoff is a plain value owned by its user (embed it, no free);
 * it is not shared between threads. Its random numbers come from its own
 * generator (xorshift64*), seeded per user with backoff_seed(), or with a
 * fixed seed where a test wants a repeatable schedule.
 */
#ifndef DLAUNCH_BACKOFF_H
#define DLAUNCH_BACKOFF_H

#include <stdint.h>

struct backoff {
	uint64_t first_ms; /* base of the first pause (at least 1) */
	uint64_t max_ms;   /* cap of the base (at least first_ms) */
	uint64_t base_ms;  /* base of the next pause */
	uint64_t rng;	   /* generator state, never 0 */
};

/* backoff_init sets b to the start of the schedule first_ms doubling to
 * max_ms; a first_ms of 0 counts as 1 and a max_ms below first_ms as
 * first_ms. seed 0 is replaced by a fixed non-zero value. */
void backoff_init(struct backoff *b, uint64_t first_ms, uint64_t max_ms,
		  uint64_t seed);

/* backoff_next returns the pause before the next try, in milliseconds,
 * in [base/2, base] (at least 1), and doubles the base up to max_ms. */
uint64_t backoff_next(struct backoff *b);

/* backoff_reset starts the schedule over (after a success); the
 * generator goes on. */
void backoff_reset(struct backoff *b);

/* backoff_seed returns a seed that differs between processes and calls
 * (getrandom, else the clock and the pid mixed); never 0. */
uint64_t backoff_seed(void);

#endif
