/* SPDX-License-Identifier: Apache-2.0 */
/*
 * options.h - dlaunch-rdzv's command line (options.c): one table on the
 * shared engine (dlaunch/opt.h), parsed straight into the server's
 * configuration.
 */
#ifndef DLAUNCH_RDZV_OPTIONS_H
#define DLAUNCH_RDZV_OPTIONS_H
#include "dlaunch/opt.h"
#include "dlaunch/rdzv_server.h"

struct rdzv_options {
	struct rdzv_server_config cfg; /* parsed straight into */
	int help;
	const char *token_file;
	int log_level; /* enum log_level; -1: DLAUNCH_LOG_LEVEL or info */
};

/* rdzv_options_init: the defaults (rdzv_server_config_init's), which
 * --help shows. */
void rdzv_options_init(struct rdzv_options *o);

/* rdzv_option_table: dlaunch-rdzv's options; static, never freed. */
const struct opt_table *rdzv_option_table(void);

#endif
