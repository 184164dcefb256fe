/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dist_fault.c - the collective library's test hooks, set by
 * DLAUNCH_DIST_FAULT for the rank DLAUNCH_DIST_FAULT_RANK names (dist.h):
 *
 *   CALL:STEP[:kill]    the CALL-th ring all-reduce fails (or the process
 *                       kills itself) once it has sent its plan step STEP
 *                       (the failure itself: dist_tcp.c, fault_due)
 *   CALL:sleep|loop|read  the rank hangs before its CALL-th all-reduce, as
 *                       a rank stuck outside a collective would: what the
 *                       flight recorder and the agent's hang diagnosis
 *                       are tested with
 *
 * Both apply to the first group a process forms only: after a re-form the
 * ranks are numbered anew, and the hook must not strike a second rank.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dist_priv.h"
#include "dlaunch/log.h"
#include "dlaunch/parse.h"

#define HANG_SLEEP_S 3600

static const struct {
	const char *name;
	enum dist_hang kind;
} hang_kinds[] = {
    {"sleep", DIST_HANG_SLEEP},
    {"loop", DIST_HANG_LOOP},
    {"read", DIST_HANG_READ},
};

static enum dist_hang hang_kind_of(const char *word)
{
	for (size_t i = 0; i < sizeof(hang_kinds) / sizeof(hang_kinds[0]); i++)
		if (strcmp(word, hang_kinds[i].name) == 0)
			return hang_kinds[i].kind;
	return DIST_HANG_NONE;
}

static const char *hang_name(enum dist_hang kind)
{
	for (size_t i = 0; i < sizeof(hang_kinds) / sizeof(hang_kinds[0]); i++)
		if (hang_kinds[i].kind == kind)
			return hang_kinds[i].name;
	return "none";
}

void dist_fault_config(struct dist *d)
{
	const char *v = getenv("DLAUNCH_DIST_FAULT");
	const char *who = getenv("DLAUNCH_DIST_FAULT_RANK");
	char buf[64], *colon, *kill_at;
	int call, step, rank = 0;
	enum dist_hang hang = DIST_HANG_NONE;

	static atomic_int seen;

	if (v == NULL || *v == '\0' || atomic_exchange(&seen, 1))
		return;
	if (who && *who && parse_int(who, 0, DIST_MAX_WORLD, &rank) != 0)
		rank = -1;
	snprintf(buf, sizeof(buf), "%s", v);
	kill_at = strstr(buf, ":kill");
	if (kill_at && kill_at[5] == '\0')
		*kill_at = '\0';
	else
		kill_at = NULL;
	colon = strchr(buf, ':');
	if (colon) {
		*colon = '\0';
		hang = kill_at ? DIST_HANG_NONE : hang_kind_of(colon + 1);
	}
	if (rank < 0 || colon == NULL ||
	    parse_int(buf, 1, INT32_MAX, &call) != 0 ||
	    (hang == DIST_HANG_NONE &&
	     parse_int(colon + 1, 0, INT32_MAX, &step) != 0)) {
		log_warn("dist: ignoring DLAUNCH_DIST_FAULT='%s' (want "
			 "CALL:STEP[:kill] or CALL:sleep|loop|read, and "
			 "DLAUNCH_DIST_FAULT_RANK)",
			 v);
		return;
	}
	if (rank != d->rank)
		return;
	if (hang != DIST_HANG_NONE) {
		d->hang_kind = hang;
		d->hang_call = call;
		return;
	}
	d->fault_call = call;
	d->fault_step = step;
	d->fault_kill = kill_at != NULL;
}

/* hang_sleep: an hour, whatever signals come meanwhile */
static void hang_sleep(void)
{
	struct timespec left = {HANG_SLEEP_S, 0};

	while (nanosleep(&left, &left) != 0 && errno == EINTR)
		;
}

static void hang_loop(void)
{
	volatile unsigned long spins = 0;

	for (;;)
		spins = spins + 1;
}

/* hang_read: blocks for ever on a pipe whose write end this process
 * keeps open (so no end of file comes) */
static void hang_read(void)
{
	int p[2];
	char c;

	if (pipe(p) != 0) {
		log_warn("dist: DLAUNCH_DIST_FAULT: no pipe (%s); sleeping "
			 "instead",
			 strerror(errno));
		hang_sleep();
		return;
	}
	for (;;)
		if (read(p[0], &c, 1) < 0 && errno != EINTR)
			break;
	close(p[0]);
	close(p[1]);
}

void dist_fault_before_all_reduce(struct dist *d)
{
	if (d->hang_kind == DIST_HANG_NONE ||
	    ++d->all_reduce_calls != d->hang_call)
		return;
	log_warn("dist: rank %d: DLAUNCH_DIST_FAULT: hanging (%s) before "
		 "all-reduce %d",
		 d->rank, hang_name(d->hang_kind), d->hang_call);
	switch (d->hang_kind) {
	case DIST_HANG_SLEEP: hang_sleep(); break;
	case DIST_HANG_LOOP: hang_loop(); break;
	case DIST_HANG_READ: hang_read(); break;
	case DIST_HANG_NONE: break;
	}
}
