/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_rdzv_api.c - libFuzzer harness over the rendezvous request handling:
 * a script of HTTP requests (method, path, query, JSON body) and clock
 * advances is fed through rdzv_api_handle into a fresh state machine;
 * parked long polls are re-checked after every step and expire at their
 * deadlines, as the HTTP layer does. Any crash, leak, sanitizer report or
 * broken invariant (an answer without a status) is a bug.
 *
 * Input: records separated by lines "%%". A record's first line is
 * "METHOD PATH[?QUERY]" or "TICK MS"; the rest is the body.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../rendezvous/api.h"
#include "dlaunch/log.h"

#define MAX_PARKED 64

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_set_level(LOG_ERROR);
	return 0;
}

static void check_answer(const struct rdzv_response *resp)
{
	if (resp->status < 200 || resp->status > 599)
		abort();
}

static void recheck(struct rdzv_api *api, struct rdzv_poll *parked,
		    size_t *nparked, uint64_t now)
{
	size_t kept = 0;
	rdzv_api_commit(api, NULL, NULL);
	for (size_t i = 0; i < *nparked; i++) {
		struct rdzv_response resp;
		int expired = now >= parked[i].deadline_ms;
		rdzv_response_init(&resp);
		if (rdzv_api_poll_check(api, &parked[i], now, expired, &resp)) {
			check_answer(&resp);
			rdzv_api_poll_end(api, &parked[i], now);
		} else {
			parked[kept++] = parked[i];
		}
		rdzv_response_release(&resp);
	}
	*nparked = kept;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rdzv_limits limits;
	struct rdzv_state *st;
	struct rdzv_api *api;
	struct rdzv_poll parked[MAX_PARKED];
	size_t nparked = 0, off = 0;
	uint64_t now = 1000;
	char *copy = malloc(size + 1);

	if (!copy)
		return 0;
	memcpy(copy, data, size);
	copy[size] = '\0';
	rdzv_limits_init(&limits);
	limits.max_jobs = 4;
	limits.max_nodes_per_job = 8;
	limits.max_keys_per_job = 4;
	st = rdzv_state_new(&limits);
	api = rdzv_api_new(st, NULL);
	while (off < size) {
		char *rec = copy + off, *end = strstr(rec, "\n%%\n");
		char *nl, *line, *sp, *q, *body;
		size_t body_len;
		if (end) {
			*end = '\0';
			off = (size_t)(end - copy) + 4;
		} else {
			off = size;
		}
		/* records may hold NUL bytes: the body keeps its length */
		nl = memchr(rec, '\n', strlen(rec));
		line = rec;
		body = nl ? nl + 1 : rec + strlen(rec);
		if (nl)
			*nl = '\0';
		body_len = strlen(body);
		if (strncmp(line, "TICK ", 5) == 0) {
			now += strtoull(line + 5, NULL, 10) % 100000;
			rdzv_api_tick(api, now);
			recheck(api, parked, &nparked, now);
			continue;
		}
		sp = strchr(line, ' ');
		if (!sp)
			continue;
		*sp = '\0';
		q = strchr(sp + 1, '?');
		if (q)
			*q++ = '\0';
		{
			struct rdzv_request req = {
			    line,     sp + 1,	  q,   body,
			    body_len, "10.0.0.1", now, 1800000000000ULL};
			struct rdzv_response resp;
			rdzv_response_init(&resp);
			rdzv_api_handle(api, &req, &resp);
			if (resp.poll.kind != RDZV_POLL_NONE) {
				if (nparked < MAX_PARKED)
					parked[nparked++] = resp.poll;
				else
					rdzv_api_poll_end(api, &resp.poll, now);
			} else {
				check_answer(&resp);
			}
			rdzv_response_release(&resp);
		}
		now += 7;
		rdzv_api_tick(api, now);
		recheck(api, parked, &nparked, now);
	}
	/* the deadlines of the state machine never lie in the past */
	if (rdzv_state_next_deadline(st) < now) {
		rdzv_api_tick(api, now);
		if (rdzv_state_next_deadline(st) < now)
			abort();
	}
	while (nparked) {
		now += RDZV_WAIT_MAX_MS;
		recheck(api, parked, &nparked, now);
	}
	rdzv_api_free(api);
	rdzv_state_free(st);
	free(copy);
	return 0;
}
