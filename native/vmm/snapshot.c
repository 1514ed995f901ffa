/*
 * Checkpoint, restore and fork (docs/snapshots.md): capturing and setting the KVM state of a VM in Firecracker's
 * order, freezing guest memory into layers, and publishing snapshots to disk atomically.
 */
#define _GNU_SOURCE
#include "device.h"
#include "error.h"
#include "internal.h"
#include "mem_layer.h"
#include "snapfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MSR_IA32_TSC 0x10
#define MSR_IA32_TSC_DEADLINE 0x6e0
#define APIC_LVTT 0x320
#define APIC_LVT_TIMER_MODE_MASK (3u << 17)
#define APIC_LVT_TIMER_TSCDEADLINE (2u << 17)
#define APIC_LVT_MASKED (1u << 16)
#define SNAP_OPEN_MAX_DEPTH 16	/* parent links followed on disk; chains are at most MEM_LAYER_MAX_DEPTH deep */

struct vm_snapshot {
	uint8_t *blob;			/* a finished state blob (ids as written, or in-memory ones) */
	size_t blob_len;
	struct snap_blob parsed;
	struct snap_vm_info info;
	struct mem_layer *layer;
	char *dir;			/* where it was opened from, or NULL */
	char disk[PATH_MAX];		/* the frozen disk layer (or read-only image) its virtio-blk section names */
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- MSRs: Firecracker's allow-list, intersected with what this KVM lists and can read ---- */

static int msr_allowed(uint32_t i)
{
	switch (i) {
	case 0x10: case 0x1b: case 0x3b: case 0x48: case 0xfe: case 0x122:	/* TSC, APICBASE, TSC_ADJUST, ... */
	case 0x174: case 0x175: case 0x176: case 0x179: case 0x17a: case 0x17b:	/* SYSENTER, MCG */
	case 0x1a0: case 0x6e0: case 0xda0: case 0x11: case 0x12:		/* MISC_ENABLE, TSC_DEADLINE, XSS, kvmclock */
	case 0xc0000080: case 0xc0000081: case 0xc0000082: case 0xc0000083: case 0xc0000084:
	case 0xc0000100: case 0xc0000101: case 0xc0000102: case 0xc0000103:
		return 1;
	}
	return (i >= 0x200 && i <= 0x2ff) || (i >= 0x400 && i <= 0x47f) || (i >= 0x4b564d00 && i <= 0x4b564dff);
}

static pthread_mutex_t msr_list_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t *msr_list;
static uint32_t nr_msr_list;

/* The MSRs to save, probed once per process on the first vCPU saved. */
static int msr_list_get(struct vcpu *cpu, const uint32_t **list, uint32_t *n, struct vm_error *err)
{
	struct kvm_msr_list probe = { .nmsrs = 0 }, *all = NULL;
	struct kvm_msrs *msrs = NULL;
	int ret = 0;

	pthread_mutex_lock(&msr_list_lock);
	if (msr_list)
		goto out;
	if (ioctl(cpu->vm->kvm_fd, KVM_GET_MSR_INDEX_LIST, &probe) < 0 && errno != E2BIG) {
		ret = vm_error_set(err, errno, "KVM_GET_MSR_INDEX_LIST: %s", strerror(errno));
		goto out;
	}
	all = calloc(1, sizeof(*all) + probe.nmsrs * sizeof(uint32_t));
	msrs = calloc(1, sizeof(*msrs) + (probe.nmsrs + 1) * sizeof(struct kvm_msr_entry));
	msr_list = calloc(probe.nmsrs + 1, sizeof(uint32_t));
	if (!all || !msrs || !msr_list) {
		ret = vm_error_set(err, ENOMEM, "out of memory for the MSR list");
		goto fail;
	}
	all->nmsrs = probe.nmsrs;
	if (ioctl(cpu->vm->kvm_fd, KVM_GET_MSR_INDEX_LIST, all) < 0) {
		ret = vm_error_set(err, errno, "KVM_GET_MSR_INDEX_LIST: %s", strerror(errno));
		goto fail;
	}
	for (uint32_t i = 0; i < all->nmsrs; i++)
		if (msr_allowed(all->indices[i]))
			msrs->entries[msrs->nmsrs++].index = all->indices[i];
	/* KVM_GET_MSRS stops at the first MSR it cannot read: drop that one and go on. */
	for (uint32_t done = 0; done < msrs->nmsrs;) {
		struct kvm_msrs *rest = calloc(1, sizeof(*rest) + (msrs->nmsrs - done) * sizeof(struct kvm_msr_entry));
		int got;

		if (!rest) {
			ret = vm_error_set(err, ENOMEM, "out of memory for the MSR list");
			goto fail;
		}
		rest->nmsrs = msrs->nmsrs - done;
		memcpy(rest->entries, msrs->entries + done, rest->nmsrs * sizeof(struct kvm_msr_entry));
		got = ioctl(cpu->fd, KVM_GET_MSRS, rest);
		free(rest);
		if (got < 0) {
			ret = vm_error_set(err, errno, "KVM_GET_MSRS: %s", strerror(errno));
			goto fail;
		}
		for (int i = 0; i < got; i++)
			msr_list[nr_msr_list++] = msrs->entries[done + i].index;
		done += (uint32_t)got + 1;	/* skip the one that failed (past the end when all were read) */
	}
	goto out;
fail:
	free(msr_list);
	msr_list = NULL;
	nr_msr_list = 0;
out:
	free(all);
	free(msrs);
	*list = msr_list;
	*n = nr_msr_list;
	pthread_mutex_unlock(&msr_list_lock);
	return ret;
}

/* ---- capture ---- */

static int get(int fd, unsigned long req, void *arg, const char *name, struct vm_error *err)
{
	if (ioctl(fd, req, arg) < 0)
		return vm_error_set(err, errno, "%s: %s", name, strerror(errno));
	return 0;
}

static int xsave_size(struct vm *vm)
{
	int size = ioctl(vm->vm_fd, KVM_CHECK_EXTENSION, KVM_CAP_XSAVE2);

	return size > (int)sizeof(struct kvm_xsave) ? size : (int)sizeof(struct kvm_xsave);
}

/*
 * CPUID and MSR lists: KVM's struct kvm_cpuid2 and struct kvm_msrs are both a u32 count, 4 bytes of padding and the
 * entries; their sections are the count and the entries.
 */
static void put_counted(struct snap_writer *w, uint32_t kind, uint32_t index, uint32_t count, const void *entries,
			size_t entry_size)
{
	size_t at = snap_begin(w, kind, index);

	snap_append(w, &count, 4);
	snap_append(w, entries, count * entry_size);
	snap_end(w, at);
}

/* The KVM structure for a counted section (snap_validate checked its size); free it. */
static void *get_counted(const struct snap_section *sec, size_t entry_size, uint32_t *count)
{
	uint8_t *buf;

	memcpy(count, sec->data, 4);
	buf = calloc(1, 8 + *count * entry_size);
	if (buf) {
		memcpy(buf, count, 4);
		memcpy(buf + 8, sec->data + 4, *count * entry_size);
	}
	return buf;
}

static int vcpu_save(struct vcpu *cpu, struct snap_writer *w, struct vm_error *err)
{
	struct kvm_mp_state mp;
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct kvm_xcrs xcrs;
	struct kvm_debugregs dregs;
	struct kvm_lapic_state lapic;
	struct kvm_vcpu_events events;
	struct kvm_cpuid2 *cpuid = NULL;
	struct kvm_msrs *msrs = NULL;
	const uint32_t *list;
	uint32_t nr_list, id = (uint32_t)cpu->id, lvtt;
	int xsize = xsave_size(cpu->vm), ret;
	void *xsave = calloc(1, (size_t)xsize);

	if (!xsave)
		return vm_error_set(err, ENOMEM, "out of memory for XSAVE state");
	/* MP state first: reading it makes KVM accept pending INIT/SIPI events, which changes the LAPIC. */
	ret = get(cpu->fd, KVM_GET_MP_STATE, &mp, "KVM_GET_MP_STATE", err);
	if (!ret)
		ret = get(cpu->fd, KVM_GET_REGS, &regs, "KVM_GET_REGS", err);
	if (!ret)
		ret = get(cpu->fd, KVM_GET_SREGS, &sregs, "KVM_GET_SREGS", err);
	if (!ret)
		ret = get(cpu->fd, xsize > (int)sizeof(struct kvm_xsave) ? KVM_GET_XSAVE2 : KVM_GET_XSAVE, xsave,
			  "KVM_GET_XSAVE", err);
	if (!ret)
		ret = get(cpu->fd, KVM_GET_XCRS, &xcrs, "KVM_GET_XCRS", err);
	if (!ret)
		ret = get(cpu->fd, KVM_GET_DEBUGREGS, &dregs, "KVM_GET_DEBUGREGS", err);
	if (!ret)
		ret = get(cpu->fd, KVM_GET_LAPIC, &lapic, "KVM_GET_LAPIC", err);
	for (uint32_t n = 64; !ret; n *= 2) {
		free(cpuid);
		cpuid = calloc(1, sizeof(*cpuid) + n * sizeof(struct kvm_cpuid_entry2));
		if (!cpuid) {
			ret = vm_error_set(err, ENOMEM, "out of memory for CPUID");
			break;
		}
		cpuid->nent = n;
		if (ioctl(cpu->fd, KVM_GET_CPUID2, cpuid) == 0)
			break;
		if (errno != E2BIG || n >= SNAP_MAX_CPUID)
			ret = vm_error_set(err, errno, "KVM_GET_CPUID2: %s", strerror(errno));
	}
	if (!ret)
		ret = msr_list_get(cpu, &list, &nr_list, err);
	if (!ret) {
		msrs = calloc(1, sizeof(*msrs) + nr_list * sizeof(struct kvm_msr_entry));
		if (!msrs)
			ret = vm_error_set(err, ENOMEM, "out of memory for MSRs");
	}
	if (!ret) {
		int got;

		msrs->nmsrs = nr_list;
		for (uint32_t i = 0; i < nr_list; i++)
			msrs->entries[i].index = list[i];
		got = ioctl(cpu->fd, KVM_GET_MSRS, msrs);
		if (got != (int)nr_list)
			ret = vm_error_set(err, got < 0 ? errno : EIO, "KVM_GET_MSRS: %s", got < 0 ? strerror(errno) :
					   "KVM read fewer MSRs than it did before");
	}
	/* VCPU_EVENTS last: it is only consistent once nothing else will touch the vCPU. */
	if (!ret)
		ret = get(cpu->fd, KVM_GET_VCPU_EVENTS, &events, "KVM_GET_VCPU_EVENTS", err);
	if (!ret) {
		/*
		 * KVM zeroes TSC_DEADLINE when the deadline timer fires; if that interrupt had not reached the LAPIC
		 * yet, a restored guest would wait for it forever. Arm the timer at "now" instead (as Firecracker).
		 */
		memcpy(&lvtt, lapic.regs + APIC_LVTT, sizeof(lvtt));
		if ((lvtt & APIC_LVT_TIMER_MODE_MASK) == APIC_LVT_TIMER_TSCDEADLINE && !(lvtt & APIC_LVT_MASKED)) {
			uint64_t tsc = 0;

			for (uint32_t i = 0; i < nr_list; i++)
				if (msrs->entries[i].index == MSR_IA32_TSC)
					tsc = msrs->entries[i].data;
			for (uint32_t i = 0; i < nr_list; i++)
				if (msrs->entries[i].index == MSR_IA32_TSC_DEADLINE && msrs->entries[i].data == 0)
					msrs->entries[i].data = tsc;
		}
		put_counted(w, SNAP_CPUID, id, cpuid->nent, cpuid->entries, sizeof(struct kvm_cpuid_entry2));
		snap_put(w, SNAP_MP_STATE, id, &mp, sizeof(mp));
		snap_put(w, SNAP_REGS, id, &regs, sizeof(regs));
		snap_put(w, SNAP_SREGS, id, &sregs, sizeof(sregs));
		snap_put(w, SNAP_XSAVE, id, xsave, (size_t)xsize);
		snap_put(w, SNAP_XCRS, id, &xcrs, sizeof(xcrs));
		snap_put(w, SNAP_DEBUGREGS, id, &dregs, sizeof(dregs));
		snap_put(w, SNAP_LAPIC, id, &lapic, sizeof(lapic));
		put_counted(w, SNAP_MSRS, id, msrs->nmsrs, msrs->entries, sizeof(struct kvm_msr_entry));
		snap_put(w, SNAP_VCPU_EVENTS, id, &events, sizeof(events));
	}
	free(xsave);
	free(cpuid);
	free(msrs);
	return ret;
}

static int vm_state_save(struct vm *vm, struct snap_writer *w, struct vm_error *err)
{
	struct kvm_clock_data clock;
	struct kvm_pit_state2 pit;
	uint8_t vm_section[24] = { 0 };
	uint64_t mem_size = vm->mem.size, tsc_khz;
	uint32_t nr = (uint32_t)vm->nr_cpus;
	int khz = ioctl(vm->cpus[0].fd, KVM_GET_TSC_KHZ, 0);
	uint8_t *input;
	size_t n_input;
	int ret;

	tsc_khz = khz > 0 ? (uint64_t)khz : 0;
	memcpy(vm_section, &mem_size, 8);
	memcpy(vm_section + 8, &nr, 4);
	memcpy(vm_section + 16, &tsc_khz, 8);
	snap_put(w, SNAP_VM, 0, vm_section, sizeof(vm_section));
	ret = get(vm->vm_fd, KVM_GET_CLOCK, &clock, "KVM_GET_CLOCK", err);
	if (!ret)
		ret = get(vm->vm_fd, KVM_GET_PIT2, &pit, "KVM_GET_PIT2", err);
	if (ret)
		return ret;
	snap_put(w, SNAP_CLOCK, 0, &clock, sizeof(clock));
	snap_put(w, SNAP_PIT, 0, &pit, sizeof(pit));
	for (uint32_t chip = 0; chip < 3; chip++) {
		struct kvm_irqchip ic = { .chip_id = chip };

		ret = get(vm->vm_fd, KVM_GET_IRQCHIP, &ic, "KVM_GET_IRQCHIP", err);
		if (ret)
			return ret;
		snap_put(w, SNAP_IRQCHIP, chip, &ic, sizeof(ic));
	}
	for (int i = 0; i < vm->nr_cpus; i++) {
		ret = vcpu_save(&vm->cpus[i], w, err);
		if (ret)
			return ret;
	}
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

/* ---- memory ---- */

static int dirty_log_take(struct vm *vm, uint8_t *bitmap, struct vm_error *err)
{
	struct guest_mem *mem = &vm->mem;
	uint64_t low_pages = mem->low_size / SNAP_PAGE_SIZE, high_pages = mem->high_size / SNAP_PAGE_SIZE;
	uint64_t slot_pages[2] = { low_pages, high_pages };
	size_t bytes = (size_t)((mem->size / SNAP_PAGE_SIZE + 7) / 8);

	for (uint32_t slot = 0; slot < 2 && slot_pages[slot]; slot++) {
		size_t len = (size_t)((slot_pages[slot] + 63) / 64 * 8), at = slot ? (size_t)(low_pages / 8) : 0;
		uint8_t *log = calloc(1, len);
		struct kvm_dirty_log dl = { .slot = slot };

		if (!log)
			return vm_error_set(err, ENOMEM, "out of memory for the dirty log");
		dl.dirty_bitmap = log;
		if (ioctl(vm->vm_fd, KVM_GET_DIRTY_LOG, &dl) < 0) {
			free(log);
			return vm_error_set(err, errno, "KVM_GET_DIRTY_LOG: %s", strerror(errno));
		}
		for (size_t i = 0; i < (size_t)(slot_pages[slot] / 8) && at + i < bytes; i++)
			bitmap[at + i] |= log[i];
		free(log);
	}
	for (size_t i = 0; i + 8 <= bytes; i += 8) {	/* RAM is whole MiB: the bitmap is whole words */
		uint64_t *vmm = (uint64_t *)(void *)(mem->vmm_dirty + i), word;

		if (!__atomic_load_n(vmm, __ATOMIC_RELAXED))
			continue;
		word = __atomic_exchange_n(vmm, 0, __ATOMIC_RELAXED);
		for (int k = 0; k < 8; k++)
			bitmap[i + k] |= (uint8_t)(word >> (8 * k));
	}
	return 0;
}

/*
 * Freezes guest RAM into a layer, with every vCPU parked. The first time, the VM's memfd becomes a full layer and
 * RAM is remapped private over it (no copy). After that, the pages dirtied since go into a new diff layer.
 */
static int memory_freeze(struct vm *vm, struct vm_checkpoint_stats *st, struct vm_error *err)
{
	struct guest_mem *mem = &vm->mem;
	uint64_t pages = mem->size / SNAP_PAGE_SIZE;
	size_t bytes = (size_t)((pages + 7) / 8);
	struct mem_layer *l;
	uint8_t *bitmap, *host;
	int fd;

	if (!mem->layer) {
		fd = fcntl(mem->fd, F_DUPFD_CLOEXEC, 0);
		if (fd < 0)
			return vm_error_set(err, errno, "cannot freeze guest memory: %s", strerror(errno));
		l = mem_layer_new(fd, MEM_LAYER_FULL, mem->size, 0, NULL, NULL, err);
		if (!l)
			return -1;
		mem->vmm_dirty = calloc(1, bytes);
		host = mem->vmm_dirty ? mem_layer_map(l, err) : NULL;
		if (!host) {
			if (!mem->vmm_dirty)
				vm_error_set(err, ENOMEM, "out of memory for the dirty-page bitmap");
			free(mem->vmm_dirty);
			mem->vmm_dirty = NULL;
			mem_layer_put(l);
			return -1;
		}
		vm_memory_unregister(vm);
		munmap(mem->host, mem->size);
		close(mem->fd);
		mem->fd = -1;
		mem->host = host;
		mem->layer = l;
		st->dirty_pages = pages;
		st->new_layer = 1;
		if (vm_memory_register(vm, 1, err) < 0) {
			vm_end(vm, VM_EXIT_ERROR, 0, "lost guest memory while freezing it: %s", err->msg);
			return -1;
		}
		return 0;
	}

	bitmap = calloc(1, bytes);
	if (!bitmap)
		return vm_error_set(err, ENOMEM, "out of memory for the dirty-page bitmap");
	if (dirty_log_take(vm, bitmap, err) < 0) {
		free(bitmap);
		return -1;
	}
	st->dirty_pages = mem_layer_count(bitmap, pages);
	st->new_layer = st->dirty_pages > 0;
	if (!st->new_layer) {
		free(bitmap);
		return 0;
	}
	fd = memfd_create("smol-guest-ram-diff", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)mem->size) < 0) {
		int e = errno;

		if (fd >= 0)
			close(fd);
		free(bitmap);
		return vm_error_set(err, e, "cannot create a memory layer: %s", strerror(e));
	}
	for (uint64_t p = 0, run; (p = mem_layer_next_run(bitmap, pages, p, &run)) < pages;) {
		if (pwrite(fd, mem->host + p * SNAP_PAGE_SIZE, run * SNAP_PAGE_SIZE, (off_t)(p * SNAP_PAGE_SIZE)) !=
		    (ssize_t)(run * SNAP_PAGE_SIZE)) {
			int e = errno ? errno : ENOSPC;

			close(fd);
			/* The dirty log was consumed: the pages must still count as dirty next time. */
			for (size_t i = 0; i < bytes; i++)
				mem->vmm_dirty[i] |= bitmap[i];
			free(bitmap);
			return vm_error_set(err, e, "cannot copy dirty guest memory into a layer: %s", strerror(e));
		}
		p += run;
	}
	l = mem_layer_new(fd, MEM_LAYER_DIFF, mem->size, 0, bitmap, mem->layer, err);
	free(bitmap);
	if (!l)
		return -1;
	mem_layer_put(mem->layer);
	mem->layer = l;
	mem_layer_flatten_async(l);
	return 0;
}

static void random_id(uint8_t id[SNAP_ID_SIZE])
{
	if (getrandom(id, SNAP_ID_SIZE, 0) != SNAP_ID_SIZE) {
		uint64_t t = (uint64_t)now_ms() ^ ((uint64_t)getpid() << 32);

		for (int i = 0; i < SNAP_ID_SIZE; i++)
			id[i] = (uint8_t)(t >> (8 * (i % 8))) ^ (uint8_t)i;
	}
	id[0] |= 1;	/* never all zeros, which means "no parent" */
}

static void snapshot_find_disk(struct vm_snapshot *s)
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
	ret = vm_state_save(vm, &w, err);
	if (!ret)
		ret = memory_freeze(vm, &st, err);
	devices_resume(vm);
	vm->next_resources = NULL;
	vm->nr_next_resources = 0;
	vm_release(vm, was_running);
	st.pause_ms = now_ms() - t0;
	random_id(id);
	if (!ret)
		ret = snap_writer_finish(&w, id, NULL, err);
	if (ret < 0) {
		snap_writer_free(&w);
		return ret;
	}
	ret = snapshot_from_blob(w.buf, w.len, "the checkpoint", vm->mem.layer, out, err);
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

static void hex_id(const uint8_t id[SNAP_ID_SIZE], char out[2 * SNAP_ID_SIZE + 1])
{
	for (int i = 0; i < SNAP_ID_SIZE; i++)
		snprintf(out + 2 * i, 3, "%02x", id[i]);
}

void vm_snapshot_get_info(const struct vm_snapshot *s, struct vm_snapshot_info *info)
{
	memset(info, 0, sizeof(*info));
	hex_id(s->parsed.id, info->id);
	info->full = s->layer->kind == MEM_LAYER_FULL;
	info->pages = s->layer->pages;
	info->mem_size = s->info.mem_size;
	info->nr_cpus = (int)s->info.nr_cpus;
	if (s->layer->kind == MEM_LAYER_DIFF && s->layer->parent && s->layer->parent->dir)
		snprintf(info->parent_dir, sizeof(info->parent_dir), "%s", s->layer->parent->dir);
}

/* ---- writing to disk ---- */

/* `to` relative to the directory `from`; both absolute and canonical. */
static void relative_path(const char *from, const char *to, char *out, size_t size)
{
	size_t common = 0, i = 0;
	int ups = 0;

	for (; from[i] && from[i] == to[i]; i++)
		if (from[i] == '/')
			common = i;
	if (!from[i] && (to[i] == '/' || !to[i]))
		common = i;
	for (const char *p = from + common; *p; p++)
		if (*p == '/')
			ups++;
	out[0] = 0;
	for (int k = 0; k < ups; k++)
		strncat(out, "../", size - strlen(out) - 1);
	strncat(out, to[common] == '/' ? to + common + 1 : to + common, size - strlen(out) - 1);
	if (!out[0])
		snprintf(out, size, ".");
	else if (out[strlen(out) - 1] == '/')
		out[strlen(out) - 1] = 0;
}

static int write_all(int fd, const void *buf, size_t len, off_t off)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, off);

		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret;

	if (fd < 0)
		return -1;
	ret = fsync(fd);
	close(fd);
	return ret;
}

static int remove_partial(const char *tmp)
{
	char path[PATH_MAX + 64];

	snprintf(path, sizeof(path), "%s/state", tmp);
	unlink(path);
	snprintf(path, sizeof(path), "%s/memory", tmp);
	unlink(path);
	return rmdir(tmp);
}

/* The absolute form of a directory that may not exist yet (its parent must). */
static int absolute_dir(const char *dir, char out[PATH_MAX], struct vm_error *err)
{
	char copy[PATH_MAX], parent[PATH_MAX];
	char *slash, *base;

	if (!*dir || strlen(dir) >= sizeof(copy) - 1)
		return vm_error_set(err, EINVAL, "snapshot directory name is empty or too long");
	snprintf(copy, sizeof(copy), "%s", dir);
	while (strlen(copy) > 1 && copy[strlen(copy) - 1] == '/')
		copy[strlen(copy) - 1] = 0;
	slash = strrchr(copy, '/');
	if (slash) {
		*slash = 0;
		base = slash + 1;
		if (!realpath(*copy ? copy : "/", parent))
			return vm_error_set(err, errno, "cannot write a snapshot in %s: %s", *copy ? copy : "/",
					    strerror(errno));
	} else {
		base = copy;
		if (!getcwd(parent, sizeof(parent)))
			return vm_error_set(err, errno, "cannot find the current directory: %s", strerror(errno));
	}
	if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
		return vm_error_set(err, EINVAL, "%s is not a name for a new snapshot directory", dir);
	if (snprintf(out, PATH_MAX, "%s/%s", strcmp(parent, "/") ? parent : "", base) >= PATH_MAX)
		return vm_error_set(err, ENAMETOOLONG, "snapshot directory name is too long");
	return 0;
}

static int write_memory(struct vm_snapshot *s, const char *tmp, struct mem_layer *base, vm_progress_fn progress,
			void *opaque, struct vm_snapshot_info *info, struct vm_error *err)
{
	struct mem_layer *top = s->layer;
	uint32_t kind = base ? MEM_LAYER_DIFF : MEM_LAYER_FULL;
	struct mem_layer_header h = { .kind = kind, .mem_size = top->mem_size };
	uint8_t *header = NULL, *bitmap = NULL;
	char path[PATH_MAX + 64];
	int fd, ret = 0;

	h.data_offset = mem_layer_data_offset(kind, h.mem_size);
	memcpy(h.id, s->parsed.id, SNAP_ID_SIZE);
	snprintf(path, sizeof(path), "%s/memory", tmp);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return vm_error_set(err, errno, "cannot create %s: %s", path, strerror(errno));
	header = calloc(1, (size_t)h.data_offset);
	bitmap = calloc(1, (size_t)((h.mem_size / SNAP_PAGE_SIZE + 7) / 8));
	if (!header || !bitmap)
		ret = vm_error_set(err, ENOMEM, "out of memory writing a snapshot");
	if (!ret && ftruncate(fd, (off_t)(h.data_offset + h.mem_size)) < 0)
		ret = vm_error_set(err, errno, "cannot size %s: %s", path, strerror(errno));
	if (!ret && base == top)
		h.pages = 0;	/* nothing changed since the parent: an empty diff */
	else if (!ret)
		ret = mem_layer_copy(top, base, fd, h.data_offset, base ? bitmap : NULL, &h.pages, &info->bytes_written,
				     progress, opaque, err);
	if (!ret) {
		mem_layer_header_encode(&h, bitmap, header);
		if (write_all(fd, header, (size_t)h.data_offset, 0) < 0 || fsync(fd) < 0)
			ret = vm_error_set(err, errno, "cannot write %s: %s", path, strerror(errno));
	}
	info->pages = h.pages;
	free(header);
	free(bitmap);
	close(fd);
	return ret;
}

static int write_state(struct vm_snapshot *s, const char *tmp, struct mem_layer *base, const char *abs_dir,
		       struct vm_error *err)
{
	struct snap_writer w;
	char path[PATH_MAX + 64], rel[PATH_MAX];
	int fd, ret;

	snap_writer_init(&w);
	snap_append(&w, s->blob + SNAP_HEADER_SIZE, s->blob_len - SNAP_HEADER_SIZE - SNAP_TRAILER_SIZE);
	w.nr_sections = s->parsed.nr_sections;
	if (base) {
		relative_path(abs_dir, base->dir, rel, sizeof(rel));
		snap_put(&w, SNAP_PARENT, 0, rel, strlen(rel));
	}
	ret = snap_writer_finish(&w, s->parsed.id, base ? base->snap_id : NULL, err);
	if (ret < 0) {
		snap_writer_free(&w);
		return ret;
	}
	snprintf(path, sizeof(path), "%s/state", tmp);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0 || write_all(fd, w.buf, w.len, 0) < 0 || fsync(fd) < 0)
		ret = vm_error_set(err, errno, "cannot write %s: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	snap_writer_free(&w);
	return ret;
}

int vm_snapshot_write(struct vm_snapshot *s, const char *dir, vm_progress_fn progress, void *opaque,
		      struct vm_snapshot_info *info, struct vm_error *err)
{
	char abs_dir[PATH_MAX], tmp[PATH_MAX + 32], path[PATH_MAX + 40], parent[PATH_MAX];
	struct mem_layer *base = NULL, *top = s->layer;
	struct stat sb;
	int ret;

	memset(info, 0, sizeof(*info));
	ret = absolute_dir(dir, abs_dir, err);
	if (ret < 0)
		return ret;
	if (lstat(abs_dir, &sb) == 0)
		return vm_error_set(err, EEXIST, "%s already exists; a snapshot is written to a new directory", abs_dir);
	/* The newest layer of this chain already on disk, if the chain to it is short enough for a diff. */
	for (struct mem_layer *l = top; l; l = l->parent) {
		int on_disk;

		pthread_mutex_lock(&l->lock);
		on_disk = l->dir != NULL && l->disk_depth < MEM_LAYER_MAX_DEPTH;
		pthread_mutex_unlock(&l->lock);
		if (on_disk) {
			base = l;
			break;
		}
	}
	snprintf(tmp, sizeof(tmp), "%s.partial-%d", abs_dir, (int)getpid());
	remove_partial(tmp);	/* left over from a crash of this very pid number */
	if (mkdir(tmp, 0755) < 0)
		return vm_error_set(err, errno, "cannot create %s: %s", tmp, strerror(errno));
	ret = write_memory(s, tmp, base, progress, opaque, info, err);
	if (!ret)
		ret = write_state(s, tmp, base, abs_dir, err);
	for (int i = 0; !ret && i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", tmp, i ? "memory" : "state");
		if (chmod(path, 0444) < 0)
			ret = vm_error_set(err, errno, "cannot make %s read-only: %s", path, strerror(errno));
	}
	if (!ret && (fsync_dir(tmp) < 0 || rename(tmp, abs_dir) < 0))
		ret = vm_error_set(err, errno, "cannot publish the snapshot as %s: %s", abs_dir, strerror(errno));
	if (ret < 0) {
		remove_partial(tmp);
		return ret;
	}
	snprintf(parent, sizeof(parent), "%s", abs_dir);
	*strrchr(parent, '/') = 0;
	fsync_dir(*parent ? parent : "/");
	hex_id(s->parsed.id, info->id);
	info->full = base == NULL;
	info->mem_size = s->info.mem_size;
	info->nr_cpus = (int)s->info.nr_cpus;
	if (base)
		snprintf(info->parent_dir, sizeof(info->parent_dir), "%s", base->dir);
	if (base != top) {
		int adopt = 0, fd;

		pthread_mutex_lock(&top->lock);
		if (!top->dir) {
			top->dir = strdup(abs_dir);
			memcpy(top->snap_id, s->parsed.id, SNAP_ID_SIZE);
			top->disk_depth = base ? base->disk_depth + 1 : 1;
			adopt = 1;
		}
		pthread_mutex_unlock(&top->lock);
		/* The file holds every page of top (and maybe more): read them from there and let the memfd go. */
		snprintf(path, sizeof(path), "%s/memory", abs_dir);
		fd = adopt ? open(path, O_RDONLY | O_CLOEXEC) : -1;
		if (fd >= 0)
			mem_layer_adopt_file(top, fd, mem_layer_data_offset(base ? MEM_LAYER_DIFF : MEM_LAYER_FULL,
									    top->mem_size));
	}
	return 0;
}

/* ---- opening from disk ---- */

static int read_file(const char *path, size_t max, uint8_t **out, size_t *len, struct vm_error *err)
{
	struct stat sb;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	uint8_t *buf;
	size_t got = 0;

	if (fd < 0)
		return vm_error_set(err, errno, "cannot open %s: %s", path, strerror(errno));
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > max) {
		close(fd);
		return vm_error_set(err, EINVAL, "%s is not a regular file of at most %zu MiB", path, max >> 20);
	}
	buf = malloc(sb.st_size ? (size_t)sb.st_size : 1);
	if (!buf) {
		close(fd);
		return vm_error_set(err, ENOMEM, "out of memory reading %s", path);
	}
	while (got < (size_t)sb.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)sb.st_size - got);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	*out = buf;
	*len = got;
	return 0;
}

static int open_layer(const char *abs_dir, const struct vm_snapshot *s, struct mem_layer *parent,
		      struct mem_layer **out, struct vm_error *err)
{
	char path[PATH_MAX + 8];
	struct mem_layer_header h;
	const uint8_t *bitmap;
	uint8_t head[MEM_LAYER_HEADER_SIZE], *buf = NULL;
	struct stat sb;
	ssize_t got;
	long need;
	int fd;

	snprintf(path, sizeof(path), "%s/memory", abs_dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return vm_error_set(err, errno, "cannot open %s: %s", path, strerror(errno));
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		close(fd);
		return vm_error_set(err, EINVAL, "%s is not a regular file", path);
	}
	got = pread(fd, head, sizeof(head), 0);
	need = mem_layer_header_parse(head, got > 0 ? (size_t)got : 0, (uint64_t)sb.st_size, path, &h, &bitmap, err);
	if (need > 0) {
		buf = malloc((size_t)need);
		if (!buf) {
			close(fd);
			return vm_error_set(err, ENOMEM, "out of memory reading %s", path);
		}
		if (pread(fd, buf, (size_t)need, 0) != need) {
			free(buf);
			close(fd);
			return vm_error_set(err, EIO, "%s is truncated", path);
		}
		need = mem_layer_header_parse(buf, (size_t)need, (uint64_t)sb.st_size, path, &h, &bitmap, err);
	}
	if (need == 0 && h.mem_size != s->info.mem_size)
		need = vm_error_set(err, EINVAL, "%s holds %llu MiB of memory; its state says %llu MiB", path,
				    (unsigned long long)(h.mem_size >> 20), (unsigned long long)(s->info.mem_size >> 20));
	if (need == 0 && memcmp(h.id, s->parsed.id, SNAP_ID_SIZE))
		need = vm_error_set(err, EINVAL, "%s belongs to another snapshot (its id differs from the state's)",
				    path);
	if (need == 0 && (h.kind == MEM_LAYER_DIFF) != (parent != NULL))
		need = vm_error_set(err, EINVAL, "%s is a %s layer but the state %s a parent", path,
				    h.kind == MEM_LAYER_DIFF ? "diff" : "full", parent ? "names" : "names no");
	if (need != 0) {
		free(buf);
		close(fd);
		return -1;
	}
	*out = mem_layer_new(fd, h.kind, h.mem_size, h.data_offset, bitmap, parent, err);
	free(buf);
	if (!*out)
		return -1;
	(*out)->dir = strdup(abs_dir);
	memcpy((*out)->snap_id, s->parsed.id, SNAP_ID_SIZE);
	(*out)->disk_depth = parent ? parent->disk_depth + 1 : 1;
	return 0;
}

static int snapshot_open_at(const char *dir, int depth, struct vm_snapshot **out, struct vm_error *err)
{
	char abs_dir[PATH_MAX], path[PATH_MAX + 8], parent_dir[PATH_MAX + SNAP_MAX_PARENT_PATH + 2];
	struct vm_snapshot *s, *parent = NULL;
	struct mem_layer *layer = NULL;
	uint8_t *blob = NULL;
	size_t len = 0;
	int ret;

	if (depth > SNAP_OPEN_MAX_DEPTH)
		return vm_error_set(err, ELOOP, "%s: more than %d parent snapshots (a loop?)", dir, SNAP_OPEN_MAX_DEPTH);
	if (!realpath(dir, abs_dir))
		return vm_error_set(err, errno, "no snapshot at %s: %s", dir, strerror(errno));
	snprintf(path, sizeof(path), "%s/state", abs_dir);
	ret = read_file(path, SNAP_MAX_SIZE, &blob, &len, err);
	if (ret < 0)
		return ret;
	s = calloc(1, sizeof(*s));
	if (!s) {
		free(blob);
		return vm_error_set(err, ENOMEM, "out of memory for a snapshot");
	}
	s->blob = blob;
	s->blob_len = len;
	s->dir = strdup(abs_dir);
	ret = snap_parse(blob, len, path, &s->parsed, err);
	if (!ret)
		ret = snap_validate(&s->parsed, path, &s->info, err);
	if (!ret && s->info.parent_path[0]) {
		snprintf(parent_dir, sizeof(parent_dir), "%s/%s", abs_dir, s->info.parent_path);
		ret = snapshot_open_at(parent_dir, depth + 1, &parent, err);
		if (ret < 0)
			ret = vm_error_prefix(err, "%s: its parent snapshot: ", abs_dir);
		else if (memcmp(parent->parsed.id, s->parsed.parent, SNAP_ID_SIZE))
			ret = vm_error_set(err, EINVAL, "%s: its parent %s was replaced (the parent's id does not match)",
					   abs_dir, parent->dir);
		else if (parent->info.mem_size != s->info.mem_size)
			ret = vm_error_set(err, EINVAL, "%s: its parent %s has a different memory size", abs_dir,
					   parent->dir);
	}
	if (!ret)
		ret = open_layer(abs_dir, s, parent ? parent->layer : NULL, &layer, err);
	vm_snapshot_put(parent);
	if (ret < 0) {
		vm_snapshot_put(s);
		return ret;
	}
	s->layer = layer;
	snapshot_find_disk(s);
	*out = s;
	return 0;
}

int vm_snapshot_open(const char *dir, struct vm_snapshot **out, struct vm_error *err)
{
	return snapshot_open_at(dir, 0, out, err);
}

/* ---- restore ---- */

static const struct snap_section *section(const struct vm_snapshot *s, uint32_t kind, uint32_t index)
{
	return snap_find(&s->parsed, kind, index);	/* snap_validate made sure it is there with its size */
}

static int set(int fd, unsigned long req, const void *arg, const char *name, int cpu, struct vm_error *err)
{
	if (ioctl(fd, req, arg) < 0) {
		if (cpu >= 0)
			return vm_error_set(err, errno, "restoring vCPU %d: %s: %s", cpu, name, strerror(errno));
		return vm_error_set(err, errno, "restoring the VM: %s: %s", name, strerror(errno));
	}
	return 0;
}

static int vcpu_restore(struct vcpu *cpu, const struct vm_snapshot *s, uint64_t tsc_khz, struct vm_error *err)
{
	const struct snap_section *sec;
	uint32_t id = (uint32_t)cpu->id, count;
	int xsize = xsave_size(cpu->vm), ret, n;
	void *buf;

	if (tsc_khz) {
		int khz = ioctl(cpu->fd, KVM_GET_TSC_KHZ, 0);

		/* A different TSC rate (another host) is scaled when KVM can; otherwise kvmclock copes. */
		if (khz > 0 && ((uint64_t)khz > tsc_khz + tsc_khz / 4000 || (uint64_t)khz + tsc_khz / 4000 < tsc_khz))
			ioctl(cpu->fd, KVM_SET_TSC_KHZ, (unsigned long)tsc_khz);
	}
	buf = get_counted(section(s, SNAP_CPUID, id), sizeof(struct kvm_cpuid_entry2), &count);
	if (!buf)
		return vm_error_set(err, ENOMEM, "out of memory for CPUID");
	ret = set(cpu->fd, KVM_SET_CPUID2, buf, "KVM_SET_CPUID2", cpu->id, err);
	free(buf);
	if (!ret)
		ret = set(cpu->fd, KVM_SET_MP_STATE, section(s, SNAP_MP_STATE, id)->data, "KVM_SET_MP_STATE", cpu->id, err);
	/* REGS before VCPU_EVENTS (setting registers drops pending exceptions); SREGS before LAPIC (APIC base). */
	if (!ret)
		ret = set(cpu->fd, KVM_SET_REGS, section(s, SNAP_REGS, id)->data, "KVM_SET_REGS", cpu->id, err);
	if (!ret)
		ret = set(cpu->fd, KVM_SET_SREGS, section(s, SNAP_SREGS, id)->data, "KVM_SET_SREGS", cpu->id, err);
	if (!ret) {
		sec = section(s, SNAP_XSAVE, id);
		buf = calloc(1, (size_t)xsize > sec->len ? (size_t)xsize : (size_t)sec->len);
		if (!buf)
			return vm_error_set(err, ENOMEM, "out of memory for XSAVE state");
		memcpy(buf, sec->data, (size_t)sec->len);
		ret = set(cpu->fd, KVM_SET_XSAVE, buf, "KVM_SET_XSAVE", cpu->id, err);
		free(buf);
	}
	if (!ret)
		ret = set(cpu->fd, KVM_SET_XCRS, section(s, SNAP_XCRS, id)->data, "KVM_SET_XCRS", cpu->id, err);
	if (!ret)
		ret = set(cpu->fd, KVM_SET_DEBUGREGS, section(s, SNAP_DEBUGREGS, id)->data, "KVM_SET_DEBUGREGS", cpu->id,
			  err);
	/* LAPIC before MSRs, or KVM drops the TSC_DEADLINE write. */
	if (!ret)
		ret = set(cpu->fd, KVM_SET_LAPIC, section(s, SNAP_LAPIC, id)->data, "KVM_SET_LAPIC", cpu->id, err);
	if (!ret) {
		buf = get_counted(section(s, SNAP_MSRS, id), sizeof(struct kvm_msr_entry), &count);
		if (!buf)
			return vm_error_set(err, ENOMEM, "out of memory for MSRs");
		n = ioctl(cpu->fd, KVM_SET_MSRS, buf);
		if (n != (int)count)
			ret = vm_error_set(err, n < 0 ? errno : EINVAL, "restoring vCPU %d: KVM refused MSR 0x%x%s%s",
					   cpu->id, n >= 0 && (uint32_t)n < count ?
					   ((struct kvm_msrs *)buf)->entries[n].index : 0,
					   n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
		free(buf);
	}
	if (!ret)
		ret = set(cpu->fd, KVM_SET_VCPU_EVENTS, section(s, SNAP_VCPU_EVENTS, id)->data, "KVM_SET_VCPU_EVENTS",
			  cpu->id, err);
	return ret;
}

static int vm_state_restore(struct vm *vm, const struct vm_snapshot *s, struct vm_error *err)
{
	struct kvm_clock_data clock, saved;
	int ret;

	ret = set(vm->vm_fd, KVM_SET_PIT2, section(s, SNAP_PIT, 0)->data, "KVM_SET_PIT2", -1, err);
	if (ret)
		return ret;
	/* The saved kvmclock value, not wall time: the guest's monotonic clock goes on from where it stopped. */
	memcpy(&saved, section(s, SNAP_CLOCK, 0)->data, sizeof(saved));
	memset(&clock, 0, sizeof(clock));
	clock.clock = saved.clock;
	ret = set(vm->vm_fd, KVM_SET_CLOCK, &clock, "KVM_SET_CLOCK", -1, err);
	for (uint32_t chip = 0; !ret && chip < 3; chip++) {
		struct kvm_irqchip ic;

		memcpy(&ic, section(s, SNAP_IRQCHIP, chip)->data, sizeof(ic));
		if (ic.chip_id != chip)
			return vm_error_set(err, EINVAL, "snapshot: the IRQCHIP section %u is for chip %u", chip,
					    ic.chip_id);
		ret = set(vm->vm_fd, KVM_SET_IRQCHIP, &ic, "KVM_SET_IRQCHIP", -1, err);
	}
	for (int i = 0; !ret && i < vm->nr_cpus; i++)
		ret = vcpu_restore(&vm->cpus[i], s, s->info.tsc_khz, err);
	return ret;
}

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
		ret = vm_state_restore(vm, s, err);
	if (!ret)
		ret = devices_restore(vm, s, err);
	vm->restoring = NULL;
	if (ret < 0) {
		vm_destroy(vm);
		return ret;
	}
	for (int k = 0; k < vm->nr_devices; k++)
		if (vm->devices[k].type->clone)
			vm->devices[k].type->clone(vm, vm->devices[k].state);
	for (int i = 0; i < vm->nr_cpus; i++)
		ioctl(vm->cpus[i].fd, KVM_KVMCLOCK_CTRL, 0);	/* EINVAL when the guest has no kvmclock: fine */
	vm->state = VM_CREATED;
	*out = vm;
	return 0;
}

/* ---- memory statistics ---- */

#define PAGEMAP_PRESENT (1ULL << 63)
#define PAGEMAP_FILE_OR_SHARED (1ULL << 61)

int vm_memory_stats(struct vm *vm, struct vm_memory_stats *out, struct vm_error *err)
{
	const uint64_t chunk = 65536;
	uint64_t pages = vm->mem.size / SNAP_PAGE_SIZE, host_page = (uint64_t)(uintptr_t)vm->mem.host / SNAP_PAGE_SIZE;
	uint64_t *buf = malloc(chunk * sizeof(uint64_t));
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	int own_memfd = vm->mem.layer == NULL;

	memset(out, 0, sizeof(*out));
	out->guest_bytes = vm->mem.size;
	if (fd < 0 || !buf) {
		free(buf);
		if (fd >= 0)
			close(fd);
		return vm_error_set(err, fd < 0 ? errno : ENOMEM, "cannot read /proc/self/pagemap: %s",
				    fd < 0 ? strerror(errno) : "out of memory");
	}
	for (uint64_t p = 0; p < pages; p += chunk) {
		uint64_t n = pages - p < chunk ? pages - p : chunk;
		ssize_t got = pread(fd, buf, n * 8, (off_t)((host_page + p) * 8));

		if (got != (ssize_t)(n * 8)) {
			free(buf);
			close(fd);
			return vm_error_set(err, EIO, "cannot read /proc/self/pagemap");
		}
		for (uint64_t i = 0; i < n; i++) {
			if (!(buf[i] & PAGEMAP_PRESENT))
				continue;
			out->resident_bytes += SNAP_PAGE_SIZE;
			/* A VM on its own memfd owns every page; over a layer, anonymous pages are its own writes. */
			if (own_memfd || !(buf[i] & PAGEMAP_FILE_OR_SHARED))
				out->private_bytes += SNAP_PAGE_SIZE;
			else
				out->shared_bytes += SNAP_PAGE_SIZE;
		}
	}
	free(buf);
	close(fd);
	return 0;
}
