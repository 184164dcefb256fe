/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_record.c - libFuzzer harness for the strict reader of an agent's
 * record (agent/keeper/keeper_record.c, record_parse): any bytes are
 * refused with nothing left allocated, or accepted with the invariants
 * the keeper relies on (an agent pid, group pids in 1..INT32_MAX,
 * NUL-terminated strings, at most 65536 groups); it never reads past the
 * input (copied to an exact-size buffer, so ASan sees an overrun).
 *
 * Corpus: tests/fuzz/corpus/record (a record with groups and a cgroup,
 * one without).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../agent/keeper/keeper_record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct record r;
	char *copy = malloc(size ? size : 1);

	if (copy == NULL)
		return 0;
	memcpy(copy, data, size);
	if (record_parse(copy, size, &r) != 0) {
		if (r.pgids != NULL || r.starts != NULL || r.n != 0)
			abort();
		free(copy);
		return 0;
	}
	if (r.agent <= 0 || r.n < 0 || r.n > 65536 ||
	    memchr(r.boot_id, '\0', sizeof(r.boot_id)) == NULL ||
	    memchr(r.job, '\0', sizeof(r.job)) == NULL ||
	    memchr(r.cgroup, '\0', sizeof(r.cgroup)) == NULL ||
	    r.boot_id[0] == '\0' || r.job[0] == '\0')
		abort();
	for (int i = 0; i < r.n; i++)
		if (r.pgids[i] <= 0)
			abort();
	record_release(&r);
	free(copy);
	return 0;
}
