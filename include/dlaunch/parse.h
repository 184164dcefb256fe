/* SPDX-License-Identifier: Apache-2.0 */
/*
 * parse.h - checked parsing of numbers, durations, sizes, addresses and
 * names.
 *
 * Every function rejects empty strings, leading/trailing garbage, signs
 * where none is allowed and values outside [min, max]; none uses atoi or
 * sscanf. Each returns 0, DL_EINVAL (not a number of that form) or
 * DL_ERANGE (a number, but out of range), and leaves *out untouched on error.
 */
#ifndef DLAUNCH_PARSE_H
#define DLAUNCH_PARSE_H

#include <stddef.h>
#include <stdint.h>

int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
int parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);
int parse_int(const char *s, int min, int max, int *out);
int parse_double(const char *s, double min, double max, double *out);

/* parse_bool accepts 1/0, true/false, yes/no, on/off (case-insensitive). */
int parse_bool(const char *s, int *out);

/*
 * parse_duration_ms parses "30s", "500ms", "2m", "1h", "1.5" or "0.25s".
 * A bare number is in default_unit_ms units (1000 for torchrun-style
 * seconds). Fractions are allowed; the result is rounded to the nearest
 * millisecond and must lie in [min_ms, max_ms].
 */
int parse_duration_ms(const char *s, uint64_t default_unit_ms, uint64_t min_ms,
		      uint64_t max_ms, uint64_t *out_ms);

/* parse_size_bytes parses "65536", "64k", "64KiB", "10MB", "1G" (powers of
 * 1024 for every suffix) into [min, max]. */
int parse_size_bytes(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/*
 * parse_host_port splits "host:port", "[v6addr]:port" or, when
 * default_port is non-zero, a bare "host" into host (NUL-terminated, at most
 * host_size - 1 bytes) and port. Port 0 is allowed only when allow_zero.
 */
int parse_host_port(const char *s, uint16_t default_port, int allow_zero,
		    char *host, size_t host_size, uint16_t *port);

/*
 * Names: job ids, node ids and KV keys are 1..max_len bytes of
 * [A-Za-z0-9._:-], not starting with '.' (so never "." or ".."): exactly
 * what the rendezvous server accepts, so a client refuses a name before the
 * server would. PARSE_NAME_MAX is the server's limit for all three.
 */
#define PARSE_NAME_MAX	128
#define PARSE_NAME_RULE "[A-Za-z0-9._:-], not starting with '.'"

/* parse_name_valid returns 1 when s is a valid name of at most max_len
 * bytes, else 0 (NULL is not valid). */
int parse_name_valid(const char *s, size_t max_len);

/* parse_name_sanitize turns s into a valid name in place: every byte
 * outside the name characters, and a leading '.', becomes '-' (an empty
 * s is left empty). */
void parse_name_sanitize(char *s);

#endif
