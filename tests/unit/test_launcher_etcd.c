/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_launcher_etcd.c - dlaunch's command line with --rdzv-backend etcd:
 * the endpoint list (agent_etcd_endpoints_parse), the lease TTL, the
 * backend's spellings, and --rdzv-conf's etcd keys (with the files they
 * name: CA, certificate, key, password) and their refusal with other
 * backends.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "dlaunch/error.h"
#include "../../launcher/launcher.h"
#include "dlaunch/opt.h"
#include "launcher_fix.h"

/* ---- --rdzv-backend etcd ---- */

/* expect_list parses list and checks the URLs (NULL-terminated varargs) */
static void expect_list(const char *list, const char *protocol, ...)
{
	struct agent_etcd_endpoints eps;
	char err[256] = "";
	size_t n = 0;
	va_list ap;
	if (agent_etcd_endpoints_parse(list, protocol, &eps, err,
				       sizeof(err)) != 0)
		fail_msg("'%s' refused: %s", list, err);
	va_start(ap, protocol);
	for (const char *url; (url = va_arg(ap, const char *)); n++) {
		assert_true(n < eps.n);
		assert_string_equal(eps.url[n], url);
	}
	va_end(ap);
	assert_int_equal(eps.n, n);
}

/* expect_bad: list is refused, the message holding each of two texts */
static void expect_bad(const char *list, const char *protocol,
		       const char *text1, const char *text2)
{
	struct agent_etcd_endpoints eps;
	char err[256] = "";
	eps.n = 7;
	if (agent_etcd_endpoints_parse(list, protocol, &eps, err,
				       sizeof(err)) != DL_EINVAL)
		fail_msg("'%s' accepted", list ? list : "(null)");
	assert_int_equal(eps.n, 0);
	if (!strstr(err, text1) || (text2 && !strstr(err, text2)))
		fail_msg("'%s': message '%s' lacks '%s' / '%s'", list, err,
			 text1, text2 ? text2 : "");
}

static void test_etcd_endpoints(void **state)
{
	char list[2048], item[400];
	size_t k = 0;
	(void)state;
	expect_list("127.0.0.1:2379", NULL, "http://127.0.0.1:2379", NULL);
	expect_list("etcd-1", NULL, "http://etcd-1:2379", NULL);
	expect_list("a:1,b,http://c:3,https://d", NULL, "http://a:1",
		    "http://b:2379", "http://c:3", "https://d:2379", NULL);
	/* protocol is for bare items; a URL's scheme wins */
	expect_list("h:1,http://i:2,j", "https", "https://h:1", "http://i:2",
		    "https://j:2379", NULL);
	expect_list("h:1", "http", "http://h:1", NULL);
	expect_list("[::1]:2381,[fe80::1],https://[2001:db8::5]:7", NULL,
		    "http://[::1]:2381", "http://[fe80::1]:2379",
		    "https://[2001:db8::5]:7", NULL);
	expect_list("HTTPS://Etcd.Example:65535/", NULL,
		    "https://Etcd.Example:65535", NULL);
	/* AGENT_ETCD_MAX_ENDPOINTS members, and not one more */
	for (int i = 0; i < AGENT_ETCD_MAX_ENDPOINTS; i++)
		k += (size_t)snprintf(list + k, sizeof(list) - k, "%sh%d",
				      i ? "," : "", i);
	{
		struct agent_etcd_endpoints eps;
		char err[256];
		assert_int_equal(agent_etcd_endpoints_parse(list, NULL, &eps,
							    err, sizeof(err)),
				 0);
		assert_int_equal(eps.n, AGENT_ETCD_MAX_ENDPOINTS);
		assert_string_equal(eps.url[15], "http://h15:2379");
	}
	snprintf(list + k, sizeof(list) - k, ",h16");
	expect_bad(list, NULL, "etcd endpoint 'h16' is one too many",
		   "at most 16");

	expect_bad(NULL, NULL, "no etcd endpoint given", NULL);
	expect_bad("", NULL, "no etcd endpoint given", NULL);
	expect_bad("a,,b", NULL, "empty item (item 2", NULL);
	expect_bad(",a", NULL, "empty item (item 1", NULL);
	expect_bad("a,", NULL, "empty item (item 2", NULL);
	expect_bad("h:0", NULL, "etcd endpoint 'h:0'", "outside 1-65535");
	expect_bad("h:65536", NULL, "'h:65536'", "outside 1-65535");
	expect_bad("h:x", NULL, "'h:x'", "port that is not a number");
	expect_bad("h:12a", NULL, "'h:12a'", "port that is not a number");
	expect_bad("h:-1", NULL, "'h:-1'", "port that is not a number");
	expect_bad("h:", NULL, "'h:'", "no port");
	expect_bad("ok:1,bad:port:x", NULL, "'bad:port:x'",
		   "more than one ':'");
	expect_bad("::1", NULL, "'::1'", "in brackets");
	expect_bad("[::1", NULL, "'[::1'", "without ']'");
	expect_bad("[zz]:1", NULL, "'[zz]:1'", "no IPv6 address");
	expect_bad("[::1]x", NULL, "'[::1]x'", "after ']'");
	expect_bad(":2379", NULL, "':2379'", "has no host");
	expect_bad("http://", NULL, "'http://'", "has no host");
	expect_bad("http://h:1/v3", NULL, "'http://h:1/v3'", "path or query");
	expect_bad("h:1/", NULL, "'h:1/'", "path or query");
	expect_bad("http://h?x=1", NULL, "'http://h?x=1'", "path or query");
	expect_bad("http://h#f", NULL, "'http://h#f'", "path or query");
	expect_bad("unix:///run/etcd.sock", NULL, "'unix:///run/etcd.sock'",
		   "scheme other than http:// or https://");
	expect_bad("ftp://h", NULL, "'ftp://h'", "scheme other");
	expect_bad("user@h:1", NULL, "'user@h:1'", "user information");
	expect_bad("h p:1", NULL, "'h p:1'", "has ' '");
	expect_bad("h\x01:1", NULL, "has byte 0x01", NULL);
	expect_bad("a:1,http://a:1", NULL, "'http://a:1' is listed twice",
		   NULL);
	expect_bad("b,b:2379", NULL, "'b:2379' is listed twice", NULL);
	expect_bad("h", "ftp", "etcd protocol 'ftp' is not http or https",
		   NULL);
	expect_bad("h", "HTTPS", "protocol 'HTTPS'", NULL); /* normalised by
							       the launcher */
	/* an over-long item is named by its start */
	memset(item, 'x', sizeof(item) - 1);
	item[sizeof(item) - 1] = '\0';
	expect_bad(item, NULL, "etcd endpoint 'xxxxxxxx", "...' is too long");
	memset(item, 'y', 254);
	item[254] = '\0';
	expect_bad(item, NULL, "host name over 253 bytes", NULL);
	item[253] = '\0';
	{
		struct agent_etcd_endpoints eps;
		char err[256];
		assert_int_equal(agent_etcd_endpoints_parse(item, NULL, &eps,
							    err, sizeof(err)),
				 0);
	}
}

static void test_etcd_lease_ttl(void **state)
{
	struct agent_config cfg;
	(void)state;
	agent_config_init(&cfg);
	assert_int_equal(agent_etcd_lease_ttl_s(&cfg), 5); /* 5 s default */
	cfg.heartbeat_timeout_ms = 4001;
	assert_int_equal(agent_etcd_lease_ttl_s(&cfg), 5); /* rounded up */
	cfg.heartbeat_timeout_ms = 4000;
	assert_int_equal(agent_etcd_lease_ttl_s(&cfg), 4);
	cfg.heartbeat_timeout_ms = 1000;
	assert_int_equal(agent_etcd_lease_ttl_s(&cfg), 2); /* at least 2 */
	cfg.heartbeat_timeout_ms = 10;
	assert_int_equal(agent_etcd_lease_ttl_s(&cfg), 2);
	cfg.etcd.lease_ttl_s = 7; /* lease_ttl wins */
	assert_int_equal(agent_etcd_lease_ttl_s(&cfg), 7);
}

static void test_etcd_backend(void **state)
{
	static const char *const names[] = {"etcd", "etcd-v1", "etcd-v2",
					    "etcd-v3"};
	struct launcher_options o;
	char err[512];
	char *pet[] = {"PET_RDZV_BACKEND=etcd-v2",
		       "PET_RDZV_ENDPOINT=10.0.0.1,10.0.0.2:2381", NULL};
	(void)state;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		assert_int_equal(parse(&o, no_env, err, sizeof(err),
				       "--rdzv-backend", names[i],
				       "--rdzv-endpoint",
				       "127.0.0.1:2379,"
				       "127.0.0.1:2381",
				       "--nnodes", "2:3", "p", NULL),
				 0);
		assert_int_equal(o.rdzv_backend, LAUNCHER_BACKEND_ETCD);
		assert_int_equal(o.cfg.mode, AGENT_MODE_ETCD);
		assert_string_equal(o.cfg.endpoint,
				    "127.0.0.1:2379,127.0.0.1:2381");
		assert_string_equal(o.cfg.etcd.key_prefix, "/dlaunch");
		assert_null(o.cfg.etcd.protocol);
		assert_null(o.cfg.etcd.password);
		assert_int_equal(o.cfg.etcd.lease_ttl_s, 0);
	}
	/* from PET_* as every option; the command line still wins */
	assert_int_equal(
	    parse(&o, pet, err, sizeof(err), "--rdzv_id=j", "p", NULL), 0);
	assert_int_equal(o.cfg.mode, AGENT_MODE_ETCD);
	assert_string_equal(o.cfg.endpoint, "10.0.0.1,10.0.0.2:2381");
	assert_int_equal(parse(&o, pet, err, sizeof(err), "--rdzv-backend",
			       "c10d", "--rdzv-endpoint", "h:1", "p", NULL),
			 0);
	assert_int_equal(o.cfg.mode, AGENT_MODE_RDZV);
	assert_int_equal(o.rdzv_backend, LAUNCHER_BACKEND_C10D);
	/* the other backends keep their mode */
	assert_int_equal(parse(&o, no_env, err, sizeof(err), "--rdzv-backend",
			       "dlaunch", "--rdzv-endpoint", "h:1", "p", NULL),
			 0);
	assert_int_equal(o.cfg.mode, AGENT_MODE_RDZV);

	/* refused before anything starts */
	assert_int_equal(parse(&o, no_env, err, sizeof(err), "--rdzv-backend",
			       "etcd", "--rdzv-endpoint", "a:1,bad:port:x", "p",
			       NULL),
			 DL_EINVAL);
	assert_non_null(strstr(err, "--rdzv-endpoint: etcd endpoint "
				    "'bad:port:x'"));
	assert_int_equal(parse(&o, no_env, err, sizeof(err), "--rdzv-backend",
			       "etcd-v2", "--rdzv-endpoint", "h:99999", "p",
			       NULL),
			 DL_EINVAL);
	assert_non_null(strstr(err, "'h:99999' has a port outside 1-65535"));
	assert_int_equal(parse(&o, no_env, err, sizeof(err), "--rdzv-backend",
			       "etcd", "p", NULL),
			 DL_EINVAL);
	assert_non_null(strstr(err, "--rdzv-backend etcd needs "
				    "--rdzv-endpoint"));
	assert_int_equal(parse(&o, no_env, err, sizeof(err), "--rdzv-backend",
			       "etcd", "--standalone", "p", NULL),
			 DL_EINVAL);
	assert_non_null(strstr(err, "--standalone runs its own rendezvous and "
				    "cannot use --rdzv-backend etcd"));
	assert_int_equal(parse(&o, no_env, err, sizeof(err), "--standalone",
			       "--rdzv-backend", "etcd-v3", "--rdzv-endpoint",
			       "h", "p", NULL),
			 DL_EINVAL);
	assert_non_null(strstr(err, "cannot use --rdzv-backend etcd"));
	assert_int_equal(parse(&o, no_env, err, sizeof(err), "--rdzv-backend",
			       "etcd", "--rdzv-endpoint", "h", "--rdzv-ca",
			       "/etc/hostname", "p", NULL),
			 DL_EINVAL);
	assert_non_null(strstr(err, "--rdzv-ca is for dlaunch-rdzv; etcd takes "
				    "--rdzv-conf cacert=FILE"));
	assert_int_equal(parse(&o, no_env, err, sizeof(err), "--rdzv-backend",
			       "etcd", "--rdzv-endpoint", "h",
			       "--rdzv-token-file", "/etc/hostname", "p", NULL),
			 DL_EINVAL);
	assert_non_null(strstr(err, "--rdzv-token-file is for dlaunch-rdzv"));
}

/* the files the etcd keys read, in a fresh directory */
struct etcd_files {
	char dir[256];
	char ca[300], cert[300], key[300], pw[300], pw_crlf[300], empty[300],
	    newline_only[300], two_lines[300], nul[300], big[300], max[300];
};

static void write_file(char *path, size_t size, const char *dir,
		       const char *name, const char *data, size_t len)
{
	FILE *fp;
	snprintf(path, size, "%s/%s", dir, name);
	fp = fopen(path, "wb");
	assert_non_null(fp);
	assert_int_equal(fwrite(data, 1, len, fp), len);
	assert_int_equal(fclose(fp), 0);
}

#define WRITE(f, field, name, data, len)                                       \
	write_file((f)->field, sizeof((f)->field), (f)->dir, name, data, len)

static int etcd_files_setup(void **state)
{
	static struct etcd_files f;
	static char big[LAUNCHER_PASSWORD_MAX + 1];
	const char *tmp = getenv("TMPDIR");
	snprintf(f.dir, sizeof(f.dir), "%s/test_launcher.XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(f.dir))
		return -1;
	WRITE(&f, ca, "ca.pem", "CA\n", 3);
	WRITE(&f, cert, "cert.pem", "CERT\n", 5);
	WRITE(&f, key, "key.pem", "KEY\n", 4);
	WRITE(&f, pw, "pw", "s3cret pass\n", 12);
	WRITE(&f, pw_crlf, "pw_crlf", "crlf\r\n", 6);
	WRITE(&f, empty, "empty", "", 0);
	WRITE(&f, newline_only, "newline_only", "\n", 1);
	WRITE(&f, two_lines, "two_lines", "one\ntwo\n", 8);
	WRITE(&f, nul, "nul", "ab\0cd", 5);
	memset(big, 'p', sizeof(big));
	WRITE(&f, big, "big", big, sizeof(big)); /* 4097 bytes */
	big[LAUNCHER_PASSWORD_MAX - 1] = '\n';
	WRITE(&f, max, "max", big, LAUNCHER_PASSWORD_MAX);
	*state = &f;
	return 0;
}

static int etcd_files_teardown(void **state)
{
	struct etcd_files *f = *state;
	const char *names[] = {
	    f->ca,	     f->cert,	   f->key, f->pw,  f->pw_crlf, f->empty,
	    f->newline_only, f->two_lines, f->nul, f->big, f->max};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i][0])
			unlink(names[i]);
	return rmdir(f->dir);
}

/* conf parses --rdzv-backend etcd with --rdzv-conf value; an endpoint
 * list of https (so TLS keys are accepted) unless endpoint says another */
static int conf(struct launcher_options *o, char *err, size_t es,
		const char *endpoint, const char *value)
{
	return parse(o, no_env, err, es, "--rdzv-backend", "etcd",
		     "--rdzv-endpoint", endpoint ? endpoint : "https://e:2379",
		     "--rdzv-conf", value, "p", NULL);
}

/* conf_bad: refused, naming two texts */
#define conf_bad(o, endpoint, value, text1, text2)                             \
	do {                                                                   \
		char e_[512] = "";                                             \
		if (conf(o, e_, sizeof(e_), endpoint, value) != DL_EINVAL)     \
			fail_msg("--rdzv-conf %s accepted", value);            \
		if (!strstr(e_, text1) || !strstr(e_, text2))                  \
			fail_msg("--rdzv-conf %s: '%s' lacks '%s' / '%s'",     \
				 value, e_, text1, text2);                     \
	} while (0)

static void test_etcd_conf_keys(void **state)
{
	struct etcd_files *f = *state;
	struct launcher_options o;
	char v[2048], err[512];

	snprintf(v, sizeof(v),
		 "protocol=https,cacert=%s,cert=%s,key=%s,username=root,"
		 "password_file=%s,key_prefix=/t/jobs,lease_ttl=7,"
		 "heartbeat_timeout=3",
		 f->ca, f->cert, f->key, f->pw);
	if (conf(&o, err, sizeof(err), "e1,e2:2381", v) != 0)
		fail_msg("%s", err);
	assert_int_equal(o.cfg.mode, AGENT_MODE_ETCD);
	assert_string_equal(o.cfg.etcd.protocol, "https");
	assert_string_equal(o.cfg.etcd.cacert, f->ca);
	assert_string_equal(o.cfg.etcd.cert, f->cert);
	assert_string_equal(o.cfg.etcd.key, f->key);
	assert_string_equal(o.cfg.etcd.username, "root");
	assert_string_equal(o.cfg.etcd.password, "s3cret pass");
	assert_string_equal(o.cfg.etcd.key_prefix, "/t/jobs");
	assert_int_equal(o.cfg.etcd.lease_ttl_s, 7);
	assert_int_equal(o.cfg.heartbeat_timeout_ms, 3000);
	assert_int_equal(agent_etcd_lease_ttl_s(&o.cfg), 7);
	/* the strings are o's own, not the (parsed, then gone) copy */
	assert_ptr_equal(o.cfg.etcd.cacert, o.etcd.cacert);
	assert_ptr_equal(o.cfg.etcd.password, o.etcd.password);
	assert_ptr_equal(o.cfg.etcd.key_prefix, o.etcd.key_prefix);

	/* protocol */
	assert_int_equal(conf(&o, err, sizeof(err), "e", "protocol=HTTPS"), 0);
	assert_string_equal(o.cfg.etcd.protocol, "https");
	assert_int_equal(conf(&o, err, sizeof(err), "e", "protocol=http"), 0);
	assert_string_equal(o.cfg.etcd.protocol, "http");
	conf_bad(&o, "e", "protocol=ftp", "--rdzv-conf protocol='ftp'",
		 "is not http or https");
	conf_bad(&o, "e", "protocol=", "protocol=''", "not http or https");

	/* the files exist, are regular and readable; the message names the
	 * key and the file */
	snprintf(v, sizeof(v), "cacert=%s/nope.pem", f->dir);
	conf_bad(&o, NULL, v, "--rdzv-conf cacert: cannot read", "nope.pem");
	snprintf(v, sizeof(v), "cacert=%s", f->dir);
	conf_bad(&o, NULL, v, "--rdzv-conf cacert:", "is not a regular file");
	conf_bad(&o, NULL, "cacert=", "--rdzv-conf cacert=", "needs a file");
	snprintf(v, sizeof(v), "cert=%s/gone,key=%s", f->dir, f->key);
	conf_bad(&o, NULL, v, "--rdzv-conf cert: cannot read", "/gone'");
	snprintf(v, sizeof(v), "cert=%s,key=%s/gone", f->cert, f->dir);
	conf_bad(&o, NULL, v, "--rdzv-conf key: cannot read", "/gone'");
	if (geteuid() != 0) { /* root reads a file of mode 0 */
		assert_int_equal(chmod(f->key, 0), 0);
		snprintf(v, sizeof(v), "cert=%s,key=%s", f->cert, f->key);
		conf_bad(&o, NULL, v, "--rdzv-conf key: cannot read",
			 "Permission denied");
		assert_int_equal(chmod(f->key, 0600), 0);
	}
	snprintf(v, sizeof(v), "cacert=%s", f->ca);
	assert_int_equal(conf(&o, err, sizeof(err), NULL, v), 0);
	assert_string_equal(o.cfg.etcd.cacert, f->ca);
	assert_null(o.cfg.etcd.cert);
	/* cert and key go together */
	snprintf(v, sizeof(v), "cert=%s", f->cert);
	conf_bad(&o, NULL, v, "cert and key go together", "private key");
	snprintf(v, sizeof(v), "key=%s", f->key);
	conf_bad(&o, NULL, v, "cert and key go together", "private key");
	/* TLS files for plain http would be ignored: refused */
	snprintf(v, sizeof(v), "cacert=%s", f->ca);
	conf_bad(&o, "e1,http://e2", v, "--rdzv-conf cacert is for TLS",
		 "protocol=https");
	snprintf(v, sizeof(v), "cert=%s,key=%s", f->cert, f->key);
	conf_bad(&o, "e1", v, "--rdzv-conf cert is for TLS",
		 "no etcd endpoint uses https");
	snprintf(v, sizeof(v), "protocol=https,cacert=%s", f->ca);
	assert_int_equal(conf(&o, err, sizeof(err), "e1", v), 0);
	snprintf(v, sizeof(v), "cacert=%s", f->ca); /* one https URL */
	assert_int_equal(conf(&o, err, sizeof(err), "e1,https://e2", v), 0);

	/* username and password_file */
	snprintf(v, sizeof(v), "username=u,password_file=%s", f->pw_crlf);
	assert_int_equal(conf(&o, err, sizeof(err), NULL, v), 0);
	assert_string_equal(o.cfg.etcd.password, "crlf");
	snprintf(v, sizeof(v), "username=u,password_file=%s", f->max);
	assert_int_equal(conf(&o, err, sizeof(err), NULL, v), 0);
	assert_int_equal(strlen(o.cfg.etcd.password),
			 LAUNCHER_PASSWORD_MAX - 1);
	conf_bad(&o, NULL, "username=u",
		 "--rdzv-conf username needs "
		 "password_file",
		 "");
	snprintf(v, sizeof(v), "password_file=%s", f->pw);
	conf_bad(&o, NULL, v, "--rdzv-conf password_file needs username", "");
	snprintf(v, sizeof(v), "username=u,password_file=%s", f->empty);
	conf_bad(&o, NULL, v, "--rdzv-conf password_file:", "' is empty");
	snprintf(v, sizeof(v), "username=u,password_file=%s", f->newline_only);
	conf_bad(&o, NULL, v, "newline_only' is empty", "");
	snprintf(v, sizeof(v), "username=u,password_file=%s", f->two_lines);
	conf_bad(&o, NULL, v, "two_lines' has more than one line", "");
	snprintf(v, sizeof(v), "username=u,password_file=%s", f->nul);
	conf_bad(&o, NULL, v, "nul' has a NUL byte", "");
	snprintf(v, sizeof(v), "username=u,password_file=%s", f->big);
	conf_bad(&o, NULL, v, "big' is over 4096 bytes", "");
	snprintf(v, sizeof(v), "username=u,password_file=%s/none", f->dir);
	conf_bad(&o, NULL, v, "--rdzv-conf password_file: cannot read",
		 "/none'");
	snprintf(v, sizeof(v), "username=u\x01,password_file=%s", f->pw);
	conf_bad(&o, NULL, v, "--rdzv-conf username has a control character",
		 "");
	conf_bad(&o, NULL, "username=", "--rdzv-conf username must be 1-255",
		 "");
	{
		char lng[300] = "username=";
		memset(lng + 9, 'u', 256);
		lng[265] = '\0';
		conf_bad(&o, NULL, lng, "username must be 1-255 bytes", "");
	}

	/* key_prefix */
	assert_int_equal(conf(&o, err, sizeof(err), NULL, "key_prefix=/a"), 0);
	assert_string_equal(o.cfg.etcd.key_prefix, "/a");
	assert_int_equal(
	    conf(&o, err, sizeof(err), NULL, "key_prefix=/a/b-c_d.e/F:9"), 0);
	assert_string_equal(o.cfg.etcd.key_prefix, "/a/b-c_d.e/F:9");
	conf_bad(&o, NULL, "key_prefix=dlaunch",
		 "--rdzv-conf key_prefix="
		 "'dlaunch'",
		 "starting with '/'");
	conf_bad(&o, NULL, "key_prefix=/", "key_prefix='/'", "not ending");
	conf_bad(&o, NULL, "key_prefix=/a/", "key_prefix='/a/'", "not ending");
	conf_bad(&o, NULL, "key_prefix=/a//b", "key_prefix='/a//b'", "'//'");
	conf_bad(&o, NULL, "key_prefix=/a b", "key_prefix='/a b'",
		 "without spaces");
	conf_bad(&o, NULL, "key_prefix=/\xc3\xa9",
		 "key_prefix=", "printable ASCII");
	conf_bad(&o, NULL, "key_prefix=", "key_prefix=''", "2-255 bytes");
	{
		char lng[300] = "key_prefix=/";
		memset(lng + 12, 'k', 255);
		lng[267] = '\0';
		conf_bad(&o, NULL, lng, "key_prefix=", "2-255 bytes");
		lng[266] = '\0'; /* 255 bytes with the '/' */
		assert_int_equal(conf(&o, err, sizeof(err), NULL, lng), 0);
		assert_int_equal(strlen(o.cfg.etcd.key_prefix), 255);
	}

	/* lease_ttl: whole seconds, 2-3600, in the duration syntax */
	assert_int_equal(conf(&o, err, sizeof(err), NULL, "lease_ttl=2"), 0);
	assert_int_equal(o.cfg.etcd.lease_ttl_s, 2);
	assert_int_equal(conf(&o, err, sizeof(err), NULL, "lease_ttl=3600"), 0);
	assert_int_equal(o.cfg.etcd.lease_ttl_s, 3600);
	assert_int_equal(conf(&o, err, sizeof(err), NULL, "lease_ttl=1m"), 0);
	assert_int_equal(o.cfg.etcd.lease_ttl_s, 60);
	assert_int_equal(conf(&o, err, sizeof(err), NULL, "lease_ttl=3000ms"),
			 0);
	assert_int_equal(o.cfg.etcd.lease_ttl_s, 3);
	conf_bad(&o, NULL, "lease_ttl=1", "--rdzv-conf lease_ttl='1'",
		 "whole seconds from 2 to 3600");
	conf_bad(&o, NULL, "lease_ttl=3601", "lease_ttl='3601'", "2 to 3600");
	conf_bad(&o, NULL, "lease_ttl=2.5", "lease_ttl='2.5'", "whole seconds");
	conf_bad(&o, NULL, "lease_ttl=1500ms", "lease_ttl='1500ms'",
		 "whole seconds");
	conf_bad(&o, NULL, "lease_ttl=soon", "lease_ttl='soon'",
		 "whole seconds");
	conf_bad(&o, NULL, "lease_ttl=0", "lease_ttl='0'", "whole seconds");

	/* rerun_after: a duration, 0 (never) to a year; 30 s by default */
	assert_int_equal(conf(&o, err, sizeof(err), NULL, "lease_ttl=2"), 0);
	assert_int_equal(agent_etcd_rerun_after_ms(&o.cfg), 30000);
	assert_int_equal(conf(&o, err, sizeof(err), NULL, "rerun_after=0"), 0);
	assert_int_equal(agent_etcd_rerun_after_ms(&o.cfg), 0);
	assert_int_equal(conf(&o, err, sizeof(err), NULL, "rerun_after=10m"),
			 0);
	assert_int_equal(agent_etcd_rerun_after_ms(&o.cfg), 600000);
	assert_int_equal(conf(&o, err, sizeof(err), NULL, "rerun_after=1.5"),
			 0);
	assert_int_equal(agent_etcd_rerun_after_ms(&o.cfg), 1500);
	conf_bad(&o, NULL, "rerun_after=soon", "--rdzv-conf rerun_after='soon'",
		 "not a duration");
	conf_bad(&o, NULL, "rerun_after=400d", "rerun_after='400d'",
		 "at most a year");

	/* an unknown key lists the etcd keys too */
	conf_bad(&o, NULL, "endpoints=x", "--rdzv-conf key 'endpoints'",
		 "with --rdzv-backend etcd: protocol, cacert, cert, key, "
		 "username, password_file, key_prefix, lease_ttl, rerun_after");
}

/* the etcd keys belong to the etcd backend: any other refuses them by
 * name, whatever the order of the options or where they come from */
static void test_etcd_conf_other_backends(void **state)
{
	struct etcd_files *f = *state;
	struct launcher_options o;
	char err[512], keys[8][400], want[128], pet_conf[420];
	char *pet[] = {pet_conf, NULL};
	char *pet_backend[] = {"PET_RDZV_BACKEND=etcd", pet_conf, NULL};
	(void)state;
	snprintf(keys[0], sizeof(keys[0]), "protocol=https");
	snprintf(keys[1], sizeof(keys[1]), "cacert=%s", f->ca);
	snprintf(keys[2], sizeof(keys[2]), "cert=%s", f->cert);
	snprintf(keys[3], sizeof(keys[3]), "key=%s", f->key);
	snprintf(keys[4], sizeof(keys[4]), "username=u");
	snprintf(keys[5], sizeof(keys[5]), "password_file=%s", f->pw);
	snprintf(keys[6], sizeof(keys[6]), "key_prefix=/x");
	snprintf(keys[7], sizeof(keys[7]), "lease_ttl=5");
	for (int i = 0; i < 8; i++) {
		const char *key = strtok(strcpy(want, keys[i]), "=");
		char msg[128];
		snprintf(msg, sizeof(msg),
			 "--rdzv-conf %s is only for --rdzv-backend etcd", key);
		/* c10d, dlaunch (an endpoint alone), static, --standalone */
		assert_int_equal(parse(&o, no_env, err, sizeof(err),
				       "--rdzv-backend", "c10d",
				       "--rdzv-endpoint", "h:1", "--rdzv-conf",
				       keys[i], "p", NULL),
				 DL_EINVAL);
		assert_string_equal(err, msg);
		assert_int_equal(parse(&o, no_env, err, sizeof(err),
				       "--rdzv-endpoint", "h:1", "--rdzv-conf",
				       keys[i], "p", NULL),
				 DL_EINVAL);
		assert_string_equal(err, msg);
		assert_int_equal(parse(&o, no_env, err, sizeof(err),
				       "--rdzv-conf", keys[i], "p", NULL),
				 DL_EINVAL);
		assert_string_equal(err, msg);
		assert_int_equal(parse(&o, no_env, err, sizeof(err),
				       "--standalone", "--rdzv-conf", keys[i],
				       "p", NULL),
				 DL_EINVAL);
		assert_string_equal(err, msg);
	}
	/* --rdzv-conf before --rdzv-backend, and from PET_RDZV_CONF */
	assert_int_equal(parse(&o, no_env, err, sizeof(err), "--rdzv-conf",
			       "key_prefix=/x,lease_ttl=4", "--rdzv-backend",
			       "etcd", "--rdzv-endpoint", "e", "p", NULL),
			 0);
	assert_string_equal(o.cfg.etcd.key_prefix, "/x");
	assert_int_equal(o.cfg.etcd.lease_ttl_s, 4);
	snprintf(pet_conf, sizeof(pet_conf),
		 "PET_RDZV_CONF=username=u,password_file=%s", f->pw);
	assert_int_equal(parse(&o, pet, err, sizeof(err), "--rdzv-backend",
			       "etcd-v3", "--rdzv-endpoint", "e", "p", NULL),
			 0);
	assert_string_equal(o.cfg.etcd.password, "s3cret pass");
	assert_int_equal(parse(&o, pet, err, sizeof(err), "--rdzv-endpoint",
			       "h:1", "p", NULL),
			 DL_EINVAL);
	assert_string_equal(err,
			    "--rdzv-conf username is only for --rdzv-backend "
			    "etcd");
	/* PET_RDZV_CONF and --rdzv-conf together: the keys add up */
	assert_int_equal(parse(&o, pet_backend, err, sizeof(err),
			       "--rdzv-endpoint", "e", "--rdzv-conf",
			       "key_prefix=/y", "p", NULL),
			 0);
	assert_string_equal(o.cfg.etcd.username, "u");
	assert_string_equal(o.cfg.etcd.key_prefix, "/y");
	snprintf(pet_conf, sizeof(pet_conf), "PET_RDZV_CONF=lease_ttl=1");
	assert_int_equal(parse(&o, pet_backend, err, sizeof(err),
			       "--rdzv-endpoint", "e", "p", NULL),
			 DL_EINVAL);
	assert_non_null(strstr(err, "PET_RDZV_CONF"));
	assert_non_null(strstr(err, "lease_ttl='1'"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_etcd_endpoints),
	    cmocka_unit_test(test_etcd_lease_ttl),
	    cmocka_unit_test(test_etcd_backend),
	    cmocka_unit_test_setup_teardown(
		test_etcd_conf_keys, etcd_files_setup, etcd_files_teardown),
	    cmocka_unit_test_setup_teardown(test_etcd_conf_other_backends,
					    etcd_files_setup,
					    etcd_files_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
