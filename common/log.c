/* SPDX-License-Identifier: Apache-2.0 */
/* log.c - leveled logging, one write(2) per line. */
#include "dlaunch/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "dlaunch/clock.h"
#include "dlaunch/error.h"

static const char *log_prog = "dlaunch";
static enum log_level log_level_now = LOG_INFO;

static const char *const log_names[] = {"error", "warn", "info", "debug"};

int log_level_parse(const char *s, enum log_level *out)
{
	for (size_t i = 0; i < sizeof(log_names) / sizeof(log_names[0]); i++) {
		if (strcasecmp(s, log_names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	if (strcasecmp(s, "warning") == 0) {
		*out = LOG_WARN;
		return 0;
	}
	return DL_EINVAL;
}

void log_init(const char *prog)
{
	const char *env = getenv("DLAUNCH_LOG_LEVEL");
	enum log_level level;
	if (prog)
		log_prog = prog;
	if (env && *env) {
		if (log_level_parse(env, &level) == 0)
			log_level_now = level;
		else
			log_warn("ignoring DLAUNCH_LOG_LEVEL=%s "
				 "(use error, warn, info or debug)",
				 env);
	}
}

void log_set_level(enum log_level level)
{
	log_level_now = level;
}

enum log_level log_get_level(void)
{
	return log_level_now;
}

int log_enabled(enum log_level level)
{
	return level <= log_level_now;
}

void log_vmsg(enum log_level level, const char *fmt, va_list ap)
{
	char line[4096];
	char when[32];
	int n, m;

	if (!log_enabled(level))
		return;
	clock_format_wall(clock_wall_ms(), when, sizeof(when));
	n = snprintf(line, sizeof(line), "%s %s[%ld] %s: ", when, log_prog,
		     (long)getpid(), log_names[level]);
	if (n < 0)
		return;
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	if (m < 0)
		return;
	n += m;
	if ((size_t)n > sizeof(line) - 2) {
		/* truncated: mark it so nobody mistakes it for the whole line
		 */
		memcpy(line + sizeof(line) - 5, "...", 3);
		n = (int)sizeof(line) - 2;
	}
	line[n++] = '\n';
	/* one write so concurrent writers do not interleave within a line */
	ssize_t w = write(STDERR_FILENO, line, (size_t)n);
	(void)w;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vmsg(level, fmt, ap);
	va_end(ap);
}
