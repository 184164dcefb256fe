/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_options.h - the etcd backend's part of dlaunch's command line
 * (etcd_options.c), for options.c and rdzv_conf.c: --rdzv-conf's etcd
 * keys and the checks of an etcd command line as a whole.
 */
#ifndef DLAUNCH_LAUNCHER_ETCD_OPTIONS_H
#define DLAUNCH_LAUNCHER_ETCD_OPTIONS_H
#include <stddef.h>

#include "launcher.h"

/* launcher_etcd_conf_set applies one KEY=VALUE of --rdzv-conf when key is
 * an etcd key (protocol, cacert, cert, key, username, password_file,
 * key_prefix, lease_ttl): files are checked and password_file is read now,
 * into o. Returns 0; DL_EINVAL with a message naming the key; DL_ENOTFOUND
 * (no message) when key is not an etcd key. */
int launcher_etcd_conf_set(struct launcher_options *o, const char *key,
			   const char *value, char *err, size_t err_size);

/* launcher_etcd_conf_keys writes the etcd keys' names, "protocol, cacert,
 * ...", into out. */
void launcher_etcd_conf_keys(char *out, size_t size);

/* launcher_etcd_check runs once every option is read. With another backend
 * it refuses the etcd keys; with etcd it checks the endpoint list
 * (agent_etcd_endpoints_parse), that --standalone, --rdzv-ca and
 * --rdzv-token-file are not given, that cert goes with key and username
 * with password_file, and that TLS files come with an https endpoint.
 * Returns 0 or DL_EINVAL with a message. */
int launcher_etcd_check(const struct launcher_options *o, char *err,
			size_t err_size);

#endif
