/* SPDX-License-Identifier: Apache-2.0 */
/*
 * keeper_main.c - dlaunch-keeper, the agent's keeper as a program of its
 * own (keeper_proc.h; docs/reliability.md, "What outlives an agent").
 *
 *     dlaunch-keeper CGROUP|- RECORD|-     (stdin: the agent's pipe)
 *
 * Started by the agent, never by hand: it reads the workers' notices from
 * stdin until end of file, then ends what they left, removes CGROUP and
 * RECORD and exits. Linked with libc and the common helpers only, so its
 * start costs next to nothing.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dlaunch/log.h"
#include "keeper_proc.h"

int main(int argc, char **argv)
{
	if (argc != 3 || isatty(STDIN_FILENO)) {
		fprintf(stderr,
			"dlaunch-keeper is started by dlaunch, with the "
			"agent's pipe as its stdin\n");
		return 2;
	}
	log_init("dlaunch-keeper");
	keeper_run(STDIN_FILENO, strcmp(argv[1], "-") ? argv[1] : "",
		   strcmp(argv[2], "-") ? argv[2] : "");
}
