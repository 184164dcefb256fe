/* SPDX-License-Identifier: Apache-2.0 */
/*
 * run.c - what a dlaunch-train run is made of (run.h): its device and
 * backend, data, model, optimizer and DDP set up once, its checkpoints
 * saved and loaded, the banner and the final summary, and its release.
 * The training loop and main are in main.c; the group and its in-place
 * re-form in reform.c.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "ckpt.h"
#include "control.h"
#include "data.h"
#include "ddp.h"
#include "device.h"
#include "dist/dist.h"
#include "dist/dist_flight.h"
#include "mlp.h"
#include "optim.h"
#include "options.h"
#include "reform.h"
#include "run.h"
#include "sampler.h"
#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"

int run_load_data(struct run *r)
{
	const struct train_options *o = &r->o;
	char err[512];
	int rc;

	if (o->synthetic_n) {
		rc = data_synthetic(o->synthetic_n, (size_t)o->shape.widths[0],
				    o->shape.widths[o->shape.n_layers], 0x5eed,
				    &r->train, &r->test);
		if (rc != 0)
			log_error("synthetic data: %s", dl_strerror(rc));
		return rc;
	}
	rc = data_load_fashion_mnist(o->data_dir, &r->train, &r->test, err,
				     sizeof(err));
	if (rc != 0) {
		log_error("%s (is the dataset-fashion-mnist package "
			  "installed? see --data-dir)",
			  err);
		return rc;
	}
	if (r->train.dim != (size_t)o->shape.widths[0] ||
	    r->train.classes != o->shape.widths[o->shape.n_layers]) {
		log_error("model %d-...-%d does not fit fashion-mnist (%zu "
			  "inputs, %d classes)",
			  o->shape.widths[0],
			  o->shape.widths[o->shape.n_layers], r->train.dim,
			  r->train.classes);
		return DL_EINVAL;
	}
	return 0;
}

/* setup_device: the device and backend, chosen once (device.c) from the
 * options, LOCAL_RANK, LOCAL_WORLD_SIZE and the visible GPUs; r->gpu is
 * then what both the kernels and NCCL use. */
int run_setup_device(struct run *r)
{
	struct train_options *o = &r->o;
	struct train_device_request rq = {
	    .device = o->device,
	    .backend = o->backend,
	    .local_rank = r->local_rank,
	    .local_world = r->local_world,
	    .visible_gpus = 0,
	};
	struct train_device_choice ch;
	char err[512];
	int rc;

	/* asking the CUDA runtime costs time: only when a GPU may be used */
	if (o->device != DEVICE_CPU &&
	    !(o->device == DEVICE_AUTO && o->backend == BACKEND_TCP))
		rq.visible_gpus = train_backend_cuda_available();
	rc = train_device_choose(&rq, &ch, err, sizeof(err));
	if (rc != 0) {
		log_error("%s", err);
		return rc;
	}
	if (ch.note[0] && r->local_rank == 0)
		log_warn("%s", ch.note);
	o->device = ch.device;
	o->backend = ch.backend;
	r->gpu = ch.gpu;
	if (o->device == DEVICE_CPU) {
		train_backend_cpu(&r->be, o->threads);
		return 0;
	}
	rc = train_backend_cuda(&r->be, r->gpu, err, sizeof(err));
	if (rc != 0)
		log_error("%s", err);
	return rc;
}

int run_save_checkpoint(struct run *r)
{
	char err[512];
	uint64_t t0 = clock_now_ms();
	int rc;

	if (r->rank != 0 || r->o.checkpoint_dir == NULL ||
	    r->saved_step == r->step)
		return 0;
	dist_flight_set_phase(r->flight, "checkpoint");
	rc = reform_fill_state(r);
	if (rc == 0)
		rc = ckpt_save(r->o.checkpoint_dir, &r->ck,
			       r->o.keep_checkpoints, r->ckpt_file,
			       sizeof(r->ckpt_file), err, sizeof(err));
	else
		snprintf(err, sizeof(err), "cannot copy the model: %s",
			 dl_strerror(rc));
	if (rc != 0) {
		log_error("%s", err);
		return rc;
	}
	r->saved_step = r->step;
	log_info("checkpoint %s written in %llu ms", r->ckpt_file,
		 (unsigned long long)(clock_now_ms() - t0));
	return 0;
}

/* load_local: this rank's newest valid checkpoint, if any. Ranks need
 * not see the same files (a node may have none): the agreement that
 * follows (reform_agree) hands the most advanced state to the ranks behind. */
int run_load_local(struct run *r)
{
	struct ckpt_state st;
	char err[PATH_MAX + 512], path[PATH_MAX];
	int rc;

	memset(&st, 0, sizeof(st));
	rc = ckpt_load_latest(r->o.checkpoint_dir, &r->o.shape, &st, path,
			      sizeof(path), err, sizeof(err));
	if (rc == DL_ENOTFOUND)
		return 0;
	if (rc != 0) {
		log_error("rank %d: %s", r->rank, err);
		return rc;
	}
	if (st.seed != r->o.seed && r->rank == 0)
		log_warn("checkpoint %s was trained with --seed %llu; "
			 "continuing with it",
			 path, (unsigned long long)st.seed);
	rc = reform_apply_state(r, &st);
	if (rc == 0) {
		r->saved_step = st.step;
		snprintf(r->ckpt_file, sizeof(r->ckpt_file), "%s", path);
	}
	ckpt_state_release(&st);
	return rc;
}

static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

void run_release(struct run *r)
{
	control_set_abort_hook(r->ctl, NULL, NULL);
	control_set_dump_hook(r->ctl, NULL, NULL);
	train_ddp_free(r->ddp);
	mlp_free(r->model);
	train_optim_release(&r->optim);
	if (r->bn_before)
		r->be.release(r->be.ctx, r->bn_before);
	if (r->be.release)
		train_backend_release(&r->be);
	dist_free(r->dist);
	data_release(&r->train);
	data_release(&r->test);
	train_sampler_release(&r->sampler);
	ckpt_state_release(&r->ck);
	free(r->x);
	free(r->y);
	free(r->idx);
	control_close(r->ctl);
	dist_flight_free(r->flight);
}

/* setup_model: the batch buffers, the model, its optimiser and DDP (and
 * the host copy of the state), with parameters initialised identically
 * on every rank from the seed. */
int run_setup_model(struct run *r)
{
	struct ckpt_state init;
	int rc = reform_size_for_world(r);

	if (rc != 0)
		return rc;
	rc = mlp_new(&r->o.shape, &r->be, r->max_local, &r->model);
	if (rc == 0)
		rc = train_optim_init(&r->optim, &r->be,
				      mlp_param_count(&r->o.shape),
				      (float)r->o.lr, (float)r->o.momentum,
				      (float)r->o.weight_decay);
	if (rc == 0)
		rc = train_ddp_new(r->dist, r->model, &r->be, r->o.bucket_bytes,
				   &r->ddp);
	if (rc == 0) /* checkpoints and the state agreement */
		rc = ckpt_state_alloc(&r->ck, &r->o.shape);
	r->bn_bytes = mlp_buffer_count(&r->o.shape) * sizeof(float);
	if (rc == 0 && r->ctl && r->bn_bytes) {
		r->bn_before = r->be.alloc(r->be.ctx, r->bn_bytes);
		if (r->bn_before == NULL)
			rc = DL_ENOMEM;
	}
	if (rc != 0) {
		log_error("cannot set up the model: %s", dl_strerror(rc));
		return rc;
	}
	/* identical initialisation everywhere, then rank 0's copy wins */
	rc = ckpt_state_alloc(&init, &r->o.shape);
	if (rc == 0) {
		mlp_init_params(&r->o.shape, r->o.seed, init.params,
				init.buffers);
		rc = mlp_set_params(r->model, init.params, init.buffers);
		ckpt_state_release(&init);
	}
	return rc;
}

void run_print_banner(const struct run *r)
{
	char shape[128];

	mlp_shape_format(&r->o.shape, shape, sizeof(shape));
	printf("dlaunch-train: model %s (%zu parameters), %zu training "
	       "samples, world size %d, global batch %u, device %s, "
	       "backend %s, %d bucket(s)\n",
	       shape, mlp_param_count(&r->o.shape), r->train.n, r->world,
	       r->o.global_batch, r->be.name,
	       r->world == 1 ? "none"
			     : (r->o.backend == BACKEND_NCCL ? "nccl" : "tcp"),
	       train_ddp_bucket_count(r->ddp));
	fflush(stdout);
}

/* print_summary: the run's one-line JSON summary on stdout */
void run_print_summary(struct run *r, double train_secs, uint64_t samples,
		       double wall_secs)
{
	int rc = reform_fill_state(r);
	uint64_t digest = rc == 0 ? control_state_digest(&r->ck, &rc) : 0;

	printf("{\"summary\": {\"steps\": %llu, \"epochs\": %llu, "
	       "\"resumed_from_step\": %llu, \"world_size\": %d, "
	       "\"global_batch\": %u, \"samples_per_s\": %.1f, "
	       "\"train_seconds\": %.3f, \"wall_seconds\": %.3f, "
	       "\"final_loss\": %.6f, \"test_loss\": %.6f, "
	       "\"test_accuracy\": %.4f, \"device\": \"%s\", "
	       "\"round\": %llu, \"reforms\": %u, \"state_digest\": "
	       "\"%016llx\", \"checkpoint\": ",
	       (unsigned long long)r->step, (unsigned long long)r->epoch,
	       (unsigned long long)r->resumed_from, r->world, r->o.global_batch,
	       train_secs > 0 ? (double)samples / train_secs : 0.0, train_secs,
	       wall_secs, r->last_loss, r->last_test_loss, r->last_accuracy,
	       r->be.name, (unsigned long long)r->round, r->reforms,
	       (unsigned long long)digest);
	if (r->ckpt_file[0])
		json_string(stdout, r->ckpt_file);
	else
		fputs("null", stdout);
	printf("}}\n");
	fflush(stdout);
}
