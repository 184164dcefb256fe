/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_control_proto.c - libFuzzer harness for the worker control
 * channel's line layer (agent/control_proto.h): whatever a worker writes,
 * the reader splits it within its limit and the parser takes or refuses
 * each line, never crashing, leaking or reading past its input.
 *
 * The input is fed to the reader in chunks whose sizes come from the
 * input's first byte, and again in one piece: both must yield the same
 * lines and end the same way. Each line goes through the parser; a
 * parsed aborted/reformed's round goes into an abort written back.
 *
 * Corpus: tests/fuzz/corpus/control_proto (the example exchange of
 * docs/worker-protocol.md, a line per file).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "control_proto.h"
#include "dlaunch/buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* run feeds data in chunks of at most chunk bytes; returns a digest of
 * the lines seen and how it ended */
static uint64_t run(struct control_reader *r, const uint8_t *data, size_t size,
		    size_t chunk)
{
	uint64_t digest = 1469598103934665603ull;
	size_t pos = 0;
	control_reader_init(r);
	for (;;) {
		const char *line;
		size_t len, avail;
		int rc;
		while ((rc = control_reader_next(r, &line, &len)) == 1) {
			struct control_msg m;
			char err[256];
			for (size_t i = 0; i < len; i++)
				digest = (digest ^ (uint8_t)line[i]) *
					 1099511628211ull;
			digest = (digest ^ 0x100) * 1099511628211ull;
			if (control_parse_line(line, len, &m, err,
					       sizeof(err)) == 0 &&
			    (m.type == CONTROL_MSG_ABORTED ||
			     m.type == CONTROL_MSG_REFORMED)) {
				struct buf b;
				buf_init(&b, CONTROL_LINE_MAX);
				control_write_abort(&b, m.round, m.id);
				buf_release(&b);
			}
		}
		if (rc < 0)
			return digest ^ 0xdead;
		if (pos == size)
			return digest;
		{
			char *p = control_reader_space(r, &avail);
			size_t n = size - pos;
			if (n > chunk)
				n = chunk;
			if (n > avail)
				n = avail;
			memcpy(p, data + pos, n);
			control_reader_commit(r, n);
			pos += n;
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct control_reader r;
	size_t chunk;
	uint64_t a, b;
	if (size == 0)
		return 0;
	chunk = (size_t)data[0] % 64 + 1;
	data++;
	size--;
	a = run(&r, data, size, chunk);
	b = run(&r, data, size, size ? size : 1);
	if (a != b)
		abort();
	return 0;
}
