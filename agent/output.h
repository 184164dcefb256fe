/* SPDX-License-Identifier: Apache-2.0 */
/*
 * output.h - the workers' output as the agent splits, prefixes and
 * redirects it (output.c): the pure parts, exposed for tests; private to
 * agent/.
 */
#ifndef DLAUNCH_AGENT_OUTPUT_H
#define DLAUNCH_AGENT_OUTPUT_H
#include <stddef.h>

#include "dlaunch/agent.h"

/* agent_std_mask: the AGENT_STD_* bits for a local rank (0 when none). */
int agent_std_mask(const struct agent_std_spec *spec, int local_rank);

/* agent_line_splitter: see agent/output.c; exposed for tests. Feeds n bytes
 * into a line assembler holding at most cap bytes per line: each complete
 * line (without '\n'), and each cap-sized piece of a longer one, is passed
 * to emit. */
struct agent_lines {
	char *line;
	size_t len, cap;
	void (*emit)(void *arg, const char *line, size_t len);
	void *arg;
};
int agent_lines_init(struct agent_lines *l, size_t cap,
		     void (*emit)(void *arg, const char *line, size_t len),
		     void *arg);
void agent_lines_feed(struct agent_lines *l, const char *data, size_t n);
/* agent_lines_flush emits a pending partial line (at EOF). */
void agent_lines_flush(struct agent_lines *l);
void agent_lines_release(struct agent_lines *l);

#endif
