/* SPDX-License-Identifier: Apache-2.0 */
/*
 * launcher_fix.c - the helpers of launcher_fix.h.
 */
#include <stdarg.h>
#include <stddef.h>

#include "launcher_fix.h"

char *no_env[] = {NULL};

int parse(struct launcher_options *o, char **env, char *err, size_t es, ...)
{
	static char *argv[64]; /* o->program points into it */
	int argc = 0;
	va_list ap;
	va_start(ap, es);
	argv[argc++] = "dlaunch";
	for (char *a; (a = va_arg(ap, char *));)
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;
	return launcher_parse_options(argc, argv, env, o, err, es);
}
