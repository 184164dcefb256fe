/* SPDX-License-Identifier: Apache-2.0 */
/*
 * launcher_fix.h - what the tests of dlaunch's command line share
 * (test_launcher, test_launcher_etcd): a command line parsed from a list
 * of words.
 */
#ifndef DLAUNCH_TEST_LAUNCHER_FIX_H
#define DLAUNCH_TEST_LAUNCHER_FIX_H

#include <stddef.h>

#include "../../launcher/launcher.h"

/* an environment with no variables */
extern char *no_env[];

/* parse: launcher_parse_options on "dlaunch" and the words given, ended
 * by NULL, with the environment env; its result. o->program points into
 * a static argv, valid until the next call. */
int parse(struct launcher_options *o, char **env, char *err, size_t es, ...);

#endif
