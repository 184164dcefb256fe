/* SPDX-License-Identifier: Apache-2.0 */
/*
 * output.c - workers' stdout/stderr: nonblocking pipes read on the loop.
 *
 * Each stream of each worker is a pipe whose read end is watched by a
 * persistent read event; the agent never blocks on it. What is read goes,
 * unchanged, to the stream's log file (with --redirects/--tee) and, split
 * into lines prefixed "[rankN]: ", to the console (unless redirected or
 * filtered out). Lines longer than AGENT_LINE_MAX_BYTES are cut into
 * pieces on the console; the log file always keeps the exact bytes. The
 * last bytes of stderr stay in memory for the failure report. Every read
 * counts as progress of the worker (progress.c).
 */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlaunch/buf.h"
#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/fsutil.h"
#include "dlaunch/log.h"
#include "dlaunch/parse.h"
#include "internal.h"
#include "output.h"

#define READ_CHUNK 65536

int agent_lines_init(struct agent_lines *l, size_t cap,
		     void (*emit)(void *arg, const char *line, size_t len),
		     void *arg)
{
	l->line = malloc(cap);
	if (!l->line)
		return DL_ENOMEM;
	l->len = 0;
	l->cap = cap;
	l->emit = emit;
	l->arg = arg;
	return 0;
}

void agent_lines_feed(struct agent_lines *l, const char *data, size_t n)
{
	while (n > 0) {
		const char *nl = memchr(data, '\n', n);
		size_t seg = nl ? (size_t)(nl - data) : n;
		size_t room = l->cap - l->len;
		if (seg > room) {
			/* the line is longer than the cap: emit a piece */
			memcpy(l->line + l->len, data, room);
			l->len = l->cap;
			l->emit(l->arg, l->line, l->len);
			l->len = 0;
			data += room;
			n -= room;
			continue;
		}
		memcpy(l->line + l->len, data, seg);
		l->len += seg;
		data += seg;
		n -= seg;
		if (nl) {
			l->emit(l->arg, l->line, l->len);
			l->len = 0;
			data++;
			n--;
		}
	}
}

void agent_lines_flush(struct agent_lines *l)
{
	if (l->len) {
		l->emit(l->arg, l->line, l->len);
		l->len = 0;
	}
}

void agent_lines_release(struct agent_lines *l)
{
	free(l->line);
	l->line = NULL;
	l->len = l->cap = 0;
}

int agent_std_parse(const char *s, struct agent_std_spec *spec, char *err,
		    size_t err_size)
{
	char copy[1024], *save = NULL, *tok;
	int v;
	memset(spec, 0, sizeof(*spec));
	spec->all = -1;
	if (!s || !*s || strlen(s) >= sizeof(copy)) {
		snprintf(err, err_size, "empty or too long std spec");
		return DL_EINVAL;
	}
	if (parse_int(s, 0, 3, &v) == 0) {
		spec->all = v;
		return 0;
	}
	snprintf(copy, sizeof(copy), "%s", s);
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(tok, ':');
		int rank, mask;
		if (!colon) {
			snprintf(err, err_size,
				 "'%s' is not RANK:MODE (mode 0-3)", tok);
			return DL_EINVAL;
		}
		*colon = '\0';
		if (parse_int(tok, 0, AGENT_MAX_NPROC - 1, &rank) != 0 ||
		    parse_int(colon + 1, 0, 3, &mask) != 0) {
			snprintf(err, err_size,
				 "'%s:%s' is not RANK:MODE (mode 0-3)", tok,
				 colon + 1);
			return DL_EINVAL;
		}
		if (spec->n ==
		    (int)(sizeof(spec->rank) / sizeof(spec->rank[0]))) {
			snprintf(err, err_size, "too many ranks in std spec");
			return DL_ELIMIT;
		}
		spec->rank[spec->n] = rank;
		spec->mask[spec->n] = mask;
		spec->n++;
	}
	return 0;
}

int agent_std_mask(const struct agent_std_spec *spec, int local_rank)
{
	for (int i = 0; i < spec->n; i++)
		if (spec->rank[i] == local_rank)
			return spec->mask[i];
	return spec->all > 0 ? spec->all : 0;
}

int agent_ranks_parse(const char *s, int *ranks, int max, int *n, char *err,
		      size_t err_size)
{
	char copy[4096], *save = NULL, *tok;
	int count = 0;
	if (!s || !*s || strlen(s) >= sizeof(copy)) {
		snprintf(err, err_size, "empty or too long rank list");
		return DL_EINVAL;
	}
	snprintf(copy, sizeof(copy), "%s", s);
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		int r;
		if (parse_int(tok, 0, 1 << 24, &r) != 0) {
			snprintf(err, err_size, "'%s' is not a rank", tok);
			return DL_EINVAL;
		}
		if (count == max) {
			snprintf(err, err_size, "more than %d ranks", max);
			return DL_ELIMIT;
		}
		ranks[count++] = r;
	}
	*n = count;
	return 0;
}

/* console_line writes one prefixed line with a single write(2), so lines
 * of different workers never mix. */
static void console_line(void *arg, const char *line, size_t len)
{
	struct agent_stream *s = arg;
	char head[32];
	struct buf b;
	int fd = s->which == AGENT_STD_OUT ? STDOUT_FILENO : STDERR_FILENO;
	int hl = snprintf(head, sizeof(head), "[rank%d]: ", s->w->rank);
	buf_init(&b, AGENT_LINE_MAX_BYTES + sizeof(head) + 2);
	if (buf_append(&b, head, (size_t)hl) == 0 &&
	    buf_append(&b, line, len) == 0 && buf_append(&b, "\n", 1) == 0)
		fs_write_all(fd, b.data, b.len);
	buf_release(&b);
}

static void keep_tail(struct agent_worker *w, const char *data, size_t n)
{
	if (n >= AGENT_TAIL_BYTES) {
		data += n - AGENT_TAIL_BYTES;
		n = AGENT_TAIL_BYTES;
	}
	for (size_t i = 0; i < n; i++) {
		w->tail[w->tail_pos] = data[i];
		w->tail_pos = (w->tail_pos + 1) % AGENT_TAIL_BYTES;
	}
	w->tail_len += n;
	if (w->tail_len > AGENT_TAIL_BYTES)
		w->tail_len = AGENT_TAIL_BYTES;
}

static void stream_eof(struct agent_stream *s)
{
	struct agent_worker *w = s->w;
	if (s->console)
		agent_lines_flush(&s->lines);
	output_close(s);
	workers_check_finished(w);
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct agent_stream *s = arg;
	char chunk[READ_CHUNK];
	ssize_t n;
	(void)what;
	n = read(fd, chunk, sizeof(chunk));
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		log_warn("reading output of rank %d: %s", s->w->rank,
			 strerror(errno));
		stream_eof(s);
		return;
	}
	if (n == 0) {
		stream_eof(s);
		return;
	}
	if (s->w->a->cfg.progress_timeout_ms)
		s->w->last_progress_ms = clock_now_ms();
	if (s->file_fd >= 0 &&
	    fs_write_all(s->file_fd, chunk, (size_t)n) != 0) {
		log_warn("writing log file of rank %d: %s; no longer logging "
			 "it",
			 s->w->rank, strerror(errno));
		close(s->file_fd);
		s->file_fd = -1;
	}
	if (s->which == AGENT_STD_ERR)
		keep_tail(s->w, chunk, (size_t)n);
	if (s->console)
		agent_lines_feed(&s->lines, chunk, (size_t)n);
}

static int console_allowed(const struct agent *a, int local_rank)
{
	if (a->cfg.n_ranks_filter == 0)
		return 1;
	for (int i = 0; i < a->cfg.n_ranks_filter; i++)
		if (a->cfg.ranks_filter[i] == local_rank)
			return 1;
	return 0;
}

/*
 * output_open creates the pipe of one stream of w: *child_fd is the write
 * end for the child (close-on-exec; the spawn dups it), the read end is
 * watched on the loop. Opens the log file when the user named a --log-dir
 * (the design's promise: it keeps every attempt's output), and when the
 * stream is redirected or teed (into a temporary directory otherwise). The
 * directory <log_dir>/attempt_K/rank_R must exist.
 */
int output_open(struct agent_worker *w, int which, int *child_fd)
{
	struct agent *a = w->a;
	struct agent_stream *s = &w->out[which == AGENT_STD_OUT ? 0 : 1];
	int p[2], redirect, tee;
	char path[PATH_MAX];

	s->w = w;
	s->which = which;
	s->fd = -1;
	s->file_fd = -1;
	redirect = agent_std_mask(&a->cfg.redirects, w->local_rank) & which;
	tee = agent_std_mask(&a->cfg.tee, w->local_rank) & which;
	/* as in torchrun, a teed stream reaches the console even when it is
	 * also redirected */
	s->console = (!redirect || tee) && console_allowed(a, w->local_rank);
	if (redirect || tee || !a->log_dir_temp) {
		if (snprintf(path, sizeof(path), "%s/attempt_%d/rank_%d/%s.log",
			     a->log_dir, a->fsm.r.restart_count, w->rank,
			     which == AGENT_STD_OUT ? "stdout" : "stderr") >=
		    (int)sizeof(path)) {
			log_error("log directory path too long");
			return DL_ELIMIT;
		}
		s->file_fd =
		    open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (s->file_fd < 0) {
			log_error("cannot open log file %s: %s", path,
				  strerror(errno));
			return DL_EIO;
		}
	}
	if (agent_lines_init(&s->lines, AGENT_LINE_MAX_BYTES, console_line,
			     s) != 0)
		return DL_ENOMEM;
	if (pipe2(p, O_CLOEXEC) != 0) {
		log_error("cannot create a pipe: %s", strerror(errno));
		return DL_ESYS;
	}
	fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
	s->fd = p[0];
	s->ev = event_new(a->base, s->fd, EV_READ | EV_PERSIST, on_readable, s);
	if (!s->ev) {
		close(p[0]);
		close(p[1]);
		s->fd = -1;
		return DL_ENOMEM;
	}
	event_add(s->ev, NULL);
	*child_fd = p[1];
	return 0;
}

/* output_close stops watching s and closes its descriptors. */
void output_close(struct agent_stream *s)
{
	if (s->ev) {
		event_free(s->ev);
		s->ev = NULL;
	}
	if (s->fd >= 0) {
		close(s->fd);
		s->fd = -1;
	}
	if (s->file_fd >= 0) {
		close(s->file_fd);
		s->file_fd = -1;
	}
	agent_lines_release(&s->lines);
}
