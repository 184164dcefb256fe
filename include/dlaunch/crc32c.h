/* SPDX-License-Identifier: Apache-2.0 */
/*
 * crc32c.h - CRC-32C (Castagnoli), the checksum of journal records and
 * checkpoints. Uses the SSE4.2 instruction when the CPU has it.
 */
#ifndef DLAUNCH_CRC32C_H
#define DLAUNCH_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* crc32c extends crc (0 to start) over n bytes and returns the result. */
uint32_t crc32c(uint32_t crc, const void *data, size_t n);

#endif
