/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdzv_etcd.h - what the etcd folder offers the agent: the rendezvous
 * backend over etcd (docs/etcd.md), one implementation of the interface
 * of ../rdzv/rdzv.h, which is all of the agent it builds on. The agent
 * chooses it by its mode (../backends.h).
 */
#ifndef DLAUNCH_AGENT_RDZV_ETCD_H
#define DLAUNCH_AGENT_RDZV_ETCD_H
#include <stddef.h>

#include "../rdzv/rdzv.h"

/* agent_rdzv_etcd_new makes the etcd backend of one node from p (all
 * borrowed; answers go to p->loop) and its etcd client. *out is the
 * caller's (ops->free). An error code, the reason in err, for a
 * configuration it cannot use or want of memory. */
int agent_rdzv_etcd_new(const struct agent_rdzv_params *p,
			struct agent_rdzv **out, char *err, size_t err_size);

#endif
