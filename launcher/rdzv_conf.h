/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdzv_conf.h - the value of dlaunch's --rdzv-conf (rdzv_conf.c), for
 * options.c and for the rendezvous options of dlaunch status and dump
 * (rdzv_cli.c).
 */
#ifndef DLAUNCH_LAUNCHER_RDZV_CONF_H
#define DLAUNCH_LAUNCHER_RDZV_CONF_H
#include <stddef.h>

#include "launcher.h"

/* the longest timeout --rdzv-conf and --progress-timeout take: a week */
#define LAUNCHER_DURATION_MAX_MS (86400000ULL * 7)

/* launcher_rdzv_conf_apply applies a whole --rdzv-conf value (K=V,...)
 * to o, as the option does; the message names the bad pair. */
int launcher_rdzv_conf_apply(struct launcher_options *o, const char *v,
			     char *err, size_t err_size);

/* launcher_rdzv_conf_format writes o's durations as --rdzv-conf takes
 * them ("join_timeout=600s,...") into out, for --help (progress_timeout
 * has its own option, node_id is computed at start). */
void launcher_rdzv_conf_format(const struct launcher_options *o, char *out,
			       size_t size);

#endif
