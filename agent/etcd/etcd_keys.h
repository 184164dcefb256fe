/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_keys.h - the key layout of a job in etcd, in one place
 * (docs/etcd.md, "Key layout"). Every key of a job lies under one prefix,
 * KEY_PREFIX/JOB (--etcd-key-prefix, the job id):
 *
 *   PREFIX/leader          the leader key (the campaign, etcd_campaign.c)
 *   PREFIX/state           the job record (the leader writes it)
 *   PREFIX/nodes/NODE      each node's key (the node writes it)
 *   PREFIX/inbox/NODE      each node's inbox (the leader writes it)
 *   PREFIX/hang/trigger    an open hang diagnosis (etcd_hang.c)
 *   PREFIX/hang/report/NODE  NODE's report for it
 *   PREFIX/hang/last       the last diagnosis's summary (etcd_hang.c)
 *
 * Private to agent/etcd/.
 */
#ifndef DLAUNCH_AGENT_ETCD_KEYS_H
#define DLAUNCH_AGENT_ETCD_KEYS_H
#include <stddef.h>

#include "dlaunch/rdzv_state.h"

/* the longest job prefix (KEY_PREFIX/JOB, its '\0' included) */
#define ETCD_PREFIX_MAX 600
/* room for any key of a job: the prefix, the longest part name and a
 * node id */
#define ETCD_JOB_KEY_MAX (ETCD_PREFIX_MAX + RDZV_NAME_MAX + 32)

#define ETCD_KEY_LEADER	      "/leader"
#define ETCD_KEY_STATE	      "/state"
#define ETCD_KEY_NODES	      "/nodes/"
#define ETCD_KEY_INBOX	      "/inbox/"
#define ETCD_KEY_HANG_TRIGGER "/hang/trigger"
#define ETCD_KEY_HANG_REPORT  "/hang/report/"
#define ETCD_KEY_HANG_LAST    "/hang/last"
#define ETCD_KEY_HANG	      "/hang/"

/* etcd_job_prefix: KEY_PREFIX/JOB into out (ETCD_PREFIX_MAX bytes or
 * fewer); the length snprintf would have written */
int etcd_job_prefix(char *out, size_t size, const char *key_prefix,
		    const char *job);
/* etcd_key: prefix + what (one of ETCD_KEY_*) + id (NULL: none) into
 * out; the length snprintf would have written */
int etcd_key(char *out, size_t size, const char *prefix, const char *what,
	     const char *id);
/* etcd_key_id: the id that follows prefix + what in key (key_len bytes,
 * no '\0' needed) into out (size bytes, '\0' ended); NULL when key is
 * not of that form or the id is empty or does not fit */
const char *etcd_key_id(const char *key, size_t key_len, const char *prefix,
			const char *what, char *out, size_t size);

#endif
