/* SPDX-License-Identifier: Apache-2.0 */
/*
 * journal.c - the rendezvous journal and snapshot (see journal.h).
 *
 * Records are small JSON documents behind a checksummed binary header, so
 * a torn write (crash mid-append) or a flipped bit is detected and the
 * tail from there on is discarded rather than misread. Every append is
 * followed by fdatasync before the caller answers its client: an answer
 * a client saw is never lost by a crash.
 */
#include "journal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dlaunch/buf.h"
#include "dlaunch/crc32c.h"
#include "dlaunch/error.h"
#include "dlaunch/fsutil.h"
#include "dlaunch/jsonh.h"
#include "dlaunch/log.h"

#define MAGIC	       "RDZJ"
#define HEADER_BYTES   20
#define FILE_MAX_BYTES (2ull * 1024 * 1024 * 1024)
#define COMPACT_MIN    (4u * 1024 * 1024)
#define JSON_DEPTH     32

struct rdzv_journal {
	char *journal_path;
	char *snapshot_path;
	int fd;
	int lock_fd;
	uint64_t seq;	/* last sequence number written or replayed */
	uint64_t bytes; /* size of the journal file */
	uint64_t snapshot_bytes;
	uint64_t compactions;
	int broken; /* an append failed: stop appending, say so once */
};

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* add_record frames payload (a JSON document) as one record into out. */
static int add_record(struct buf *out, uint64_t seq, json_t *payload)
{
	struct buf body;
	unsigned char hdr[HEADER_BYTES];
	uint32_t crc;
	int rc;

	buf_init(&body, RDZV_JOURNAL_RECORD_MAX);
	rc = payload ? jsonh_dump(payload, &body) : DL_ENOMEM;
	if (rc)
		goto out;
	memcpy(hdr, MAGIC, 4);
	put32(hdr + 4, (uint32_t)body.len);
	put64(hdr + 12, seq);
	crc = crc32c(0, hdr + 12, 8);
	crc = crc32c(crc, body.data, body.len);
	put32(hdr + 8, crc);
	rc = buf_append(out, hdr, sizeof(hdr));
	if (!rc)
		rc = buf_append(out, body.data, body.len);
out:
	buf_release(&body);
	return rc;
}

static json_t *kv_payload(const char *job, const char *key, const void *data,
			  size_t len)
{
	size_t enc_len = 4 * ((len + 2) / 3) + 1;
	unsigned char *enc = malloc(enc_len);
	json_t *v;
	if (!enc)
		return NULL;
	EVP_EncodeBlock(enc, data, (int)len);
	v = json_pack("{s:s, s:s, s:s, s:s}", "t", "kv", "job", job, "key", key,
		      "value", (const char *)enc);
	free(enc);
	return v;
}

/* apply replays one record's payload into st. */
static int apply(struct rdzv_state *st, const char *data, size_t len,
		 uint64_t now_ms, char *err, size_t err_size)
{
	json_t *v = NULL;
	const char *t = NULL, *job = NULL, *key = NULL, *val = NULL;
	int rc = jsonh_parse(data, len, JSON_DEPTH, &v, err, err_size);
	if (rc)
		return rc;
	rc = jsonh_get_str(v, "t", 1, 16, &t, err, err_size);
	if (rc)
		goto out;
	if (strcmp(t, "job") == 0) {
		json_t *saved = json_object_get(v, "job");
		rc = json_is_object(saved)
			 ? rdzv_job_restore(st, saved, now_ms, err, err_size)
			 : DL_ECORRUPT;
	} else if (strcmp(t, "del") == 0) {
		rc = jsonh_get_str(v, "job", 1, RDZV_NAME_MAX, &job, err,
				   err_size);
		if (!rc)
			rdzv_job_delete(st, job);
	} else if (strcmp(t, "kv") == 0) {
		size_t vlen, pad = 0, n;
		unsigned char *dec;
		rc = jsonh_get_str(v, "job", 1, RDZV_NAME_MAX, &job, err,
				   err_size);
		if (!rc)
			rc = jsonh_get_str(v, "key", 1, RDZV_NAME_MAX, &key,
					   err, err_size);
		if (!rc)
			rc = jsonh_get_str(v, "value", 1,
					   RDZV_JOURNAL_RECORD_MAX, &val, err,
					   err_size);
		if (rc)
			goto out;
		vlen = strlen(val);
		if (vlen % 4) {
			rc = DL_ECORRUPT;
			goto out;
		}
		while (pad < 2 && vlen > pad && val[vlen - 1 - pad] == '=')
			pad++;
		dec = malloc(vlen / 4 * 3 + 1);
		if (!dec) {
			rc = DL_ENOMEM;
			goto out;
		}
		n = (size_t)EVP_DecodeBlock(dec, (const unsigned char *)val,
					    (int)vlen);
		/* a missing job is fine: it was deleted later */
		rdzv_kv_put(st, job, key, dec, n - pad, err, err_size);
		free(dec);
	} else if (strcmp(t, "snap") != 0) {
		snprintf(err, err_size, "unknown record type %s", t);
		rc = DL_ECORRUPT;
	}
out:
	json_decref(v);
	return rc;
}

/*
 * replay applies the records of data with a sequence number above min_seq;
 * *good is where the intact records end, *last_seq the highest seen.
 */
static int replay(struct rdzv_state *st, const char *name,
		  const unsigned char *data, size_t len, uint64_t min_seq,
		  uint64_t now_ms, size_t *good, uint64_t *last_seq)
{
	size_t off = 0;
	char err[256];
	while (off < len) {
		uint32_t plen, crc;
		uint64_t seq;
		if (len - off < HEADER_BYTES || memcmp(data + off, MAGIC, 4)) {
			log_warn("%s: torn or damaged record at offset %zu; "
				 "ignoring the last %zu bytes",
				 name, off, len - off);
			break;
		}
		plen = get32(data + off + 4);
		crc = get32(data + off + 8);
		seq = get64(data + off + 12);
		if (plen > RDZV_JOURNAL_RECORD_MAX ||
		    plen > len - off - HEADER_BYTES ||
		    crc32c(crc32c(0, data + off + 12, 8),
			   data + off + HEADER_BYTES, plen) != crc) {
			log_warn("%s: torn or damaged record at offset %zu "
				 "(checksum); ignoring the last %zu bytes",
				 name, off, len - off);
			break;
		}
		if (seq > min_seq) {
			err[0] = '\0';
			int rc =
			    apply(st, (const char *)data + off + HEADER_BYTES,
				  plen, now_ms, err, sizeof(err));
			if (rc) {
				log_error("%s: cannot replay record %" PRIu64
					  " at offset %zu: %s",
					  name, seq, off, err);
				return DL_ECORRUPT;
			}
		}
		if (seq > *last_seq)
			*last_seq = seq;
		off += HEADER_BYTES + plen;
	}
	*good = off;
	return 0;
}

static int snapshot_kv(void *ctx, const char *key, const void *data, size_t len)
{
	void **args = ctx;
	json_t *v = kv_payload(args[1], key, data, len);
	int rc = add_record(args[0], *(uint64_t *)args[2], v);
	json_decref(v);
	return rc;
}

/* compact writes the whole state as DIR/snapshot, then empties the
 * journal: the snapshot's sequence number makes the order safe if we
 * crash in between (older journal records are skipped on replay). */
static int compact(struct rdzv_journal *jr, const struct rdzv_state *st)
{
	struct buf out;
	uint64_t seq = jr->seq;
	json_t *v;
	int rc;

	buf_init(&out, FILE_MAX_BYTES);
	v = json_pack("{s:s, s:I}", "t", "snap", "seq", (json_int_t)seq);
	rc = add_record(&out, seq, v);
	json_decref(v);
	for (size_t i = 0; !rc && i < rdzv_job_count(st); i++) {
		const char *name = rdzv_job_name_at(st, i);
		void *args[3] = {&out, (void *)name, &seq};
		v = json_pack("{s:s, s:o}", "t", "job", "job",
			      rdzv_job_save(st, name));
		rc = add_record(&out, seq, v);
		json_decref(v);
		if (!rc)
			rc = rdzv_kv_each(st, name, snapshot_kv, args);
	}
	if (!rc)
		rc = fs_write_file_atomic(jr->snapshot_path, out.data, out.len,
					  0600);
	if (!rc) {
		jr->snapshot_bytes = out.len;
		if (ftruncate(jr->fd, 0) != 0 || fdatasync(jr->fd) != 0)
			rc = DL_EIO;
		else
			jr->bytes = 0;
	}
	buf_release(&out);
	if (rc) {
		log_error("cannot compact the journal into %s: %s",
			  jr->snapshot_path, dl_strerror(rc));
		return rc;
	}
	jr->compactions++;
	jr->broken = 0; /* the journal file took a truncate and an fsync */
	log_info("event=journal_compacted snapshot_bytes=%" PRIu64
		 " seq=%" PRIu64,
		 jr->snapshot_bytes, seq);
	return 0;
}

static int append(struct rdzv_journal *jr, json_t *payload)
{
	struct buf rec;
	int rc;
	if (jr->broken)
		return DL_EIO;
	buf_init(&rec, RDZV_JOURNAL_RECORD_MAX + HEADER_BYTES);
	rc = add_record(&rec, jr->seq + 1, payload);
	if (!rc)
		rc = fs_write_all(jr->fd, rec.data, rec.len);
	if (!rc && fdatasync(jr->fd) != 0)
		rc = DL_EIO;
	if (!rc) {
		jr->seq++;
		jr->bytes += rec.len;
	} else {
		/* a partial record would hide every later one: cut it off,
		 * and if even that fails stop journaling loudly */
		if (ftruncate(jr->fd, (off_t)jr->bytes) != 0) {
			jr->broken = 1;
			log_error("journal %s is unusable (%s); state changes "
				  "are no longer durable",
				  jr->journal_path, strerror(errno));
		}
		log_error("cannot append to journal %s: %s", jr->journal_path,
			  dl_strerror(rc));
	}
	buf_release(&rec);
	return rc;
}

static uint64_t compact_threshold(const struct rdzv_journal *jr)
{
	uint64_t t = 4 * jr->snapshot_bytes;
	return t > COMPACT_MIN ? t : COMPACT_MIN;
}

int rdzv_journal_job(struct rdzv_journal *jr, const struct rdzv_state *st,
		     const char *job)
{
	json_t *saved = rdzv_job_save(st, job);
	json_t *v = saved ? json_pack("{s:s, s:o}", "t", "job", "job", saved)
			  : json_pack("{s:s, s:s}", "t", "del", "job", job);
	int rc = append(jr, v);
	json_decref(v);
	if (!rc && jr->bytes > compact_threshold(jr))
		compact(jr, st);
	return rc;
}

int rdzv_journal_kv(struct rdzv_journal *jr, const struct rdzv_state *st,
		    const char *job, const char *key, const void *data,
		    size_t len)
{
	json_t *v = kv_payload(job, key, data, len);
	int rc = append(jr, v);
	json_decref(v);
	if (!rc && jr->bytes > compact_threshold(jr))
		compact(jr, st);
	return rc;
}

int rdzv_journal_rewrite(struct rdzv_journal *jr, const struct rdzv_state *st)
{
	return compact(jr, st);
}

static char *path_join(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *p = malloc(n);
	if (p)
		snprintf(p, n, "%s/%s", dir, name);
	return p;
}

/* lock_dir creates dir, names the files in it and takes its lock, so
 * that one server at a time owns a state dir. */
static int lock_dir(struct rdzv_journal *jr, const char *dir, char *err,
		    size_t err_size)
{
	char *lock_path;
	int rc = fs_mkdir_p(dir, 0700);

	if (rc) {
		snprintf(err, err_size, "cannot create state dir %s: %s", dir,
			 strerror(errno));
		return rc;
	}
	jr->journal_path = path_join(dir, "journal");
	jr->snapshot_path = path_join(dir, "snapshot");
	lock_path = path_join(dir, "lock");
	if (!jr->journal_path || !jr->snapshot_path || !lock_path) {
		free(lock_path);
		return DL_ENOMEM;
	}
	jr->lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (jr->lock_fd < 0 || flock(jr->lock_fd, LOCK_EX | LOCK_NB) != 0) {
		snprintf(err, err_size,
			 "state dir %s is in use by another dlaunch-rdzv (or "
			 "not writable): %s",
			 dir, strerror(errno));
		rc = DL_EBUSY;
	}
	free(lock_path);
	return rc;
}

/* replay_snapshot replays the snapshot, if any, into st; it must be whole
 * (it was renamed into place complete). *seq: its last sequence number. */
static int replay_snapshot(struct rdzv_journal *jr, struct rdzv_state *st,
			   uint64_t now_ms, uint64_t *seq, char *err,
			   size_t err_size)
{
	char *data = NULL;
	size_t len = 0, good = 0;
	int rc = fs_read_file(jr->snapshot_path, FILE_MAX_BYTES, &data, &len);

	if (rc == DL_ENOTFOUND)
		return 0;
	if (rc) {
		snprintf(err, err_size, "cannot read %s: %s", jr->snapshot_path,
			 dl_strerror(rc));
		return rc;
	}
	rc = replay(st, jr->snapshot_path, (unsigned char *)data, len, 0,
		    now_ms, &good, seq);
	if (rc == 0 && good != len)
		rc = DL_ECORRUPT;
	free(data);
	if (rc) {
		snprintf(err, err_size,
			 "snapshot %s is damaged; move it away to start "
			 "without it",
			 jr->snapshot_path);
		return rc;
	}
	jr->snapshot_bytes = len;
	return 0;
}

/* replay_journal replays the journal's records newer than jr->seq into
 * st; *len is the file's size, *good where its intact records end. */
static int replay_journal(struct rdzv_journal *jr, struct rdzv_state *st,
			  uint64_t now_ms, size_t *len, size_t *good, char *err,
			  size_t err_size)
{
	char *data = NULL;
	int rc = fs_read_file(jr->journal_path, FILE_MAX_BYTES, &data, len);

	*good = 0;
	if (rc == DL_ENOTFOUND) {
		*len = 0;
		return 0;
	}
	if (rc) {
		snprintf(err, err_size, "cannot read %s: %s", jr->journal_path,
			 dl_strerror(rc));
		return rc;
	}
	rc = replay(st, jr->journal_path, (unsigned char *)data, *len, jr->seq,
		    now_ms, good, &jr->seq);
	free(data);
	if (rc)
		snprintf(err, err_size,
			 "journal %s holds a record that cannot be "
			 "replayed (see the log)",
			 jr->journal_path);
	return rc;
}

/* open_append opens the journal for appending after its last intact
 * record (good), dropping a torn tail. */
static int open_append(struct rdzv_journal *jr, size_t len, size_t good,
		       char *err, size_t err_size)
{
	jr->fd = open(jr->journal_path,
		      O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (jr->fd < 0) {
		snprintf(err, err_size, "cannot open %s: %s", jr->journal_path,
			 strerror(errno));
		return DL_EIO;
	}
	if (good != len) {
		/* drop the torn tail so new records follow intact ones */
		if (ftruncate(jr->fd, (off_t)good) != 0 ||
		    fdatasync(jr->fd) != 0) {
			snprintf(err, err_size, "cannot truncate %s: %s",
				 jr->journal_path, strerror(errno));
			return DL_EIO;
		}
	}
	fs_fsync_dir(jr->journal_path);
	jr->bytes = good;
	return 0;
}

int rdzv_journal_open(const char *dir, struct rdzv_state *st, uint64_t now_ms,
		      struct rdzv_journal **out, char *err, size_t err_size)
{
	struct rdzv_journal *jr = calloc(1, sizeof(*jr));
	char name[RDZV_NAME_MAX + 1];
	size_t len = 0, good = 0;
	int rc;

	if (!jr)
		return DL_ENOMEM;
	jr->fd = jr->lock_fd = -1;
	rc = lock_dir(jr, dir, err, err_size);
	if (!rc)
		rc = replay_snapshot(jr, st, now_ms, &jr->seq, err, err_size);
	if (!rc)
		rc = replay_journal(jr, st, now_ms, &len, &good, err, err_size);
	if (!rc)
		rc = open_append(jr, len, good, err, err_size);
	if (rc) {
		rdzv_journal_close(jr);
		return rc;
	}
	/* replay marks jobs changed; those marks are already durable */
	while (rdzv_state_pop_changed(st, name))
		;
	log_info("event=journal_replayed dir=%s jobs=%zu seq=%" PRIu64, dir,
		 rdzv_job_count(st), jr->seq);
	*out = jr;
	return 0;
}

void rdzv_journal_close(struct rdzv_journal *jr)
{
	if (!jr)
		return;
	if (jr->fd >= 0)
		close(jr->fd);
	if (jr->lock_fd >= 0)
		close(jr->lock_fd);
	free(jr->journal_path);
	free(jr->snapshot_path);
	free(jr);
}

uint64_t rdzv_journal_bytes(const struct rdzv_journal *jr)
{
	return jr ? jr->bytes : 0;
}

uint64_t rdzv_journal_compactions(const struct rdzv_journal *jr)
{
	return jr ? jr->compactions : 0;
}
