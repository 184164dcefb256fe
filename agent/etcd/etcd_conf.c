/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_conf.c - the etcd mode's settings as both dlaunch's command line and
 * the etcd backend read them (see dlaunch/agent.h): the --rdzv-endpoint
 * list of etcd members turned into base URLs, and the lease TTL the agent
 * asks for. Pure functions, no I/O: the launcher refuses a bad list before
 * anything starts, and the backend gets the same URLs from the same text.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "dlaunch/agent.h"
#include "dlaunch/error.h"
#include "dlaunch/parse.h"

#define ETCD_DEFAULT_PORT 2379
#define ETCD_HOST_MAX	  253 /* the longest DNS name */
#define ITEM_SHOWN	  64  /* bytes of a bad item a message quotes */

/* bad_item writes "etcd endpoint 'ITEM' WHY" (a long item cut short) and
 * returns DL_EINVAL. */
static int bad_item(char *err, size_t es, const char *item, size_t len,
		    const char *why)
{
	return dl_errorf(err, es, DL_EINVAL, "etcd endpoint '%.*s%s' %s",
			 (int)(len > ITEM_SHOWN ? ITEM_SHOWN : len), item,
			 len > ITEM_SHOWN ? "..." : "", why);
}

static int host_char(char c)
{
	return isalnum((unsigned char)c) || c == '.' || c == '-' || c == '_';
}

/* split_scheme finds "SCHEME://" at the start of item: *scheme becomes
 * "http" or "https" (the URL's, else the default) and *rest what follows. */
static int split_scheme(const char *item, size_t len, const char *def,
			const char **scheme, const char **rest, char *err,
			size_t es)
{
	const char *sep = strstr(item, "://");
	*scheme = def;
	*rest = item;
	if (!sep)
		return 0;
	if (sep - item == 4 && strncasecmp(item, "http", 4) == 0)
		*scheme = "http";
	else if (sep - item == 5 && strncasecmp(item, "https", 5) == 0)
		*scheme = "https";
	else
		return bad_item(err, es, item, len,
				"has a scheme other than http:// or https://");
	*rest = sep + 3;
	return 0;
}

/* check_host checks an authority's host: an IPv6 address (v6) or a DNS
 * name or IPv4 address. */
static int check_host(const char *host, int v6, const char *item, size_t len,
		      char *err, size_t es)
{
	unsigned char addr[16];
	char why[96];
	if (!*host)
		return bad_item(err, es, item, len, "has no host");
	if (v6) {
		if (inet_pton(AF_INET6, host, addr) != 1)
			return bad_item(err, es, item, len,
					"has no IPv6 address between [ and ]");
		return 0;
	}
	if (strlen(host) > ETCD_HOST_MAX)
		return bad_item(err, es, item, len,
				"has a host name over 253 bytes");
	for (const char *c = host; *c; c++) {
		if (host_char(*c))
			continue;
		if (isprint((unsigned char)*c))
			snprintf(why, sizeof(why),
				 "has '%c', which is not allowed in a host "
				 "(letters, digits, '.', '-', '_')",
				 *c);
		else
			snprintf(why, sizeof(why),
				 "has byte 0x%02x, which is not allowed in a "
				 "host",
				 (unsigned)(unsigned char)*c);
		return bad_item(err, es, item, len, why);
	}
	return 0;
}

/* parse_item turns one item (len bytes, not NUL-terminated in the list)
 * into "scheme://host:port" in url (AGENT_ETCD_URL_MAX bytes). */
static int parse_item(const char *item, size_t len, const char *def_scheme,
		      char *url, char *err, size_t es)
{
	char buf[AGENT_ETCD_URL_MAX];
	const char *scheme, *rest, *port_text = NULL;
	char *host, *end;
	uint64_t port = ETCD_DEFAULT_PORT;
	size_t n;
	int v6 = 0, rc;

	if (len >= sizeof(buf) - sizeof("https://"))
		return bad_item(err, es, item, len, "is too long");
	memcpy(buf, item, len);
	buf[len] = '\0';
	rc = split_scheme(buf, len, def_scheme, &scheme, &rest, err, es);
	if (rc)
		return rc;
	host = buf + (rest - buf);
	n = strlen(host);
	/* "http://h:2379/" is a common way to write a base URL */
	if (rest != buf && n > 0 && host[n - 1] == '/')
		host[--n] = '\0';
	if (strpbrk(host, "/?#"))
		return bad_item(err, es, item, len,
				"has a path or query after the address (give "
				"only [http(s)://]HOST[:PORT])");
	if (strchr(host, '@'))
		return bad_item(err, es, item, len,
				"has user information (use --rdzv-conf "
				"username=...,password_file=...)");
	if (host[0] == '[') {
		v6 = 1;
		end = strchr(host, ']');
		if (!end)
			return bad_item(err, es, item, len,
					"has '[' without ']'");
		*end = '\0';
		host++;
		if (end[1] == ':')
			port_text = end + 2;
		else if (end[1] != '\0')
			return bad_item(err, es, item, len,
					"has something other than :PORT "
					"after ']'");
	} else {
		end = strchr(host, ':');
		if (end && strchr(end + 1, ':'))
			return bad_item(err, es, item, len,
					"has more than one ':' (an IPv6 "
					"address goes in brackets: "
					"[::1]:2379)");
		if (end) {
			*end = '\0';
			port_text = end + 1;
		}
	}
	rc = check_host(host, v6, item, len, err, es);
	if (rc)
		return rc;
	if (port_text && !*port_text)
		return bad_item(err, es, item, len, "has ':' but no port");
	if (port_text) {
		rc = parse_u64(port_text, 1, 65535, &port);
		if (rc == DL_ERANGE)
			return bad_item(err, es, item, len,
					"has a port outside 1-65535");
		if (rc)
			return bad_item(err, es, item, len,
					"has a port that is not a number");
	}
	if ((size_t)snprintf(url, AGENT_ETCD_URL_MAX, "%s://%s%s%s:%u", scheme,
			     v6 ? "[" : "", host, v6 ? "]" : "",
			     (unsigned)port) >= AGENT_ETCD_URL_MAX)
		return bad_item(err, es, item, len, "is too long");
	return 0;
}

/* agent_etcd_endpoints_parse (dlaunch/agent.h): besides the forms it
 * takes, a URL's scheme wins over protocol, one trailing '/' of a URL is
 * dropped, and these are refused: an empty item, a port outside 1-65535 or
 * not a number, a path, query or user info, an IPv6 address without
 * brackets, a character outside a host name's, an item too long for
 * AGENT_ETCD_URL_MAX, the same member twice, more than
 * AGENT_ETCD_MAX_ENDPOINTS items. out->n is 0 after an error. */
int agent_etcd_endpoints_parse(const char *list, const char *protocol,
			       struct agent_etcd_endpoints *out, char *err,
			       size_t err_size)
{
	const char *item, *comma;
	size_t len, i;
	int rc;

	out->n = 0;
	if (protocol && strcmp(protocol, "http") != 0 &&
	    strcmp(protocol, "https") != 0)
		return dl_errorf(err, err_size, DL_EINVAL,
				 "etcd protocol '%.32s' is not http or https",
				 protocol);
	if (!list || !*list)
		return dl_errorf(err, err_size, DL_EINVAL,
				 "no etcd endpoint given (HOST[:PORT],...)");
	for (item = list;; item = comma + 1) {
		comma = strchr(item, ',');
		len = comma ? (size_t)(comma - item) : strlen(item);
		if (len == 0) {
			rc = dl_errorf(err, err_size, DL_EINVAL,
				       "etcd endpoint list has an empty item "
				       "(item %zu: two commas in a row, or one "
				       "at an end)",
				       out->n + 1);
			goto fail;
		}
		if (out->n == AGENT_ETCD_MAX_ENDPOINTS) {
			char why[64];
			snprintf(why, sizeof(why),
				 "is one too many (at most %d endpoints)",
				 AGENT_ETCD_MAX_ENDPOINTS);
			rc = bad_item(err, err_size, item, len, why);
			goto fail;
		}
		rc = parse_item(item, len, protocol ? protocol : "http",
				out->url[out->n], err, err_size);
		if (rc)
			goto fail;
		for (i = 0; i < out->n; i++)
			if (strcmp(out->url[i], out->url[out->n]) == 0) {
				rc = bad_item(err, err_size, item, len,
					      "is listed twice");
				goto fail;
			}
		out->n++;
		if (!comma)
			return 0;
	}
fail:
	out->n = 0;
	return rc;
}

/* agent_etcd_lease_ttl_s (dlaunch/agent.h): the lease plays the part of
 * heartbeat_timeout (a node silent that long is gone), in the whole
 * seconds etcd grants. */
unsigned agent_etcd_lease_ttl_s(const struct agent_config *cfg)
{
	uint64_t s;
	if (cfg->etcd.lease_ttl_s)
		return cfg->etcd.lease_ttl_s;
	s = (cfg->heartbeat_timeout_ms + 999) / 1000;
	if (s < 2)
		s = 2;
	return s > 0xffffffffu ? 0xffffffffu : (unsigned)s;
}

uint64_t agent_etcd_rerun_after_ms(const struct agent_config *cfg)
{
	return cfg->etcd.rerun_after_set ? cfg->etcd.rerun_after_ms
					 : AGENT_ETCD_RERUN_AFTER_MS;
}
