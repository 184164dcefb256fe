/* SPDX-License-Identifier: Apache-2.0 */
/* parse.c - checked parsing of numbers, durations, sizes, addresses, names. */
#include "dlaunch/parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dlaunch/error.h"

int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	/* strtoull accepts leading space and '-'; we accept neither */
	if (!s || !isdigit((unsigned char)s[0]))
		return DL_EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end != '\0')
		return DL_EINVAL;
	if (errno == ERANGE || v < min || v > max)
		return DL_ERANGE;
	*out = (uint64_t)v;
	return 0;
}

int parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
	char *end;
	long long v;
	const char *digits = s;

	if (!s)
		return DL_EINVAL;
	if (*digits == '-' || *digits == '+')
		digits++;
	if (!isdigit((unsigned char)*digits))
		return DL_EINVAL;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (*end != '\0')
		return DL_EINVAL;
	if (errno == ERANGE || v < min || v > max)
		return DL_ERANGE;
	*out = (int64_t)v;
	return 0;
}

int parse_int(const char *s, int min, int max, int *out)
{
	int64_t v;
	int rc = parse_i64(s, min, max, &v);
	if (rc == 0)
		*out = (int)v;
	return rc;
}

/* parse a plain decimal number "12", "1.5", ".5" (no exponent, no sign) and
 * return where it stopped; NULL when there is no number at s. */
static const char *parse_decimal(const char *s, double *out)
{
	const char *p = s;
	int digits = 0;
	char *end;

	while (isdigit((unsigned char)*p)) {
		p++;
		digits++;
	}
	if (*p == '.') {
		p++;
		while (isdigit((unsigned char)*p)) {
			p++;
			digits++;
		}
	}
	if (digits == 0)
		return NULL;
	errno = 0;
	*out = strtod(s, &end);
	if (end != p || errno == ERANGE || !isfinite(*out))
		return NULL;
	return p;
}

int parse_double(const char *s, double min, double max, double *out)
{
	double v;
	const char *end;
	int neg = 0;

	if (!s)
		return DL_EINVAL;
	if (*s == '-') {
		neg = 1;
		s++;
	}
	end = parse_decimal(s, &v);
	if (!end || *end != '\0')
		return DL_EINVAL;
	if (neg)
		v = -v;
	if (v < min || v > max)
		return DL_ERANGE;
	*out = v;
	return 0;
}

int parse_bool(const char *s, int *out)
{
	static const char *const yes[] = {"1", "true", "yes", "on"};
	static const char *const no[] = {"0", "false", "no", "off"};
	if (!s)
		return DL_EINVAL;
	for (size_t i = 0; i < 4; i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = 1;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = 0;
			return 0;
		}
	}
	return DL_EINVAL;
}

struct unit {
	const char *name;
	double factor;
};

/* scale a decimal with a unit suffix into an integer in [min, max] */
static int parse_scaled(const char *s, const struct unit *units,
			double bare_factor, uint64_t min, uint64_t max,
			uint64_t *out)
{
	double v, factor = -1, scaled;
	const char *end;

	if (!s)
		return DL_EINVAL;
	end = parse_decimal(s, &v);
	if (!end)
		return DL_EINVAL;
	if (*end == '\0') {
		factor = bare_factor;
	} else {
		for (const struct unit *u = units; u->name; u++) {
			if (strcasecmp(end, u->name) == 0) {
				factor = u->factor;
				break;
			}
		}
	}
	if (factor < 0)
		return DL_EINVAL;
	scaled = nearbyint(v * factor);
	/* 1.8e19 is above UINT64_MAX: compare in double before converting */
	if (!(scaled < 18446744073709551615.0) || scaled < (double)min ||
	    scaled > (double)max)
		return DL_ERANGE;
	*out = (uint64_t)scaled;
	if (*out < min || *out > max)
		return DL_ERANGE;
	return 0;
}

int parse_duration_ms(const char *s, uint64_t default_unit_ms, uint64_t min_ms,
		      uint64_t max_ms, uint64_t *out_ms)
{
	static const struct unit units[] = {
	    {"ms", 1},	    {"s", 1000},    {"sec", 1000}, {"m", 60000},
	    {"min", 60000}, {"h", 3600000}, {"us", 0.001}, {NULL, 0},
	};
	return parse_scaled(s, units, (double)default_unit_ms, min_ms, max_ms,
			    out_ms);
}

int parse_size_bytes(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	static const struct unit units[] = {
	    {"b", 1},
	    {"k", 1024.0},
	    {"kb", 1024.0},
	    {"kib", 1024.0},
	    {"m", 1024.0 * 1024},
	    {"mb", 1024.0 * 1024},
	    {"mib", 1024.0 * 1024},
	    {"g", 1024.0 * 1024 * 1024},
	    {"gb", 1024.0 * 1024 * 1024},
	    {"gib", 1024.0 * 1024 * 1024},
	    {NULL, 0},
	};
	return parse_scaled(s, units, 1, min, max, out);
}

int parse_host_port(const char *s, uint16_t default_port, int allow_zero,
		    char *host, size_t host_size, uint16_t *port)
{
	const char *h, *colon, *hend;
	uint64_t p = default_port;
	size_t hlen;
	int rc;

	if (!s || !*s)
		return DL_EINVAL;
	if (s[0] == '[') {
		h = s + 1;
		hend = strchr(h, ']');
		if (!hend)
			return DL_EINVAL;
		colon = hend[1] == ':' ? hend + 1 : NULL;
		if (!colon && hend[1] != '\0')
			return DL_EINVAL;
	} else {
		h = s;
		colon = strrchr(s, ':');
		/* a bare IPv6 address has several colons and no port */
		if (colon && strchr(s, ':') != colon)
			return DL_EINVAL;
		hend = colon ? colon : s + strlen(s);
	}
	hlen = (size_t)(hend - h);
	if (hlen == 0 || hlen >= host_size)
		return DL_EINVAL;
	for (const char *c = h; c < hend; c++) {
		if (!isalnum((unsigned char)*c) && *c != '.' && *c != '-' &&
		    *c != ':' && *c != '_' && *c != '%')
			return DL_EINVAL;
	}
	if (colon) {
		rc = parse_u64(colon + 1, 0, 65535, &p);
		if (rc)
			return rc;
	} else if (default_port == 0) {
		return DL_EINVAL;
	}
	if (p == 0 && !allow_zero)
		return DL_ERANGE;
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	*port = (uint16_t)p;
	return 0;
}

static int name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':' ||
	       c == '-';
}

int parse_name_valid(const char *s, size_t max_len)
{
	size_t n;
	if (!s || !*s || *s == '.')
		return 0;
	for (n = 0; s[n]; n++)
		if (n >= max_len || !name_char(s[n]))
			return 0;
	return 1;
}

void parse_name_sanitize(char *s)
{
	for (size_t i = 0; s[i]; i++)
		if (!name_char(s[i]) || (i == 0 && s[i] == '.'))
			s[i] = '-';
}
