/*
 * Checkpoint, restore and fork (docs/snapshots.md): the order of the steps, in one place. A checkpoint holds the VM
 * (every vCPU parked, the devices' threads stopped), captures the KVM state (kvm_state.c) and every device's, and
 * freezes guest memory into a layer (mem_freeze.c), then lets the VM go on; writing it to a directory and opening one
 * are snapshot_write.c and snapshot_open.c. A restore (a fork is a restore of an in-memory checkpoint) builds a VM
 * over the snapshot's memory layer and sets the KVM state, the devices' and the queued console input back.
 */
#define _GNU_SOURCE
#include "device.h"
#include "error.h"
#include "file_io.h"
#include "internal.h"
#include "kvm_state.h"
#include "mem_layer.h"
#include "snapfile.h"
#include "snapshot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void snapshot_find_disk(struct vm_snapshot *s)
{
	static const char name[] = "virtio-blk";

	for (uint32_t i = 0; i < s->parsed.nr_sections; i++) {
		const struct snap_section *sec = &s->parsed.sections[i];

		if (sec->kind == SNAP_DEVICE && sec->data[0] == sizeof(name) - 1 &&
		    !memcmp(sec->data + 1, name, sizeof(name) - 1))
			vm_snapshot_disk_section(sec->data + sizeof(name), (size_t)sec->len - sizeof(name), s->disk,
						 sizeof(s->disk));
	}
}

const char *vm_snapshot_disk(const struct vm_snapshot *s)
{
	return s->disk[0] ? s->disk : NULL;
}

static int snapshot_from_blob(uint8_t *blob, size_t len, const char *what, struct mem_layer *layer,
			      struct vm_snapshot **out, struct vm_error *err)
{
	struct vm_snapshot *s = calloc(1, sizeof(*s));

	if (!s) {
		free(blob);
		return vm_error_set(err, ENOMEM, "out of memory for a snapshot");
	}
	s->blob = blob;
	s->blob_len = len;
	if (snap_parse(blob, len, what, &s->parsed, err) < 0 || snap_validate(&s->parsed, what, &s->info, err) < 0) {
		vm_snapshot_put(s);
		return -1;
	}
	s->layer = mem_layer_get(layer);
	snapshot_find_disk(s);
	*out = s;
	return 0;
}


/* Stops the devices' own threads (vCPUs are parked); on failure, those already stopped go on again. */
static int devices_quiesce(struct vm *vm, struct vm_error *err)
{
	for (int i = 0; i < vm->nr_devices; i++) {
		struct device_instance *d = &vm->devices[i];

		if (d->type->quiesce && d->type->quiesce(vm, d->state, err) < 0) {
			while (--i >= 0)
				if (vm->devices[i].type->resume)
					vm->devices[i].type->resume(vm, vm->devices[i].state);
			return vm_error_prefix(err, "the %s: ", d->type->name);
		}
	}
	return 0;
}

static void devices_resume(struct vm *vm)
{
	for (int i = vm->nr_devices - 1; i >= 0; i--)
		if (vm->devices[i].type->resume)
			vm->devices[i].type->resume(vm, vm->devices[i].state);
}

/* Every device's state, then the console input no device has taken yet (the vCPUs are parked). */
static int devices_save(struct vm *vm, struct snap_writer *w, struct vm_error *err)
{
	uint8_t *input;
	size_t n_input;
	int ret;

	for (int i = 0; i < vm->nr_devices; i++) {
		struct device_instance *d = &vm->devices[i];
		uint8_t len = (uint8_t)strlen(d->type->name);
		size_t at;

		if (!d->type->save)
			continue;
		at = snap_begin(w, SNAP_DEVICE, 0);
		snap_append(w, &len, 1);
		snap_append(w, d->type->name, len);
		ret = d->type->save(vm, d->state, w);
		if (ret)
			return vm_error_set(err, -ret, "cannot save the state of the %s", d->type->name);
		snap_end(w, at);
	}
	/* The vCPUs are parked, so nothing takes input meanwhile; the host may add some, which waits for later. */
	n_input = console_in_pending(&vm->console);
	input = malloc(n_input ? n_input : 1);
	if (!input)
		return vm_error_set(err, ENOMEM, "out of memory saving console input");
	n_input = console_in_peek(&vm->console, input, n_input);
	snap_put(w, SNAP_CONSOLE_INPUT, 0, input, n_input);
	free(input);
	return 0;
}

const struct vm_device_resource *vm_device_resource_find(const struct vm_device_resource *resources, size_t nr,
							 const char *device)
{
	for (size_t i = 0; i < nr; i++)
		if (resources[i].device && !strcmp(resources[i].device, device))
			return &resources[i];
	return NULL;
}

int vm_resources_check(const struct vm_device_resource *resources, size_t nr, struct vm_error *err)
{
	for (size_t i = 0; i < nr; i++) {
		const char *name = resources[i].device;
		const struct device_type *t = device_types();

		if (!name || !*name)
			return vm_error_set(err, EINVAL, "device resource %zu has no device name", i + 1);
		while (t && strcmp(t->name, name))
			t = t->next;
		if (!t)
			return vm_error_set(err, EINVAL, "device resource for \"%s\": no device has that name", name);
		if (vm_device_resource_find(resources, i, name))
			return vm_error_set(err, EINVAL, "device resource for \"%s\" given twice", name);
		if (!resources[i].path || !*resources[i].path)
			return vm_error_set(err, EINVAL, "device resource for \"%s\" has no path", name);
	}
	return 0;
}

int vm_checkpoint(struct vm *vm, const struct vm_checkpoint_params *params, struct vm_snapshot **out,
		  struct vm_checkpoint_stats *stats, struct vm_error *err)
{
	struct vm_checkpoint_stats st = { 0 };
	struct snap_writer w;
	uint8_t id[SNAP_ID_SIZE];
	double t0 = now_ms();
	int was_running, ret;
	const struct vm_device_resource *resources = params ? params->resources : NULL;
	size_t nr_resources = params ? params->nr_resources : 0;

	ret = vm_resources_check(resources, nr_resources, err);
	if (ret < 0)
		return vm_error_prefix(err, "cannot checkpoint: ");
	ret = vm_hold(vm, &was_running, err);
	trace_step("checkpoint: park the vCPUs");
	if (ret < 0)
		return vm_error_prefix(err, "cannot checkpoint: ");
	snap_writer_init(&w);
	vm->next_resources = resources;	/* for the devices' quiesce: each takes its own (vm_next_resource) */
	vm->nr_next_resources = nr_resources;
	ret = devices_quiesce(vm, err);
	if (ret < 0) {
		vm_release(vm, was_running);
		snap_writer_free(&w);
		return vm_error_prefix(err, "cannot checkpoint: ");
	}
	trace_step("checkpoint: quiesce devices");
	ret = kvm_state_save(vm, &w, err);
	trace_step("checkpoint: capture KVM state");
	if (!ret)
		ret = devices_save(vm, &w, err);
	trace_step("checkpoint: save devices");
	if (!ret)
		ret = memory_freeze(vm, &st, err);
	trace_step("checkpoint: freeze memory");
	devices_resume(vm);
	vm->next_resources = NULL;
	vm->nr_next_resources = 0;
	vm_release(vm, was_running);
	trace_step("checkpoint: resume");
	st.pause_ms = now_ms() - t0;
	file_random_id(id, SNAP_ID_SIZE);	/* never all zeros, which means "no parent" */
	if (!ret)
		ret = snap_writer_finish(&w, id, NULL, err);
	if (ret < 0) {
		snap_writer_free(&w);
		return ret;
	}
	ret = snapshot_from_blob(w.buf, w.len, "the checkpoint", vm->mem.layer, out, err);
	trace_step("checkpoint: parse the state");
	if (stats)
		*stats = st;
	return ret;
}

void vm_snapshot_put(struct vm_snapshot *s)
{
	if (!s)
		return;
	snap_blob_free(&s->parsed);
	free(s->blob);
	mem_layer_put(s->layer);
	free(s->dir);
	free(s);
}

void snapshot_hex_id(const uint8_t id[SNAP_ID_SIZE], char out[2 * SNAP_ID_SIZE + 1])
{
	for (int i = 0; i < SNAP_ID_SIZE; i++)
		snprintf(out + 2 * i, 3, "%02x", id[i]);
}

void vm_snapshot_get_info(const struct vm_snapshot *s, struct vm_snapshot_info *info)
{
	memset(info, 0, sizeof(*info));
	snapshot_hex_id(s->parsed.id, info->id);
	info->full = s->layer->kind == MEM_LAYER_FULL;
	info->pages = s->layer->pages;
	info->mem_size = s->info.mem_size;
	info->nr_cpus = (int)s->info.nr_cpus;
	if (s->layer->kind == MEM_LAYER_DIFF) {
		struct mem_layer *parent = mem_layer_parent(s->layer);

		if (parent) {
			pthread_mutex_lock(&parent->lock);
			if (parent->dir)
				snprintf(info->parent_dir, sizeof(info->parent_dir), "%s", parent->dir);
			pthread_mutex_unlock(&parent->lock);
			mem_layer_put(parent);
		}
	}
}

/* ---- restore ---- */

static int devices_restore(struct vm *vm, const struct vm_snapshot *s, struct vm_error *err)
{
	const struct snap_section *input = snap_find(&s->parsed, SNAP_CONSOLE_INPUT, 0);

	for (uint32_t i = 0; i < s->parsed.nr_sections; i++) {
		const struct snap_section *sec = &s->parsed.sections[i];
		uint8_t name_len;
		int found = 0;

		if (sec->kind != SNAP_DEVICE)
			continue;
		name_len = sec->data[0];
		for (int k = 0; k < vm->nr_devices; k++) {
			struct device_instance *d = &vm->devices[k];

			if (strlen(d->type->name) != name_len || memcmp(d->type->name, sec->data + 1, name_len) ||
			    !d->type->load)
				continue;
			found = 1;
			if (d->type->load(vm, d->state, sec->data + 1 + name_len, (size_t)sec->len - 1 - name_len, err) < 0)
				return vm_error_prefix(err, "snapshot: the %s's state: ", d->type->name);
			trace_stepf("load %s", d->type->name);
		}
		if (!found)
			return vm_error_set(err, EINVAL, "snapshot: state for a device this VMM does not have: %.*s",
					    name_len, (const char *)sec->data + 1);
	}
	for (int k = 0; k < vm->nr_devices; k++) {
		const struct device_type *t = vm->devices[k].type;
		int found = 0;

		for (uint32_t i = 0; t->save && i < s->parsed.nr_sections && !found; i++) {
			const struct snap_section *sec = &s->parsed.sections[i];

			found = sec->kind == SNAP_DEVICE && sec->data[0] == strlen(t->name) &&
				!memcmp(sec->data + 1, t->name, sec->data[0]);
		}
		if (t->save && !found)
			return vm_error_set(err, EINVAL, "snapshot: the state of the %s is missing", t->name);
	}
	if (input && input->len)
		console_in_write(&vm->console, input->data, (size_t)input->len);
	trace_step("console input");
	return 0;
}

int vm_restore(struct vm_snapshot *s, const struct vm_restore_params *params, struct vm **out, struct vm_error *err)
{
	struct vm *vm;
	int ret;

	ret = vm_check_console_limit(params->console_limit, err);
	if (!ret)
		ret = vm_resources_check(params->resources, params->nr_resources, err);
	if (ret < 0)
		return ret;
	vm = vm_alloc((int)s->info.nr_cpus, params->console_limit, params->cb, err);
	if (!vm)
		return -1;
	vm->restoring = &s->parsed;	/* the devices the snapshot has state for are the ones the VM gets */
	ret = vm_set_resources(vm, params->resources, params->nr_resources, err);
	if (!ret)
		ret = vm_build(vm, 0, s->layer, err);
	if (!ret)
		ret = kvm_state_restore(vm, &s->parsed, s->info.tsc_khz, err);
	trace_step("set KVM state (vCPUs)");
	if (!ret)
		ret = devices_restore(vm, s, err);
	vm->restoring = NULL;
	if (ret < 0) {
		vm_destroy(vm);
		return ret;
	}
	for (int k = 0; k < vm->nr_devices; k++)
		if (vm->devices[k].type->clone) {
			vm->devices[k].type->clone(vm, vm->devices[k].state);
			trace_stepf("clone hygiene %s", vm->devices[k].type->name);
		}
	for (int i = 0; i < vm->nr_cpus; i++)
		kvm_ioctl(vm->cpus[i].fd, KVM_KVMCLOCK_CTRL, 0);	/* EINVAL when the guest has no kvmclock: fine */
	trace_step("KVMCLOCK_CTRL");
	vm->state = VM_CREATED;
	*out = vm;
	return 0;
}
