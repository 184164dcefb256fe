/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config.c - the agent's configuration defaults (see dlaunch/agent.h).
 *
 * The only place they are written: dlaunch parses its command line onto a
 * config filled here and its --help prints them from one
 * (launcher/options.c); test_launcher checks the two agree.
 */
#include <string.h>

#include "dlaunch/agent.h"

void agent_config_init(struct agent_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->mode = AGENT_MODE_STATIC;
	cfg->nproc = 1;
	cfg->role = "default";
	cfg->shutdown_timeout_ms = 30000;
	cfg->reform_timeout_ms = 30000;
	cfg->hang_timeout_ms = 300000;
	cfg->straggler_steps = 5;
	cfg->preempt_grace_ms = 60000;
	cfg->run_id = "none";
	cfg->nnodes = 1;
	cfg->master_addr = "127.0.0.1";
	cfg->master_port = 29500;
	cfg->min_nodes = cfg->max_nodes = 1;
	cfg->join_timeout_ms = 600000;
	cfg->last_call_timeout_ms = 5000;
	cfg->heartbeat_interval_ms = 1000;
	cfg->heartbeat_timeout_ms = 5000;
	cfg->read_timeout_ms = 60000;
	cfg->etcd.key_prefix = "/dlaunch";
	cfg->redirects.all = -1;
	cfg->tee.all = -1;
}
