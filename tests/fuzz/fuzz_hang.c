/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_hang.c - libFuzzer harness for the hang analysis (common/hang*.c):
 * any JSON value as the node reports (or {"reports": ..., "members": ...})
 * gives an analysis object with its fields of the right types, and a text
 * version that stays within its buffer's bound, never a crash, a leak or
 * a sanitizer report.
 *
 * Corpus: tests/fuzz/corpus/hang (a hang on two nodes, bad shapes).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/hang.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(json_t *a)
{
	static const char *const arrays[] = {"stuck", "stragglers", "nodes",
					     "missing_nodes"};
	if (!a)
		return; /* out of memory only */
	for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++)
		if (!json_is_array(json_object_get(a, arrays[i])))
			abort();
	if (!json_is_string(json_object_get(a, "verdict")) ||
	    !json_is_string(json_object_get(a, "rule")) ||
	    !json_is_string(json_object_get(a, "reason")) ||
	    !json_is_integer(json_object_get(a, "ranks_seen")))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *in = json_loadb((const char *)data, size, 0, NULL);
	json_t *reports = in, *members = NULL, *a;
	struct buf small, big;

	if (!in)
		return 0;
	if (json_is_object(in) && json_object_get(in, "reports")) {
		reports = json_object_get(in, "reports");
		members = json_object_get(in, "members");
	}
	a = dl_hang_analyse_members(reports, members, NULL, 1800000000000LL);
	check(a);
	buf_init(&small, 200);
	buf_init(&big, 1 << 20);
	if (dl_hang_format_text(reports, a, &small) != 0 &&
	    small.len > small.max_bytes)
		abort();
	if (small.len > 200)
		abort();
	dl_hang_format_text(reports, a, &big);
	buf_release(&small);
	buf_release(&big);
	json_decref(a);
	json_decref(in);
	return 0;
}
