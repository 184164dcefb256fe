/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.h - leveled logging to stderr.
 *
 * Each line is one write(2): "2026-11-21T10:00:00.123Z prog[pid] level: msg",
 * so lines from threads and processes sharing a terminal never mix.
 * The level comes from log_set_level() or DLAUNCH_LOG_LEVEL
 * (error, warn, info, debug; default info).
 */
#ifndef DLAUNCH_LOG_H
#define DLAUNCH_LOG_H

#include <stdarg.h>

enum log_level { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

/* log_init records the program name (borrowed; must outlive logging) and
 * reads DLAUNCH_LOG_LEVEL. An invalid value is reported once and ignored. */
void log_init(const char *prog);

void log_set_level(enum log_level level);
enum log_level log_get_level(void);

/* log_level_parse maps "error"/"warn"/"info"/"debug" (case-insensitive)
 * to a level; returns 0 or DL_EINVAL. */
int log_level_parse(const char *s, enum log_level *out);

/* log_enabled tells whether a message at level would be printed. */
int log_enabled(enum log_level level);

void log_msg(enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void log_vmsg(enum log_level level, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...)                                                         \
	do {                                                                   \
		if (log_enabled(LOG_DEBUG))                                    \
			log_msg(LOG_DEBUG, __VA_ARGS__);                       \
	} while (0)

#endif
