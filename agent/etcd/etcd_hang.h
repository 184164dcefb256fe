/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_hang.h - what the agent's hang diagnosis over etcd (etcd_hang.c)
 * and `dlaunch dump` over etcd (etcd_dump.c) share: reading the nodes'
 * reports of one trigger from a range of PREFIX/J/hang/report/.
 */
#ifndef DLAUNCH_AGENT_ETCD_HANG_H
#define DLAUNCH_AGENT_ETCD_HANG_H
#include <jansson.h>

#include "etcd_proto.h"

/* etcd_hang_reports_of appends to the array out every report of r whose
 * trigger id is id; a value that is not JSON, or of another trigger, is
 * skipped. */
void etcd_hang_reports_of(const struct etcd_range_response *r, const char *id,
			  json_t *out);

#endif
