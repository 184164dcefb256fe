/* SPDX-License-Identifier: Apache-2.0 */
/* clock.c - monotonic and wall clocks. */
#include "dlaunch/clock.h"

#include <stdio.h>
#include <time.h>

uint64_t clock_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t clock_now_ms(void)
{
	return clock_now_ns() / 1000000u;
}

uint64_t clock_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

char *clock_format_wall(uint64_t wall_ms, char *out, size_t out_size)
{
	time_t secs = (time_t)(wall_ms / 1000u);
	struct tm tm;
	if (out_size == 0)
		return out;
	if (!gmtime_r(&secs, &tm)) {
		snprintf(out, out_size, "?");
		return out;
	}
	snprintf(out, out_size, "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ",
		 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		 tm.tm_min, tm.tm_sec, (unsigned)(wall_ms % 1000u));
	return out;
}
