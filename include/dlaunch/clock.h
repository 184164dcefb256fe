/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clock.h - time sources. Every timeout uses the monotonic clock; wall time
 * is for logs and reports only.
 */
#ifndef DLAUNCH_CLOCK_H
#define DLAUNCH_CLOCK_H

#include <stddef.h>
#include <stdint.h>

uint64_t clock_now_ms(void);  /* CLOCK_MONOTONIC, milliseconds */
uint64_t clock_now_ns(void);  /* CLOCK_MONOTONIC, nanoseconds */
uint64_t clock_wall_ms(void); /* CLOCK_REALTIME, ms since the epoch */

/* clock_format_wall writes wall_ms as "2026-11-21T10:00:00.123Z" (UTC) into
 * out (at least 25 bytes); returns out. */
char *clock_format_wall(uint64_t wall_ms, char *out, size_t out_size);

#endif
