/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_recovery.c - the node key's "recovery" (etcd_recovery.h): written
 * by the node once it knows how its workers entered the round, read by
 * the leader, and when the node writes it. Pure: no I/O.
 */
#include "etcd_recovery.h"

#include <string.h>

#include "dlaunch/error.h"
#include "dlaunch/jsonh.h"

json_t *etcd_recovery_json(uint64_t round, const char *how, const char *why)
{
	enum rdzv_recovery r;
	char text[RDZV_RECOVERY_WHY_MAX + 1];
	size_t n;
	if (!how || rdzv_recovery_parse(how, &r) != 0 ||
	    r == RDZV_RECOVERY_STARTED || round == 0)
		return NULL;
	/* whole characters only: the cut must leave valid UTF-8 */
	n = why ? strlen(why) : 0;
	if (n > RDZV_RECOVERY_WHY_MAX) {
		n = RDZV_RECOVERY_WHY_MAX;
		while (n > 0 && ((unsigned char)why[n] & 0xc0) == 0x80)
			n--;
	}
	memcpy(text, why ? why : "", n);
	text[n] = '\0';
	return json_pack("{s:I, s:s, s:s}", "round", (json_int_t)round, "how",
			 how, "why", text);
}

int etcd_recovery_parse(json_t *v, uint64_t *round, enum rdzv_recovery *how,
			const char **why, char *err, size_t err_size)
{
	json_t *o = json_object_get(v, "recovery");
	const char *s = NULL;
	*round = 0;
	*how = RDZV_RECOVERY_NONE;
	*why = "";
	if (!o || json_is_null(o))
		return 0;
	if (!json_is_object(o))
		return dl_errorf(err, err_size, DL_EINVAL,
				 "field 'recovery': not an object");
	if (jsonh_get_u64(o, "round", 1, 1, UINT64_MAX / 2, round, err,
			  err_size) ||
	    jsonh_get_str(o, "how", 1, 32, &s, err, err_size) ||
	    jsonh_get_str(o, "why", 0, RDZV_RECOVERY_WHY_MAX, why, err,
			  err_size))
		return DL_EINVAL;
	if (!*why)
		*why = "";
	if (rdzv_recovery_parse(s, how) != 0 || *how == RDZV_RECOVERY_NONE) {
		*how = RDZV_RECOVERY_NONE;
		return dl_errorf(err, err_size, DL_EINVAL,
				 "field 'recovery.how': '%s' is none of "
				 "started, in_place, restarted",
				 s);
	}
	for (const char *p = *why; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f) {
			*how = RDZV_RECOVERY_NONE;
			return dl_errorf(err, err_size, DL_EINVAL,
					 "field 'recovery.why': a control "
					 "character");
		}
	return 0;
}

uint64_t etcd_recovery_delay_ms(int nnodes, uint64_t draw)
{
	uint64_t base =
	    (uint64_t)(nnodes > 1 ? nnodes : 1) * ETCD_RECOVERY_MS_PER_NODE;
	return base + draw % base;
}
