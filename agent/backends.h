/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends.h - the rendezvous backends the agent chooses from, by its
 * mode (agent.c): static (rdzv_static.c) and the dlaunch-rdzv HTTP API
 * (rdzv_http.c) here, etcd in its own folder (etcd/rdzv_etcd.h). Each
 * implements the interface of rdzv/rdzv.h, the unit below them all.
 */
#ifndef DLAUNCH_AGENT_BACKENDS_H
#define DLAUNCH_AGENT_BACKENDS_H
#include <stddef.h>

#include "etcd/rdzv_etcd.h"
#include "rdzv/rdzv.h"

int agent_rdzv_static_new(const struct agent_rdzv_params *p,
			  struct agent_rdzv **out, char *err, size_t err_size);
int agent_rdzv_http_new(const struct agent_rdzv_params *p,
			struct agent_rdzv **out, char *err, size_t err_size);

#endif
