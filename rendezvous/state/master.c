/* SPDX-License-Identifier: Apache-2.0 */
/*
 * master.c - the master address of a round (MASTER_ADDR: node rank 0's
 * announced address) must be one every member can reach. Loopback is
 * only that for members on its own host.
 */
#include "state_int.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <string.h>

#include "dlaunch/log.h"

/* addr_loopback: a member's (numeric) address is in 127/8 or ::1. */
static int addr_loopback(const char *addr)
{
	struct in_addr a4;
	struct in6_addr a6;
	if (inet_pton(AF_INET, addr, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	return inet_pton(AF_INET6, addr, &a6) == 1 &&
	       (IN6_IS_ADDR_LOOPBACK(&a6) ||
		(IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127));
}

void job_master_reachable(struct job *j)
{
	size_t pick = 0;
	struct member m;
	if (j->nmembers < 2 || !addr_loopback(j->members[0].info.addr))
		return;
	for (size_t i = 1; i < j->nmembers && !pick; i++)
		if (!addr_loopback(j->members[i].info.addr))
			pick = i;
	if (!pick)
		return;
	log_warn("job=%s round=%" PRIu64 " event=master_moved node=%s "
		 "addr=%s reason=loopback_master from_node=%s from_addr=%s",
		 j->name, j->round, j->members[pick].info.node_id,
		 j->members[pick].info.addr, j->members[0].info.node_id,
		 j->members[0].info.addr);
	m = j->members[pick];
	memmove(&j->members[1], &j->members[0], pick * sizeof(j->members[0]));
	j->members[0] = m;
	j->world_size = 0;
	for (size_t i = 0; i < j->nmembers; i++) {
		j->members[i].node_rank = (uint32_t)i;
		j->members[i].rank_offset = j->world_size;
		j->world_size += j->members[i].info.nproc;
	}
}
