/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_options.c - the etcd backend's part of dlaunch's command line (see
 * etcd_options.h): --rdzv-conf's etcd keys, one table of small setters,
 * and the checks of an etcd command line as a whole. The endpoint list
 * itself is read by agent_etcd_endpoints_parse, as the backend reads it.
 *
 * Each key is parsed when it is read (a file is checked, password_file
 * read); whether the backend is etcd is known only once every option is
 * read (--rdzv-backend may come after --rdzv-conf, or from
 * PET_RDZV_BACKEND), so o->etcd.given records which keys were given and
 * launcher_etcd_check refuses them for another backend.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dlaunch/agent.h"
#include "dlaunch/error.h"
#include "dlaunch/fsutil.h"
#include "launcher.h"
#include "dlaunch/parse.h"
#include "etcd_options.h"

/* the keys; each one's index is its bit in o->etcd.given */
enum etcd_conf_index {
	ETCD_CONF_PROTOCOL,
	ETCD_CONF_CACERT,
	ETCD_CONF_CERT,
	ETCD_CONF_KEY,
	ETCD_CONF_USERNAME,
	ETCD_CONF_PASSWORD_FILE,
	ETCD_CONF_KEY_PREFIX,
	ETCD_CONF_LEASE_TTL,
	ETCD_CONF_RERUN_AFTER,
	ETCD_CONF_N
};

struct etcd_conf_key;
typedef int (*etcd_conf_set_fn)(struct launcher_options *o,
				const struct etcd_conf_key *k, const char *val,
				char *err, size_t es);

/* key: its name; buf: the launcher_options buffer a file name is kept in
 * and field: the cfg.etcd pointer set to it (the files only). */
struct etcd_conf_key {
	const char *key;
	etcd_conf_set_fn set;
	size_t buf, buf_size, field;
};

static int set_etcd_protocol(struct launcher_options *o,
			     const struct etcd_conf_key *k, const char *val,
			     char *err, size_t es)
{
	if (strcasecmp(val, "http") == 0)
		o->cfg.etcd.protocol = "http";
	else if (strcasecmp(val, "https") == 0)
		o->cfg.etcd.protocol = "https";
	else
		return dl_errorf(err, es, DL_EINVAL,
				 "--rdzv-conf %s='%s' is not http or https",
				 k->key, val);
	return 0;
}

/* check_file: path is a regular file this process can open for reading
 * (O_NONBLOCK: a FIFO does not hang the check). */
static int check_file(const char *key, const char *path, char *err, size_t es)
{
	struct stat st;
	int fd, ok;
	if (!*path)
		return dl_errorf(err, es, DL_EINVAL,
				 "--rdzv-conf %s= needs a file name", key);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return dl_errorf(err, es, DL_EINVAL,
				 "--rdzv-conf %s: cannot read '%s': %s", key,
				 path, strerror(errno));
	ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
	close(fd);
	if (!ok)
		return dl_errorf(err, es, DL_EINVAL,
				 "--rdzv-conf %s: '%s' is not a regular file",
				 key, path);
	return 0;
}

static int set_etcd_file(struct launcher_options *o,
			 const struct etcd_conf_key *k, const char *val,
			 char *err, size_t es)
{
	char *buf = (char *)o + k->buf;
	int rc = check_file(k->key, val, err, es);
	if (rc)
		return rc;
	snprintf(buf, k->buf_size, "%s", val);
	*(const char **)((char *)o + k->field) = buf;
	return 0;
}

static int set_etcd_username(struct launcher_options *o,
			     const struct etcd_conf_key *k, const char *val,
			     char *err, size_t es)
{
	size_t n = strlen(val);
	if (n == 0 || n >= sizeof(o->etcd.username))
		return dl_errorf(err, es, DL_EINVAL,
				 "--rdzv-conf %s must be 1-%zu bytes", k->key,
				 sizeof(o->etcd.username) - 1);
	for (const char *c = val; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return dl_errorf(err, es, DL_EINVAL,
					 "--rdzv-conf %s has a control "
					 "character",
					 k->key);
	memcpy(o->etcd.username, val, n + 1);
	o->cfg.etcd.username = o->etcd.username;
	return 0;
}

/* set_etcd_password_file reads the password now: one line (its newline,
 * or CRLF, is not part of it), 1 byte to 4 KiB, no NUL. The file's copy
 * in memory is wiped. */
static int set_etcd_password_file(struct launcher_options *o,
				  const struct etcd_conf_key *k,
				  const char *val, char *err, size_t es)
{
	char *data = NULL;
	const char *why = NULL;
	size_t len = 0;
	int rc = check_file(k->key, val, err, es);
	if (rc)
		return rc;
	rc = fs_read_file(val, LAUNCHER_PASSWORD_MAX, &data, &len);
	if (rc == DL_ELIMIT)
		return dl_errorf(err, es, DL_EINVAL,
				 "--rdzv-conf %s: '%s' is over %d bytes",
				 k->key, val, LAUNCHER_PASSWORD_MAX);
	if (rc)
		return dl_errorf(err, es, DL_EINVAL,
				 "--rdzv-conf %s: cannot read '%s': %s", k->key,
				 val, dl_strerror(rc));
	if (len > 0 && data[len - 1] == '\n')
		data[--len] = '\0';
	if (len > 0 && data[len - 1] == '\r')
		data[--len] = '\0';
	if (len == 0)
		why = "is empty";
	else if (strlen(data) != len)
		why = "has a NUL byte";
	else if (strpbrk(data, "\r\n"))
		why = "has more than one line";
	if (why)
		rc = dl_errorf(err, es, DL_EINVAL, "--rdzv-conf %s: '%s' %s",
			       k->key, val, why);
	else {
		memcpy(o->etcd.password, data, len + 1);
		o->cfg.etcd.password = o->etcd.password;
	}
	explicit_bzero(data, len);
	free(data);
	return rc;
}

/* key_prefix: an etcd key path, "/a" or "/a/b", printable without spaces,
 * so that <prefix>/<job>/... keys are well formed. */
static int set_etcd_key_prefix(struct launcher_options *o,
			       const struct etcd_conf_key *k, const char *val,
			       char *err, size_t es)
{
	size_t n = strlen(val);
	int ok = n >= 2 && n < sizeof(o->etcd.key_prefix) && val[0] == '/' &&
		 val[n - 1] != '/' && !strstr(val, "//");
	for (const char *c = val; ok && *c; c++)
		ok = *c > 0x20 && *c < 0x7f;
	if (!ok)
		return dl_errorf(err, es, DL_EINVAL,
				 "--rdzv-conf %s='%s' must be like /dlaunch or "
				 "/a/b: 2-%zu bytes of printable ASCII without "
				 "spaces, starting with '/', not ending with "
				 "'/', no '//'",
				 k->key, val, sizeof(o->etcd.key_prefix) - 1);
	memcpy(o->etcd.key_prefix, val, n + 1);
	o->cfg.etcd.key_prefix = o->etcd.key_prefix;
	return 0;
}

/* lease_ttl: etcd grants leases in whole seconds */
static int set_etcd_lease_ttl(struct launcher_options *o,
			      const struct etcd_conf_key *k, const char *val,
			      char *err, size_t es)
{
	uint64_t ms;
	if (parse_duration_ms(val, 1000, 2000, 3600000, &ms) != 0 ||
	    ms % 1000 != 0)
		return dl_errorf(err, es, DL_EINVAL,
				 "--rdzv-conf %s='%s' is not whole seconds "
				 "from 2 to 3600 (such as 10 or 10s)",
				 k->key, val);
	o->cfg.etcd.lease_ttl_s = (unsigned)(ms / 1000);
	return 0;
}

/* rerun_after: as dlaunch-rdzv's --rerun-after (0: never) */
static int set_etcd_rerun_after(struct launcher_options *o,
				const struct etcd_conf_key *k, const char *val,
				char *err, size_t es)
{
	uint64_t ms;
	if (parse_duration_ms(val, 1000, 0, UINT64_C(86400000) * 365, &ms))
		return dl_errorf(err, es, DL_EINVAL,
				 "--rdzv-conf %s='%s' is not a duration of "
				 "at most a year (seconds, or with a unit "
				 "such as 10m; 0: never rerun)",
				 k->key, val);
	o->cfg.etcd.rerun_after_ms = ms;
	o->cfg.etcd.rerun_after_set = 1;
	return 0;
}

#define ETCD_FILE(name)                                                        \
	.set = set_etcd_file,                                                  \
	.buf = offsetof(struct launcher_options, etcd.name),                   \
	.buf_size = sizeof(((struct launcher_options *)0)->etcd.name),         \
	.field = offsetof(struct launcher_options, cfg.etcd.name)

static const struct etcd_conf_key etcd_conf_keys[ETCD_CONF_N] = {
    [ETCD_CONF_PROTOCOL] = {.key = "protocol", .set = set_etcd_protocol},
    [ETCD_CONF_CACERT] = {.key = "cacert", ETCD_FILE(cacert)},
    [ETCD_CONF_CERT] = {.key = "cert", ETCD_FILE(cert)},
    [ETCD_CONF_KEY] = {.key = "key", ETCD_FILE(key)},
    [ETCD_CONF_USERNAME] = {.key = "username", .set = set_etcd_username},
    [ETCD_CONF_PASSWORD_FILE] = {.key = "password_file",
				 .set = set_etcd_password_file},
    [ETCD_CONF_KEY_PREFIX] = {.key = "key_prefix", .set = set_etcd_key_prefix},
    [ETCD_CONF_LEASE_TTL] = {.key = "lease_ttl", .set = set_etcd_lease_ttl},
    [ETCD_CONF_RERUN_AFTER] = {.key = "rerun_after",
			       .set = set_etcd_rerun_after},
};

#define ETCD_GIVEN(o, i) (((o)->etcd.given >> (i)) & 1u)

int launcher_etcd_conf_set(struct launcher_options *o, const char *key,
			   const char *value, char *err, size_t err_size)
{
	for (size_t i = 0; i < ETCD_CONF_N; i++) {
		const struct etcd_conf_key *k = &etcd_conf_keys[i];
		int rc;
		if (strcmp(key, k->key) != 0)
			continue;
		rc = k->set(o, k, value, err, err_size);
		if (rc == 0)
			o->etcd.given |= 1u << i;
		return rc;
	}
	return DL_ENOTFOUND;
}

void launcher_etcd_conf_keys(char *out, size_t size)
{
	size_t n = 0;
	out[0] = '\0';
	for (size_t i = 0; i < ETCD_CONF_N && n < size; i++)
		n += (size_t)snprintf(out + n, size - n, "%s%s", i ? ", " : "",
				      etcd_conf_keys[i].key);
}

int launcher_etcd_check(const struct launcher_options *o, char *err, size_t es)
{
	const struct agent_config *cfg = &o->cfg;
	struct agent_etcd_endpoints eps;
	char msg[512];
	int https = 0;

	if (o->rdzv_backend != LAUNCHER_BACKEND_ETCD) {
		for (size_t i = 0; i < ETCD_CONF_N; i++)
			if (ETCD_GIVEN(o, i))
				return dl_errorf(err, es, DL_EINVAL,
						 "--rdzv-conf %s is only for "
						 "--rdzv-backend etcd",
						 etcd_conf_keys[i].key);
		return 0;
	}
	if (o->standalone)
		return dl_errorf(err, es, DL_EINVAL,
				 "--standalone runs its own rendezvous and "
				 "cannot use --rdzv-backend etcd; drop one of "
				 "them");
	if (!cfg->endpoint)
		return dl_errorf(err, es, DL_EINVAL,
				 "--rdzv-backend etcd needs --rdzv-endpoint "
				 "(the etcd members: HOST[:PORT],...)");
	if (o->token_file)
		return dl_errorf(err, es, DL_EINVAL,
				 "--rdzv-token-file is for dlaunch-rdzv; etcd "
				 "takes --rdzv-conf username=...,"
				 "password_file=...");
	if (cfg->ca_file)
		return dl_errorf(err, es, DL_EINVAL,
				 "--rdzv-ca is for dlaunch-rdzv; etcd takes "
				 "--rdzv-conf cacert=FILE");
	if (agent_etcd_endpoints_parse(cfg->endpoint, cfg->etcd.protocol, &eps,
				       msg, sizeof(msg)) != 0)
		return dl_errorf(err, es, DL_EINVAL, "--rdzv-endpoint: %s",
				 msg);
	if (ETCD_GIVEN(o, ETCD_CONF_CERT) != ETCD_GIVEN(o, ETCD_CONF_KEY))
		return dl_errorf(err, es, DL_EINVAL,
				 "--rdzv-conf cert and key go together (the "
				 "client certificate and its private key)");
	if (ETCD_GIVEN(o, ETCD_CONF_USERNAME) &&
	    !ETCD_GIVEN(o, ETCD_CONF_PASSWORD_FILE))
		return dl_errorf(err, es, DL_EINVAL,
				 "--rdzv-conf username needs password_file (a "
				 "file holding the password)");
	if (ETCD_GIVEN(o, ETCD_CONF_PASSWORD_FILE) &&
	    !ETCD_GIVEN(o, ETCD_CONF_USERNAME))
		return dl_errorf(err, es, DL_EINVAL,
				 "--rdzv-conf password_file needs username");
	for (size_t i = 0; i < eps.n; i++)
		https |= strncmp(eps.url[i], "https://", 8) == 0;
	/* a CA or client certificate for plain http would be ignored: the
	 * user meant TLS */
	for (size_t i = ETCD_CONF_CACERT; i <= ETCD_CONF_KEY && !https; i++)
		if (ETCD_GIVEN(o, i))
			return dl_errorf(err, es, DL_EINVAL,
					 "--rdzv-conf %s is for TLS, but no "
					 "etcd endpoint uses https (add "
					 "protocol=https or give https:// "
					 "endpoints)",
					 etcd_conf_keys[i].key);
	return 0;
}
