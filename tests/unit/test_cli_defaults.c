/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_cli_defaults.c - dlaunch-rdzv's and dlaunch-train's --help show the
 * defaults they use: each default the table prints parses back to the
 * value a bare command line gets, and a bare command line gets exactly the
 * initialised configuration. (dlaunch's own table: test_launcher.c; that
 * the check can fail: test_opt.c.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../rendezvous/options.h"
#include "../../trainer/options.h"
#include "dlaunch/opt.h"

static void test_rdzv_defaults(void **state)
{
	struct rdzv_options d, parsed;
	char *argv[] = {"dlaunch-rdzv", NULL};
	char err[512] = "";
	int next = 0;
	(void)state;
	rdzv_options_init(&d);
	if (opt_check_defaults(rdzv_option_table(), &d, sizeof(d), err,
			       sizeof(err)) != 0)
		fail_msg("dlaunch-rdzv: %s", err);
	rdzv_options_init(&parsed);
	assert_int_equal(opt_parse(rdzv_option_table(), &parsed, 1, argv, NULL,
				   &next, err, sizeof(err)),
			 0);
	assert_memory_equal(&parsed, &d, sizeof(d));
	/* the server's own defaults are what the table starts from */
	assert_int_equal(d.cfg.max_body_bytes > 0, 1);
}

static void test_train_defaults(void **state)
{
	struct train_options d, parsed;
	char *argv[] = {"dlaunch-train", NULL};
	char err[512] = "";
	int next = 0;
	(void)state;
	train_options_init(&d);
	if (opt_check_defaults(train_option_table(), &d, sizeof(d), err,
			       sizeof(err)) != 0)
		fail_msg("dlaunch-train: %s", err);
	train_options_init(&parsed);
	assert_int_equal(opt_parse(train_option_table(), &parsed, 1, argv, NULL,
				   &next, err, sizeof(err)),
			 0);
	assert_memory_equal(&parsed, &d, sizeof(d));
	assert_string_equal(d.model, "784-256-128-10");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rdzv_defaults),
	    cmocka_unit_test(test_train_defaults),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
