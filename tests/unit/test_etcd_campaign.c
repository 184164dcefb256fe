/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_etcd_campaign.c - the campaign for a job's leader key over etcd
 * (agent/etcd/etcd_campaign.c), a table of states x events, against the
 * recorded fake etcd client (etcd_fake.h).
 *
 * One test brings a campaign into every state the way the agent does
 * (posting the events that lead there, answering its calls with etcd's
 * JSON), posts every event, and compares the state it ends in and what
 * it did to the client (fake_log) and its timers with the table written
 * out again below: a cell changed in etcd_campaign.c fails it. Others
 * follow the cases the table exists for through the loop: a lease lost
 * during a campaign, a leader deposed with a call in flight, a watch of
 * the key compacted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <event2/event.h>
#include <jansson.h>

#include "../../agent/etcd/etcd_campaign.h"
#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "etcd_fake.h"

#define HDR "{\"header\":{\"revision\":\"%d\"}"

/* the leader key's value, base64 ({"node_id":"B",...}: another agent) */
#define OTHER_VALUE "eyJub2RlX2lkIjoiQiJ9"

struct fixture {
	struct event_base *base;
	struct etcd_campaign c;
	int64_t lease_id;
	int64_t rank;
};

static int64_t rank_of(void *arg)
{
	return ((struct fixture *)arg)->rank;
}

static int setup(void **state)
{
	struct fixture *x = calloc(1, sizeof(*x));
	struct etcd_campaign_params p = {0};
	assert_non_null(x);
	x->base = event_base_new();
	assert_non_null(x->base);
	x->lease_id = 7;
	x->rank = 3;
	p.base = x->base;
	p.c = (struct etcd_client *)x->base; /* never read by the fake */
	p.prefix = "/p/job";
	p.job = "job";
	p.node_id = "A";
	p.incarnation = "i1";
	p.lease_id = &x->lease_id;
	p.node_rank = rank_of;
	p.arg = x;
	fake_reset();
	assert_int_equal(etcd_campaign_init(&x->c, &p), 0);
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *x = *state;
	etcd_campaign_release(&x->c);
	event_base_free(x->base);
	free(x);
	return 0;
}

/* restart: a fresh campaign of the fixture, IDLE, nothing recorded */
static void restart(struct fixture *x)
{
	struct etcd_campaign_params p = x->c.p;
	etcd_campaign_release(&x->c);
	fake_reset();
	x->lease_id = 7;
	assert_int_equal(etcd_campaign_init(&x->c, &p), 0);
}

/* answers of etcd's, as tests/etcd/recorded has them */
static void range_none(char *out, size_t size, int rev)
{
	snprintf(out, size, HDR ",\"count\":\"0\"}", rev);
}

static void range_other(char *out, size_t size, int rev, int lease)
{
	char key[64];
	b64("/p/job/leader", key);
	snprintf(out, size,
		 HDR ",\"kvs\":[{\"key\":\"%s\",\"create_revision\":\"%d\","
		     "\"mod_revision\":\"%d\",\"version\":\"1\",\"value\":"
		     "\"" OTHER_VALUE "\",\"lease\":\"%d\"}],\"count\":\"1\"}",
		 rev, key, rev - 1, rev - 1, lease);
}

static void txn_won(char *out, size_t size, int rev)
{
	snprintf(out, size,
		 HDR ",\"succeeded\":true,\"responses\":[{\"response_put\":"
		     "{\"header\":{\"revision\":\"%d\"}}}]}",
		 rev, rev);
}

static void txn_lost(char *out, size_t size, int rev, int with_key)
{
	char kv[512], key[64];
	b64("/p/job/leader", key);
	if (with_key)
		snprintf(kv, sizeof(kv),
			 "{\"key\":\"%s\",\"create_revision\":\"%d\","
			 "\"mod_revision\":\"%d\",\"version\":\"1\","
			 "\"value\":\"" OTHER_VALUE "\",\"lease\":\"9\"}",
			 key, rev - 1, rev - 1);
	snprintf(out, size,
		 HDR
		 ",\"succeeded\":false,\"responses\":[{\"response_range\":"
		 "{\"header\":{\"revision\":\"%d\"},%s%s%s\"count\":\"%d\"}}"
		 "]}",
		 rev, rev, with_key ? "\"kvs\":[" : "", with_key ? kv : "",
		 with_key ? "]," : "", with_key);
}

/* last: the newest call, which must be of what and still out */
static size_t last(const char *what)
{
	assert_true(ncalls > 0);
	assert_string_equal(calls[ncalls - 1].what, what);
	assert_false(calls[ncalls - 1].answered);
	assert_false(calls[ncalls - 1].canceled);
	return ncalls - 1;
}

static void answer_last(const char *what, const char *body)
{
	answer(last(what), body);
}

/* bring: the campaign into state s as the agent brings it there */
static void bring(struct fixture *x, enum etcd_campaign_state s)
{
	char body[1024];
	restart(x);
	if (s == ETCD_CAMPAIGN_IDLE)
		return;
	if (s == ETCD_CAMPAIGN_LEFT) {
		etcd_campaign_post(&x->c, ETCD_CAMPAIGN_EV_LEAVE, 0);
		return;
	}
	etcd_campaign_post(&x->c, ETCD_CAMPAIGN_EV_START, 0);
	if (s == ETCD_CAMPAIGN_READING)
		return;
	if (s == ETCD_CAMPAIGN_WATCHING) {
		range_other(body, sizeof(body), 20, 9);
		answer_last("leader key read", body);
		return;
	}
	range_none(body, sizeof(body), 20);
	answer_last("leader key read", body);
	if (s == ETCD_CAMPAIGN_CAMPAIGNING)
		return;
	txn_won(body, sizeof(body), 21);
	answer_last("campaign", body);
	if (s == ETCD_CAMPAIGN_LEADING)
		return;
	/* DEPOSED: the leader says another leads */
	etcd_campaign_post(&x->c, ETCD_CAMPAIGN_EV_DEPOSED, 0);
}

struct cell {
	enum etcd_campaign_state from;
	enum etcd_campaign_event ev;
	enum etcd_campaign_state to;
	/* what it does to the client (fake_log), then to its timers
	 * (effects()) */
	const char *effects;
};

/* Every non-empty cell, as a campaign brought there by bring() does it
 * when the event carries revision 30; every cell not listed must change
 * nothing and do nothing. The leader's start is its read of the job
 * record ("leader read"), its end the cancel of that read. */
static const struct cell cells[] = {
    {ETCD_CAMPAIGN_IDLE, ETCD_CAMPAIGN_EV_START, ETCD_CAMPAIGN_READING,
     "call(leader key read);unretry;"},
    {ETCD_CAMPAIGN_IDLE, ETCD_CAMPAIGN_EV_RETRY, ETCD_CAMPAIGN_READING,
     "call(leader key read);unretry;"},
    {ETCD_CAMPAIGN_IDLE, ETCD_CAMPAIGN_EV_KEY_FREE, ETCD_CAMPAIGN_CAMPAIGNING,
     "call(campaign);"},
    {ETCD_CAMPAIGN_IDLE, ETCD_CAMPAIGN_EV_KEY_TAKEN, ETCD_CAMPAIGN_WATCHING,
     "watch(leader watch@31);"},
    {ETCD_CAMPAIGN_IDLE, ETCD_CAMPAIGN_EV_WON, ETCD_CAMPAIGN_LEADING,
     "call(leader read);"},
    {ETCD_CAMPAIGN_IDLE, ETCD_CAMPAIGN_EV_LEAVE, ETCD_CAMPAIGN_LEFT,
     "unretry;"},

    {ETCD_CAMPAIGN_READING, ETCD_CAMPAIGN_EV_KEY_FREE,
     ETCD_CAMPAIGN_CAMPAIGNING, "call(campaign);"},
    {ETCD_CAMPAIGN_READING, ETCD_CAMPAIGN_EV_KEY_TAKEN, ETCD_CAMPAIGN_WATCHING,
     "watch(leader watch@31);"},
    {ETCD_CAMPAIGN_READING, ETCD_CAMPAIGN_EV_WON, ETCD_CAMPAIGN_LEADING,
     "call(leader read);"},
    {ETCD_CAMPAIGN_READING, ETCD_CAMPAIGN_EV_FAILED, ETCD_CAMPAIGN_IDLE,
     "retry;"},
    {ETCD_CAMPAIGN_READING, ETCD_CAMPAIGN_EV_LEAVE, ETCD_CAMPAIGN_LEFT,
     "cancel(leader key read);unretry;"},

    {ETCD_CAMPAIGN_CAMPAIGNING, ETCD_CAMPAIGN_EV_WON, ETCD_CAMPAIGN_LEADING,
     "call(leader read);"},
    {ETCD_CAMPAIGN_CAMPAIGNING, ETCD_CAMPAIGN_EV_KEY_TAKEN,
     ETCD_CAMPAIGN_WATCHING, "watch(leader watch@31);"},
    {ETCD_CAMPAIGN_CAMPAIGNING, ETCD_CAMPAIGN_EV_LOST, ETCD_CAMPAIGN_IDLE,
     "retry;"},
    {ETCD_CAMPAIGN_CAMPAIGNING, ETCD_CAMPAIGN_EV_FAILED, ETCD_CAMPAIGN_IDLE,
     "retry;"},
    /* a lease lost during a campaign: the transaction would bind the key
     * to the lease that is gone; read again, to campaign with the new */
    {ETCD_CAMPAIGN_CAMPAIGNING, ETCD_CAMPAIGN_EV_LEASE_LOST,
     ETCD_CAMPAIGN_READING, "cancel(campaign);call(leader key read);unretry;"},
    {ETCD_CAMPAIGN_CAMPAIGNING, ETCD_CAMPAIGN_EV_LEAVE, ETCD_CAMPAIGN_LEFT,
     "cancel(campaign);unretry;"},

    {ETCD_CAMPAIGN_LEADING, ETCD_CAMPAIGN_EV_DEPOSED, ETCD_CAMPAIGN_DEPOSED,
     "defer;"},
    {ETCD_CAMPAIGN_LEADING, ETCD_CAMPAIGN_EV_LEASE_LOST, ETCD_CAMPAIGN_DEPOSED,
     "defer;"},
    {ETCD_CAMPAIGN_LEADING, ETCD_CAMPAIGN_EV_LEAVE, ETCD_CAMPAIGN_LEFT,
     "cancel(leader read);unretry;"},

    {ETCD_CAMPAIGN_WATCHING, ETCD_CAMPAIGN_EV_START, ETCD_CAMPAIGN_READING,
     "unwatch(leader watch);call(leader key read);unretry;"},
    {ETCD_CAMPAIGN_WATCHING, ETCD_CAMPAIGN_EV_RETRY, ETCD_CAMPAIGN_READING,
     "unwatch(leader watch);call(leader key read);unretry;"},
    {ETCD_CAMPAIGN_WATCHING, ETCD_CAMPAIGN_EV_KEY_DELETED,
     ETCD_CAMPAIGN_WATCHING, "retry;"},
    {ETCD_CAMPAIGN_WATCHING, ETCD_CAMPAIGN_EV_KEY_WRITTEN,
     ETCD_CAMPAIGN_WATCHING, "unretry;"},
    {ETCD_CAMPAIGN_WATCHING, ETCD_CAMPAIGN_EV_WATCH_COMPACTED,
     ETCD_CAMPAIGN_DEPOSED, "defer;"},
    {ETCD_CAMPAIGN_WATCHING, ETCD_CAMPAIGN_EV_LEAVE, ETCD_CAMPAIGN_LEFT,
     "unwatch(leader watch);unretry;"},

    /* back on the loop: the leader goes, with the read it had out */
    {ETCD_CAMPAIGN_DEPOSED, ETCD_CAMPAIGN_EV_RESUME, ETCD_CAMPAIGN_READING,
     "cancel(leader read);call(leader key read);unretry;"},
    {ETCD_CAMPAIGN_DEPOSED, ETCD_CAMPAIGN_EV_LEAVE, ETCD_CAMPAIGN_LEFT,
     "cancel(leader read);unretry;"},
};

static const struct cell *find_cell(enum etcd_campaign_state s,
				    enum etcd_campaign_event e)
{
	for (size_t i = 0; i < sizeof(cells) / sizeof(cells[0]); i++)
		if (cells[i].from == s && cells[i].ev == e)
			return &cells[i];
	return NULL;
}

/* effects: what the campaign did since fake_reset, and to its timers:
 * the retry timer, armed an hour ahead before the event, is "retry;"
 * when re-armed sooner and "unretry;" when stopped; "defer;" when the
 * deferred event is active */
static void effects(struct fixture *x, char *out, size_t size)
{
	struct timeval at, now;
	const char *retry = "unretry;";
	if (evtimer_pending(x->c.retry, &at)) {
		evutil_gettimeofday(&now, NULL);
		retry = at.tv_sec - now.tv_sec > 1800 ? "" : "retry;";
	}
	snprintf(out, size, "%s%s%s", fake_log, retry,
		 event_pending(x->c.defer, EV_TIMEOUT, NULL) ? "defer;" : "");
}

/* Every state x event against the table above. */
static void test_every_cell(void **state)
{
	struct fixture *x = *state;
	char got[sizeof(fake_log) + 32], what[96];
	const struct timeval hour = {3600, 0};
	for (int s = 0; s < ETCD_CAMPAIGN_N_STATES; s++)
		for (int e = 0; e < ETCD_CAMPAIGN_N_EVENTS; e++) {
			const struct cell *c = find_cell(s, e);
			bring(x, (enum etcd_campaign_state)s);
			assert_string_equal(
			    etcd_campaign_state_name(x->c.state),
			    etcd_campaign_state_name(s));
			fake_log[0] = '\0';
			/* a timer armed on the way there is not this
			 * cell's doing; the retry is armed far ahead, to
			 * see a cell stop or re-arm it */
			event_del(x->c.defer);
			evtimer_add(x->c.retry, &hour);
			etcd_campaign_post(&x->c, (enum etcd_campaign_event)e,
					   30);
			effects(x, got, sizeof(got));
			snprintf(what, sizeof(what), "%s x %s",
				 etcd_campaign_state_name(s),
				 etcd_campaign_event_name(e));
			if (!c) {
				if (x->c.state != (enum etcd_campaign_state)s ||
				    got[0])
					fail_msg("%s: expected nothing, got "
						 "%s and '%s'",
						 what,
						 etcd_campaign_state_name(
						     x->c.state),
						 got);
				continue;
			}
			if (x->c.state != c->to || strcmp(got, c->effects) != 0)
				fail_msg("%s: expected %s and '%s', got %s "
					 "and '%s'",
					 what, etcd_campaign_state_name(c->to),
					 c->effects,
					 etcd_campaign_state_name(x->c.state),
					 got);
		}
}

/* The answers: a read that finds the key bound to this agent's own lease
 * leads at its create revision; a lost campaign watches the winner's key
 * from the revision after the answer's, or, the key gone already, waits;
 * a failed read waits. */
static void test_answers(void **state)
{
	struct fixture *x = *state;
	char body[1024];
	bring(x, ETCD_CAMPAIGN_READING);
	range_other(body, sizeof(body), 40, 7); /* lease 7: this agent's */
	answer_last("leader key read", body);
	assert_int_equal(x->c.state, ETCD_CAMPAIGN_LEADING);
	assert_non_null(x->c.leader);

	bring(x, ETCD_CAMPAIGN_CAMPAIGNING);
	txn_lost(body, sizeof(body), 50, 1);
	answer_last("campaign", body);
	assert_int_equal(x->c.state, ETCD_CAMPAIGN_WATCHING);
	assert_int_equal(watches[nwatches - 1].start_revision, 51);

	bring(x, ETCD_CAMPAIGN_CAMPAIGNING);
	txn_lost(body, sizeof(body), 50, 0);
	answer_last("campaign", body);
	assert_int_equal(x->c.state, ETCD_CAMPAIGN_IDLE);
	assert_true(evtimer_pending(x->c.retry, NULL));

	bring(x, ETCD_CAMPAIGN_READING);
	answer_error(last("leader key read"), DL_EIO, "connection refused");
	assert_int_equal(x->c.state, ETCD_CAMPAIGN_IDLE);
	assert_true(evtimer_pending(x->c.retry, NULL));

	/* no lease yet: nothing to campaign with */
	restart(x);
	x->lease_id = 0;
	etcd_campaign_post(&x->c, ETCD_CAMPAIGN_EV_START, 0);
	assert_int_equal(x->c.state, ETCD_CAMPAIGN_IDLE);
	assert_int_equal(ncalls, 0);
}

/* A follower: the leader key deleted, it campaigns after its turn (rank
 * 3: 30 ms) through the loop; a new key written meanwhile stands it
 * down. */
static void test_follower_takes_over(void **state)
{
	struct fixture *x = *state;
	struct etcd_watch_response w;
	struct etcd_event e;
	uint64_t deadline;
	bring(x, ETCD_CAMPAIGN_WATCHING);
	memset(&w, 0, sizeof(w));
	memset(&e, 0, sizeof(e));
	w.events = &e;
	w.n_events = 1;
	e.type = ETCD_EVENT_DELETE;
	watches[nwatches - 1].cb(watches[nwatches - 1].arg, ETCD_WATCH_EVENTS,
				 &w, NULL);
	assert_true(evtimer_pending(x->c.retry, NULL));
	e.type = ETCD_EVENT_PUT; /* another agent was quicker */
	watches[nwatches - 1].cb(watches[nwatches - 1].arg, ETCD_WATCH_EVENTS,
				 &w, NULL);
	assert_false(evtimer_pending(x->c.retry, NULL));
	assert_int_equal(x->c.state, ETCD_CAMPAIGN_WATCHING);
	e.type = ETCD_EVENT_DELETE;
	watches[nwatches - 1].cb(watches[nwatches - 1].arg, ETCD_WATCH_EVENTS,
				 &w, NULL);
	deadline = clock_now_ms() + 5000;
	while (x->c.state == ETCD_CAMPAIGN_WATCHING &&
	       clock_now_ms() < deadline)
		event_base_loop(x->base, EVLOOP_ONCE);
	assert_int_equal(x->c.state, ETCD_CAMPAIGN_READING);
	assert_true(watches[nwatches - 1].freed);
	last("leader key read");
}

/* The watch of the leader key compacted: it is not freed inside its own
 * callback but from the loop, and the key read again. */
static void test_watch_compacted(void **state)
{
	struct fixture *x = *state;
	size_t w;
	bring(x, ETCD_CAMPAIGN_WATCHING);
	w = nwatches - 1;
	watches[w].cb(watches[w].arg, ETCD_WATCH_COMPACTED, NULL, NULL);
	assert_int_equal(x->c.state, ETCD_CAMPAIGN_DEPOSED);
	assert_false(watches[w].freed); /* not inside its callback */
	event_base_loop(x->base, EVLOOP_NONBLOCK);
	assert_true(watches[w].freed);
	assert_int_equal(x->c.state, ETCD_CAMPAIGN_READING);
	last("leader key read");
}

/* A lease lost during a campaign, through the agent's order of events
 * (the lease says lost, then the agent asks for a campaign): the
 * transaction bound to the old lease is dropped, the key read again, and
 * the campaign that follows binds the key to the new lease. */
static void test_lease_lost_during_campaign(void **state)
{
	struct fixture *x = *state;
	char body[1024];
	size_t txn;
	bring(x, ETCD_CAMPAIGN_CAMPAIGNING);
	txn = last("campaign");
	x->lease_id = 8; /* the new lease */
	etcd_campaign_post(&x->c, ETCD_CAMPAIGN_EV_LEASE_LOST, 0);
	etcd_campaign_post(&x->c, ETCD_CAMPAIGN_EV_START, 0);
	assert_true(calls[txn].canceled);
	assert_int_equal(x->c.state, ETCD_CAMPAIGN_READING);
	assert_int_equal(pending(), 1);
	/* the old key went with the old lease: free; campaign with lease 8 */
	range_none(body, sizeof(body), 60);
	answer_last("leader key read", body);
	assert_int_equal(x->c.state, ETCD_CAMPAIGN_CAMPAIGNING);
	{
		struct etcd_compare cmp;
		struct etcd_op put;
		etcd_campaign_ops(&x->c, "/p/job/leader", "v", &cmp, &put);
		assert_int_equal(put.lease, 8);
	}
	txn_won(body, sizeof(body), 61);
	answer_last("campaign", body);
	assert_int_equal(x->c.state, ETCD_CAMPAIGN_LEADING);
	assert_int_equal(answer_left("{}"), 1); /* the leader's read only */
}

/* A leader deposed with a call in flight (its read of the job record):
 * deposed() comes from inside the leader, which is not freed there;
 * from the loop it is freed, its read canceled (none is answered into
 * freed memory: under ASan a use after free otherwise), and a new
 * campaign reads the key. A second deposed (or the lease lost) before
 * that changes nothing. */
static void test_deposed_with_call_in_flight(void **state)
{
	struct fixture *x = *state;
	size_t read;
	bring(x, ETCD_CAMPAIGN_LEADING);
	read = last("leader read");
	etcd_campaign_post(&x->c, ETCD_CAMPAIGN_EV_DEPOSED, 0);
	assert_int_equal(x->c.state, ETCD_CAMPAIGN_DEPOSED);
	assert_non_null(x->c.leader);
	assert_false(calls[read].canceled);
	etcd_campaign_post(&x->c, ETCD_CAMPAIGN_EV_DEPOSED, 0);
	etcd_campaign_post(&x->c, ETCD_CAMPAIGN_EV_LEASE_LOST, 0);
	etcd_campaign_post(&x->c, ETCD_CAMPAIGN_EV_START, 0);
	assert_int_equal(x->c.state, ETCD_CAMPAIGN_DEPOSED);
	event_base_loop(x->base, EVLOOP_NONBLOCK);
	assert_null(x->c.leader);
	assert_true(calls[read].canceled);
	assert_int_equal(x->c.state, ETCD_CAMPAIGN_READING);
	last("leader key read");
	/* only the campaign's read is left to answer */
	assert_int_equal(pending(), 1);
}

/* leave: nothing more, whatever comes after */
static void test_left_takes_nothing(void **state)
{
	struct fixture *x = *state;
	bring(x, ETCD_CAMPAIGN_CAMPAIGNING);
	etcd_campaign_post(&x->c, ETCD_CAMPAIGN_EV_LEAVE, 0);
	assert_int_equal(x->c.state, ETCD_CAMPAIGN_LEFT);
	assert_int_equal(pending(), 0);
	for (int e = 0; e < ETCD_CAMPAIGN_N_EVENTS; e++)
		etcd_campaign_post(&x->c, (enum etcd_campaign_event)e, 70);
	assert_int_equal(x->c.state, ETCD_CAMPAIGN_LEFT);
	assert_null(x->c.leader);
	assert_int_equal(pending(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_every_cell, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_answers, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_follower_takes_over, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_watch_compacted, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_lease_lost_during_campaign,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_deposed_with_call_in_flight,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_left_takes_nothing, setup,
					    teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
