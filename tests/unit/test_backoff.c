/* SPDX-License-Identifier: Apache-2.0 */
/* test_backoff.c - unit tests of the retry schedule (common/backoff.c):
 * its bounds, its reset, its arguments, and 1000 simulated agents that
 * lost their server together and come back spread, not in lockstep. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "dlaunch/backoff.h"

#define AGENTS 1000

/* every pause lies in [base/2, base], the base doubling from 200 to the
 * 5000 cap, over many seeds; both ends of a range are reached */
static void test_bounds(void **state)
{
	static const uint64_t base[] = {200,  400,  800,  1600,
					3200, 5000, 5000, 5000};
	(void)state;
	for (size_t i = 0; i < sizeof(base) / sizeof(base[0]); i++) {
		uint64_t lo = UINT64_MAX, hi = 0;
		for (uint64_t seed = 1; seed <= 2000; seed++) {
			struct backoff b;
			uint64_t p = 0;
			backoff_init(&b, 200, 5000, seed);
			for (size_t k = 0; k <= i; k++)
				p = backoff_next(&b);
			assert_true(p >= base[i] / 2 && p <= base[i]);
			lo = p < lo ? p : lo;
			hi = p > hi ? p : hi;
		}
		/* 2000 draws cover the range: the ends within 2 % */
		assert_true(lo <= base[i] / 2 + base[i] / 50);
		assert_true(hi >= base[i] - base[i] / 50);
	}
}

static void test_reset_and_repeat(void **state)
{
	struct backoff a, b;
	uint64_t first[6];
	(void)state;
	backoff_init(&a, 100, 2000, 42);
	backoff_init(&b, 100, 2000, 42);
	for (int i = 0; i < 6; i++) {
		first[i] = backoff_next(&a);
		assert_true(first[i] == backoff_next(&b)); /* same seed */
	}
	assert_true(first[5] >= 1000); /* the base reached the cap */
	backoff_reset(&a);
	uint64_t p = backoff_next(&a);
	assert_true(p >= 50 && p <= 100);
	/* two seeds give two schedules */
	backoff_init(&a, 100, 2000, 1);
	backoff_init(&b, 100, 2000, 2);
	int differ = 0;
	for (int i = 0; i < 6; i++)
		differ |= backoff_next(&a) != backoff_next(&b);
	assert_true(differ);
	assert_true(backoff_seed() != 0);
	assert_true(backoff_seed() != backoff_seed());
}

static void test_odd_arguments(void **state)
{
	struct backoff b;
	(void)state;
	backoff_init(&b, 0, 0, 0); /* first 0 counts as 1, seed 0 works */
	for (int i = 0; i < 10; i++)
		assert_true(backoff_next(&b) == 1);
	backoff_init(&b, 300, 10, 7); /* a cap below first: first */
	for (int i = 0; i < 10; i++) {
		uint64_t p = backoff_next(&b);
		assert_true(p >= 150 && p <= 300);
	}
	backoff_init(&b, 1, UINT64_MAX, 7); /* no overflow at a huge cap */
	for (int i = 0; i < 200; i++) {
		uint64_t p = backoff_next(&b);
		/* from the 64th pause on, the base is the cap */
		assert_true(i < 64 || p >= UINT64_MAX / 2);
	}
}

/* arrive: an agent whose tries all fail until the server is back at
 * up_ms (each failure answered at once) tries at 0, then after each
 * pause; returns the time of its first try at or after up_ms. pauses
 * NULL: the schedule before the helper, 200 ms doubling to 5 s, the same
 * for every agent. */
static uint64_t arrive(struct backoff *b, uint64_t up_ms)
{
	uint64_t t = 0, fixed = 200;
	while (t < up_ms) {
		if (b) {
			t += backoff_next(b);
		} else {
			t += fixed;
			fixed = fixed * 2 > 5000 ? 5000 : fixed * 2;
		}
	}
	return t;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* busiest: the most tries in any window of win_ms over sorted times */
static size_t busiest(const uint64_t *t, size_t n, uint64_t win_ms)
{
	size_t best = 0, lo = 0;
	for (size_t hi = 0; hi < n; hi++) {
		while (t[hi] - t[lo] >= win_ms)
			lo++;
		best = hi - lo + 1 > best ? hi - lo + 1 : best;
	}
	return best;
}

/* 1000 agents lose dlaunch-rdzv at the same instant (its restart) and it
 * answers again 10 s later: with the old schedule all 1000 come back in
 * the same millisecond; with the helper no 100 ms holds more than 10 % of
 * them, they spread over more than a second, and none waits longer than
 * one capped pause after the server is back. The seeds are fixed so the
 * test is repeatable. */
static void test_thousand_agents_spread(void **state)
{
	uint64_t *t = calloc(AGENTS, sizeof(*t));
	const uint64_t up = 10000;
	(void)state;
	assert_non_null(t);
	for (size_t i = 0; i < AGENTS; i++)
		t[i] = arrive(NULL, up);
	qsort(t, AGENTS, sizeof(*t), cmp_u64);
	assert_int_equal(busiest(t, AGENTS, 1), AGENTS); /* lockstep */

	for (size_t i = 0; i < AGENTS; i++) {
		struct backoff b;
		backoff_init(&b, 200, 5000, i + 1);
		t[i] = arrive(&b, up);
	}
	qsort(t, AGENTS, sizeof(*t), cmp_u64);
	size_t peak = busiest(t, AGENTS, 100);
	uint64_t p5 = t[AGENTS / 20], p95 = t[AGENTS - AGENTS / 20];
	print_message("1000 agents, server back at 10 s: busiest 100 ms %zu, "
		      "p5 %llu ms, p95 %llu ms, last %llu ms\n",
		      peak, (unsigned long long)p5, (unsigned long long)p95,
		      (unsigned long long)t[AGENTS - 1]);
	assert_true(peak <= AGENTS / 10);
	assert_true(p95 - p5 >= 1000);
	assert_true(t[0] >= up && t[AGENTS - 1] <= up + 5000);
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bounds),
	    cmocka_unit_test(test_reset_and_repeat),
	    cmocka_unit_test(test_odd_arguments),
	    cmocka_unit_test(test_thousand_agents_spread),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
