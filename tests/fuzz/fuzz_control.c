/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_control.c - libFuzzer harness for dlaunch-train's control-channel
 * reader (control_parse): any bytes are refused with an error or accepted
 * with members that keep the protocol's invariants (rank below world
 * size, a port, NUL-terminated strings); it never reads past the input
 * (the input is copied to an exact-size buffer, so ASan sees an overrun)
 * and never recurses without bound.
 *
 * Corpus: tests/fuzz/corpus/control (one line of each message type).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../trainer/control.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct control_msg m;
	char err[256];
	char *copy = malloc(size ? size : 1);

	if (copy == NULL)
		return 0;
	memcpy(copy, data, size);
	if (control_parse(copy, size, &m, err, sizeof(err)) == 0) {
		if (memchr(m.reason, '\0', sizeof(m.reason)) == NULL ||
		    memchr(m.m.master_addr, '\0', sizeof(m.m.master_addr)) ==
			NULL ||
		    memchr(m.m.store_prefix, '\0', sizeof(m.m.store_prefix)) ==
			NULL)
			abort();
		if (m.type == CONTROL_MEMBERSHIP &&
		    (m.m.rank >= m.m.world_size || m.m.master_port == 0 ||
		     m.m.local_rank >= m.m.local_world_size ||
		     m.m.master_addr[0] == '\0' || m.m.round != m.round))
			abort();
	} else if (memchr(err, '\0', sizeof(err)) == NULL || err[0] == '\0') {
		abort(); /* every refusal says why */
	}
	free(copy);
	return 0;
}
