/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backoff.c - exponential, capped, jittered retry pauses (backoff.h).
 */
#include "dlaunch/backoff.h"

#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define FIXED_SEED 0x9E3779B97F4A7C15ull

/* mix: splitmix64's finaliser, so that near seeds (a counter, a pid) give
 * unrelated generator states */
static uint64_t mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xBF58476D1CE4E5B9ull;
	x ^= x >> 27;
	x *= 0x94D049BB133111EBull;
	x ^= x >> 31;
	return x;
}

/* rand64: xorshift64* */
static uint64_t rand64(struct backoff *b)
{
	uint64_t x = b->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	b->rng = x;
	return x * 0x2545F4914F6CDD1Dull;
}

void backoff_init(struct backoff *b, uint64_t first_ms, uint64_t max_ms,
		  uint64_t seed)
{
	b->first_ms = first_ms ? first_ms : 1;
	b->max_ms = max_ms < b->first_ms ? b->first_ms : max_ms;
	b->base_ms = b->first_ms;
	b->rng = mix(seed ? seed : FIXED_SEED);
	if (!b->rng)
		b->rng = FIXED_SEED;
}

uint64_t backoff_next(struct backoff *b)
{
	uint64_t base = b->base_ms, lo = base / 2, pause;
	/* uniform in [lo, base]; the modulo bias is below 2^-40 for any
	 * base a retry uses */
	pause = lo + rand64(b) % (base - lo + 1);
	b->base_ms = base > b->max_ms / 2 ? b->max_ms : base * 2;
	return pause ? pause : 1;
}

void backoff_reset(struct backoff *b)
{
	b->base_ms = b->first_ms;
}

uint64_t backoff_seed(void)
{
	static uint64_t calls;
	uint64_t s = 0;
	struct timespec ts;
	if (getrandom(&s, sizeof(s), GRND_NONBLOCK) != (ssize_t)sizeof(s)) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		s = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
		s ^= (uint64_t)getpid() << 32;
	}
	s = mix(s + ++calls);
	return s ? s : FIXED_SEED;
}
