/* The VM: KVM setup, memory, devices, boot, and the lifecycle (start, pause, resume, kill). */
#define _GNU_SOURCE
#include "boot.h"
#include "device.h"
#include "error.h"
#include "internal.h"
#include "vm_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define KVM_TSS_ADDR 0xfffbd000ULL
#define KVM_IDENTITY_MAP_ADDR 0xfffbc000ULL

static const struct { int cap; const char *name; } required_caps[] = {
	{ KVM_CAP_IRQCHIP, "IRQCHIP" },		{ KVM_CAP_USER_MEMORY, "USER_MEMORY" },
	{ KVM_CAP_SET_TSS_ADDR, "SET_TSS_ADDR" }, { KVM_CAP_PIT2, "PIT2" },
	{ KVM_CAP_EXT_CPUID, "EXT_CPUID" },	{ KVM_CAP_IMMEDIATE_EXIT, "IMMEDIATE_EXIT" },
};

const char *vm_state_name(enum vm_state state)
{
	static const char *names[] = { "created", "running", "paused", "exited" };

	return state <= VM_EXITED ? names[state] : "unknown";
}

const char *vm_exit_reason_name(enum vm_exit_reason reason)
{
	static const char *names[] = {
		[VM_EXIT_NONE] = "none",	[VM_EXIT_RESET] = "reset",	[VM_EXIT_POWEROFF] = "poweroff",
		[VM_EXIT_SHUTDOWN] = "shutdown", [VM_EXIT_KILLED] = "killed",	[VM_EXIT_ERROR] = "error",
		[VM_EXIT_PANIC] = "panic",
	};

	return (unsigned)reason < sizeof(names) / sizeof(names[0]) ? names[reason] : "unknown";
}

static pthread_mutex_t kvm_fd_lock = PTHREAD_MUTEX_INITIALIZER;
static int kvm_fd = -1;

/* /dev/kvm's system ioctls (capabilities, CPUID, MSR lists) hold no per-VM state: one fd serves every VM. */
int vm_kvm_fd(struct vm_error *err)
{
	int fd, version, ret = 0;

	pthread_mutex_lock(&kvm_fd_lock);
	if (kvm_fd >= 0)
		goto out;
	fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		ret = vm_error_set(err, errno, "cannot open /dev/kvm: %s", strerror(errno));
		goto out;
	}
	version = kvm_ioctl(fd, KVM_GET_API_VERSION, 0);
	if (version < 0)
		ret = vm_error_set(err, errno, "/dev/kvm: KVM_GET_API_VERSION: %s", strerror(errno));
	else if (version != KVM_API_VERSION)
		ret = vm_error_set(err, ENOTSUP, "/dev/kvm speaks KVM API %d; the VMM needs %d", version,
				   KVM_API_VERSION);
	for (size_t i = 0; !ret && i < sizeof(required_caps) / sizeof(required_caps[0]); i++) {
		if (kvm_ioctl(fd, KVM_CHECK_EXTENSION, required_caps[i].cap) <= 0)
			ret = vm_error_set(err, ENOTSUP, "KVM lacks the capability KVM_CAP_%s", required_caps[i].name);
	}
	if (ret)
		close(fd);
	else
		kvm_fd = fd;
out:
	fd = kvm_fd;
	pthread_mutex_unlock(&kvm_fd_lock);
	return ret < 0 ? ret : fd;
}

int vm_platform_setup(int vm_fd, struct vm_error *err)
{
	uint64_t identity = KVM_IDENTITY_MAP_ADDR;
	struct kvm_pit_config pit = { .flags = KVM_PIT_SPEAKER_DUMMY };

	if (kvm_ioctl(vm_fd, KVM_SET_TSS_ADDR, KVM_TSS_ADDR) < 0)
		return vm_error_set(err, errno, "KVM_SET_TSS_ADDR: %s", strerror(errno));
	if (kvm_ioctl(vm_fd, KVM_SET_IDENTITY_MAP_ADDR, &identity) < 0)
		return vm_error_set(err, errno, "KVM_SET_IDENTITY_MAP_ADDR: %s", strerror(errno));
	if (kvm_ioctl(vm_fd, KVM_CREATE_IRQCHIP, 0) < 0)
		return vm_error_set(err, errno, "KVM_CREATE_IRQCHIP: %s", strerror(errno));
	if (kvm_ioctl(vm_fd, KVM_CREATE_PIT2, &pit) < 0)
		return vm_error_set(err, errno, "KVM_CREATE_PIT2: %s", strerror(errno));
	return 0;
}

/* A prepared VM when one is ready (vm_pool.c), else a new one with its platform set up. */
static int kvm_open(struct vm *vm, int *prepared, struct vm_error *err)
{
	vm->kvm_fd = vm_kvm_fd(err);
	if (vm->kvm_fd < 0)
		return vm->kvm_fd;
	vm->vm_fd = vm_pool_take();
	*prepared = vm->vm_fd >= 0;
	if (*prepared)
		return 0;
	vm->vm_fd = kvm_ioctl(vm->kvm_fd, KVM_CREATE_VM, 0);
	if (vm->vm_fd < 0)
		return vm_error_set(err, errno, "KVM_CREATE_VM: %s", strerror(errno));
	return vm_platform_setup(vm->vm_fd, err);
}

int vm_memory_register(struct vm *vm, int log_dirty, struct vm_error *err)
{
	struct kvm_userspace_memory_region slots[2] = {
		{ .slot = 0, .guest_phys_addr = 0, .memory_size = vm->mem.low_size,
		  .userspace_addr = (uint64_t)(uintptr_t)vm->mem.host },
		{ .slot = 1, .guest_phys_addr = GUEST_HIGH_START, .memory_size = vm->mem.high_size,
		  .userspace_addr = (uint64_t)(uintptr_t)(vm->mem.host + vm->mem.low_size) },
	};

	for (int i = 0; i < 2 && slots[i].memory_size; i++) {
		slots[i].flags = log_dirty ? KVM_MEM_LOG_DIRTY_PAGES : 0;
		if (kvm_ioctl(vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &slots[i]) < 0)
			return vm_error_set(err, errno, "KVM_SET_USER_MEMORY_REGION (%s): %s", i ? "high" : "low",
					    strerror(errno));
	}
	vm->dirty_log = log_dirty;
	return 0;
}

void vm_memory_unregister(struct vm *vm)
{
	for (uint32_t slot = 0; slot < 2; slot++) {
		struct kvm_userspace_memory_region r = { .slot = slot };

		kvm_ioctl(vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &r);	/* size 0 deletes; a missing slot is fine */
	}
}

static int vm_devices_setup(struct vm *vm, struct vm_error *err)
{
	for (struct device_type *t = device_types(); t; t = t->next) {
		struct device_instance *d;
		int ret;

		if (vm->nr_devices == (int)(sizeof(vm->devices) / sizeof(vm->devices[0])))
			return vm_error_set(err, ENOSPC, "too many devices");
		d = &vm->devices[vm->nr_devices];
		d->type = t;
		if (t->setup) {
			ret = t->setup(vm, &d->state, err);
			if (ret == 1)
				continue;	/* an optional device this VM does not have */
		} else {
			d->state = NULL;
			ret = io_bus_register(&vm->pio, t->port, t->nr_ports, t->pio, NULL);
			if (ret < 0)
				ret = vm_error_set(err, -ret, "cannot register the %s at port 0x%x", t->name, t->port);
		}
		if (ret < 0)
			return ret;
		vm->nr_devices++;
	}
	return 0;
}

static int boot_load_with(struct vm *vm, const struct vm_config *cfg, struct boot_info *info, struct vm_error *err);

static int config_check(const struct vm_config *cfg, struct vm_error *err)
{
	if (cfg->nr_cpus < 1 || cfg->nr_cpus > VM_MAX_CPUS)
		return vm_error_set(err, EINVAL, "cpus must be between 1 and %d (got %d)", VM_MAX_CPUS, cfg->nr_cpus);
	if (cfg->mem_size < ((uint64_t)VM_MIN_MEM_MIB << 20) || cfg->mem_size > ((uint64_t)VM_MAX_MEM_MIB << 20) ||
	    (cfg->mem_size & ((1 << 20) - 1)))
		return vm_error_set(err, EINVAL, "memory must be a whole number of MiB between %d and %d (got %llu bytes)",
				    VM_MIN_MEM_MIB, VM_MAX_MEM_MIB, (unsigned long long)cfg->mem_size);
	if (vm_check_console_limit(cfg->console_limit, err) < 0)
		return -err->code;
	if (!cfg->kernel || !*cfg->kernel)
		return vm_error_set(err, EINVAL, "no kernel given");
	if (cfg->disk_top && !cfg->disk)
		return vm_error_set(err, EINVAL, "a disk top layer needs a disk (its base image)");
	if (cfg->nr_volumes < 0 || cfg->nr_volumes > VM_MAX_VOLUMES)
		return vm_error_set(err, EINVAL, "volumes must be between 0 and %d (got %d)", VM_MAX_VOLUMES,
				    cfg->nr_volumes);
	for (int i = 0; i < cfg->nr_volumes; i++)
		if (!cfg->volumes[i].base || !*cfg->volumes[i].base)
			return vm_error_set(err, EINVAL, "volume %d has no base image", i + 1);
	return 0;
}

/*
 * The command line, with the virtio-mmio devices announced on it (virtio_mmio.device=4K@0xc0001000:5) when the
 * guest is told to ignore ACPI: otherwise the DSDT lists them (acpi.c says why it has to). Returns NULL when it is
 * too long.
 */
static char *boot_cmdline(struct vm *vm, const char *cmdline)
{
	size_t cap = BOOT_CMDLINE_MAX, len;
	char *s = calloc(1, cap);

	if (!s)
		return NULL;
	snprintf(s, cap, "%s", cmdline ? cmdline : "");
	if (!cmdline || !strstr(cmdline, "acpi=off"))
		return s;
	for (int i = 0; i < vm->nr_virtio; i++) {
		len = strlen(s);
		if ((size_t)snprintf(s + len, cap - len, "%svirtio_mmio.device=%uK@0x%llx:%u", len ? " " : "",
				     vm->virtio[i].len >> 10, (unsigned long long)vm->virtio[i].base,
				     vm->virtio[i].gsi) >= cap - len) {
			free(s);
			return NULL;
		}
	}
	return s;
}

static int boot_load(struct vm *vm, const struct vm_config *cfg, struct vm_error *err)
{
	struct boot_info info = { .nr_cpus = cfg->nr_cpus, .virtio = vm->virtio, .nr_virtio = vm->nr_virtio };
	char *cmdline = boot_cmdline(vm, cfg->cmdline);
	int ret;

	if (!cmdline)
		return vm_error_set(err, E2BIG, "the kernel command line with the virtio devices on it is longer than "
				    "%d bytes", BOOT_CMDLINE_MAX - 1);
	info.cmdline = cmdline;
	ret = boot_load_with(vm, cfg, &info, err);
	free(cmdline);
	return ret;
}

static int boot_load_with(struct vm *vm, const struct vm_config *cfg, struct boot_info *info, struct vm_error *err)
{
	int ret = loader_load_kernel(&vm->mem, cfg->kernel, &vm->kernel, err);

	if (ret < 0)
		return ret;
	if (cfg->initrd && *cfg->initrd) {
		ret = loader_load_initrd(&vm->mem, cfg->initrd, vm->kernel.end, (uint64_t)vm->kernel.initrd_addr_max + 1,
					 &info->initrd_addr, &info->initrd_size, err);
		if (ret < 0)
			return ret;
	}
	ret = boot_setup(&vm->mem, &vm->kernel, info, err);
	if (ret < 0)
		return ret;
	return vcpu_setup_boot(&vm->cpus[0], vm->kernel.entry, err);
}

void vm_stamp_once(double *at)
{
	double zero = 0, now = trace_now_ms();

	__atomic_compare_exchange(at, &zero, &now, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

/* The console's output callback: the first one is the VM's first output (trace.h). */
static void vm_on_output(void *opaque)
{
	struct vm *vm = opaque;

	if (!__atomic_load_n((uint64_t *)(void *)&vm->t_first_output, __ATOMIC_RELAXED))
		vm_stamp_once(&vm->t_first_output);
	if (vm->cb.on_output)
		vm->cb.on_output(vm->cb.opaque);
}

void vm_trace_keep(struct vm *vm, const struct vm_trace *trace)
{
	vm->trace = *trace;
}

void vm_trace_get(struct vm *vm, struct vm_trace *out, struct vm_trace_times *times)
{
	double at[3];

	*out = vm->trace;
	__atomic_load(&vm->t_start, &at[0], __ATOMIC_RELAXED);
	__atomic_load(&vm->t_first_entry, &at[1], __ATOMIC_RELAXED);
	__atomic_load(&vm->t_first_output, &at[2], __ATOMIC_RELAXED);
	times->start_ms = at[0] ? at[0] - out->t0 : -1;
	times->first_entry_ms = at[1] ? at[1] - out->t0 : -1;
	times->first_output_ms = at[2] ? at[2] - out->t0 : -1;
}

struct vm *vm_alloc(int nr_cpus, uint64_t console_limit, const struct vm_callbacks *cb, struct vm_error *err)
{
	struct vm *vm = calloc(1, sizeof(*vm));

	if (!vm) {
		vm_error_set(err, ENOMEM, "out of memory");
		return NULL;
	}
	vm->kvm_fd = vm->vm_fd = -1;
	vm->mem.fd = -1;
	vm->nr_cpus = nr_cpus;
	if (cb)
		vm->cb = *cb;
	pthread_mutex_init(&vm->lock, NULL);
	pthread_cond_init(&vm->cond, NULL);
	vm->cpus = calloc((size_t)nr_cpus, sizeof(*vm->cpus));
	if (!vm->cpus || console_init(&vm->console, console_limit, vm_on_output, vm) < 0) {
		free(vm->cpus);
		pthread_cond_destroy(&vm->cond);
		pthread_mutex_destroy(&vm->lock);
		free(vm);
		vm_error_set(err, ENOMEM, "out of memory");
		return NULL;
	}
	for (int i = 0; i < nr_cpus; i++)
		vm->cpus[i].fd = -1;
	vm_debug_register(vm);
	trace_step("VM structure");
	return vm;
}

int vm_build(struct vm *vm, uint64_t mem_size, struct mem_layer *layer, struct vm_error *err)
{
	int boot = layer == NULL, prepared = 0;
	int ret = kvm_open(vm, &prepared, err);

	trace_step(prepared ? "KVM VM (a prepared one)" : "KVM VM (KVM_CREATE_VM, irqchip, PIT)");
	if (!ret)
		ret = boot ? guest_mem_init(&vm->mem, mem_size, err) : guest_mem_init_layer(&vm->mem, layer, err);
	trace_step(boot ? "guest RAM (memfd)" : "guest RAM (map layers)");
	if (!ret)
		ret = vm_memory_register(vm, !boot, err);	/* a restored VM's next checkpoint is a diff */
	trace_step("memory slots");
	for (int i = 0; !ret && i < vm->nr_cpus; i++)
		ret = vcpu_create(vm, i, boot, err);
	trace_step(boot ? "vCPUs (CPUID, MSRs, FPU, LAPIC)" : "vCPUs");
	if (!ret)
		ret = vm_devices_setup(vm, err);
	trace_step("devices setup");
	return ret;
}

int vm_check_console_limit(uint64_t limit, struct vm_error *err)
{
	if (limit && (limit < VM_MIN_CONSOLE_LIMIT || limit > VM_MAX_CONSOLE_LIMIT))
		return vm_error_set(err, EINVAL, "console buffer must be between %d bytes and %u MiB (got %llu bytes)",
				    VM_MIN_CONSOLE_LIMIT, VM_MAX_CONSOLE_LIMIT >> 20, (unsigned long long)limit);
	return 0;
}

int vm_create(const struct vm_config *cfg, const struct vm_callbacks *cb, struct vm **out, struct vm_error *err)
{
	/* The config's host paths are the devices' entries, as a restore's resources are. */
	struct vm_device_resource boot[2 + VM_MAX_VOLUMES + VM_BOOT_RESOURCES_MAX];
	static const char *const volume_names[VM_MAX_VOLUMES] = { "virtio-blk-1", "virtio-blk-2", "virtio-blk-3",
								   "virtio-blk-4" };
	size_t nr = 0;
	struct vm *vm;
	int ret = config_check(cfg, err);

	if (ret < 0)
		return ret;
	if (cfg->nr_resources > VM_BOOT_RESOURCES_MAX)
		return vm_error_set(err, EINVAL, "more than %d device resources", VM_BOOT_RESOURCES_MAX);
	for (size_t i = 0; i < cfg->nr_resources; i++)
		boot[nr++] = cfg->resources[i];
	if (cfg->disk_top)
		boot[nr++] = (struct vm_device_resource){ "virtio-blk", cfg->disk_top };
	if (cfg->vsock_path)
		boot[nr++] = (struct vm_device_resource){ "virtio-vsock", cfg->vsock_path };
	for (int i = 0; i < cfg->nr_volumes; i++)
		if (cfg->volumes[i].top)
			boot[nr++] = (struct vm_device_resource){ volume_names[i], cfg->volumes[i].top };
	vm = vm_alloc(cfg->nr_cpus, cfg->console_limit, cb, err);
	if (!vm)
		return -1;
	vm->devcfg.rng = cfg->rng;
	vm->devcfg.virtio_console = cfg->virtio_console;
	vm->devcfg.disk = cfg->disk ? strdup(cfg->disk) : NULL;
	vm->devcfg.vsock_cid = cfg->vsock_cid ? cfg->vsock_cid : 3;
	for (int i = 0; i < cfg->nr_volumes; i++)
		if (!(vm->devcfg.volumes[i] = strdup(cfg->volumes[i].base)))
			ret = -ENOMEM;
	if ((cfg->disk && !vm->devcfg.disk) || ret < 0) {
		vm_destroy(vm);
		return vm_error_set(err, ENOMEM, "out of memory");
	}
	ret = vm_set_resources(vm, boot, nr, err);
	if (!ret)
		ret = vm_build(vm, cfg->mem_size, NULL, err);
	if (!ret)
		ret = boot_load(vm, cfg, err);
	trace_step("kernel and boot data");
	if (ret < 0) {
		vm_destroy(vm);
		return ret;
	}
	vm->state = VM_CREATED;
	*out = vm;
	return 0;
}

int vm_start(struct vm *vm, struct vm_error *err)
{
	int ret = 0;

	vcpu_signal_init();
	pthread_mutex_lock(&vm->lock);
	if (vm->state != VM_CREATED || vm->stop_req) {
		ret = vm_error_set(err, vm->stop_req || vm->state == VM_EXITED ? ESRCH : EBUSY,
				   "cannot start: the VM is %s", vm->stop_req ? "being stopped" : vm_state_name(vm->state));
		goto out;
	}
	vm->state = VM_RUNNING;
	vm_stamp_once(&vm->t_start);
	for (int i = 0; i < vm->nr_cpus; i++) {
		struct vcpu *cpu = &vm->cpus[i];
		int e = pthread_create(&cpu->thread, NULL, vcpu_thread, cpu);

		if (e) {
			vm->stop_req = 1;
			ret = vm_error_set(err, e, "cannot start vCPU thread %d: %s", i, strerror(e));
			break;
		}
		cpu->thread_started = cpu->running = 1;
		vm->alive++;
	}
out:
	pthread_mutex_unlock(&vm->lock);
	if (ret < 0 && vm->alive)
		vm_end(vm, VM_EXIT_ERROR, 0, "%s", err ? err->msg : "cannot start every vCPU");
	return ret;
}

/* Called with vm->lock held. */
static void vm_kick_all(struct vm *vm)
{
	for (int i = 0; i < vm->nr_cpus; i++)
		if (vm->cpus[i].running)
			vcpu_kick(&vm->cpus[i]);
}

/* Pauses a running VM and returns when every vCPU is parked. The caller holds vm->lock; it is dropped meanwhile. */
static void pause_locked(struct vm *vm)
{
	vm->pause_req = 1;
	vm_kick_all(vm);
	pthread_mutex_unlock(&vm->lock);
	console_hold(&vm->console, 1);	/* a vCPU waiting for console room must get back to its run loop */

	pthread_mutex_lock(&vm->lock);
	while (vm->parked < vm->alive && !vm->stop_req)
		pthread_cond_wait(&vm->cond, &vm->lock);
	if (vm->state == VM_RUNNING)
		vm->state = VM_PAUSED;
}

/* The caller holds vm->lock and the VM is paused; the lock is dropped on return. */
static void resume_locked(struct vm *vm)
{
	vm->pause_req = 0;
	vm->state = VM_RUNNING;
	pthread_cond_broadcast(&vm->cond);
	pthread_mutex_unlock(&vm->lock);
	console_hold(&vm->console, 0);
}

/*
 * Takes vm->lock and checks the VM is in `want` and no checkpoint holds it. On failure the lock is dropped and the
 * error says why `what` ("pause") cannot be done.
 */
static int lock_in_state(struct vm *vm, enum vm_state want, const char *what, struct vm_error *err)
{
	enum vm_state s;
	int busy;

	pthread_mutex_lock(&vm->lock);
	s = vm->state;
	busy = vm->busy;
	if (!busy && s == want)
		return 0;
	pthread_mutex_unlock(&vm->lock);
	if (busy)
		return vm_error_set(err, EBUSY, "cannot %s: a checkpoint is in progress", what);
	return vm_error_set(err, s == VM_EXITED ? ESRCH : EBUSY, "cannot %s: the VM is %s", what, vm_state_name(s));
}

int vm_pause(struct vm *vm, struct vm_error *err)
{
	int ret = lock_in_state(vm, VM_RUNNING, "pause", err);

	if (ret < 0)
		return ret;
	pause_locked(vm);
	pthread_mutex_unlock(&vm->lock);
	return 0;
}

int vm_resume(struct vm *vm, struct vm_error *err)
{
	int ret = lock_in_state(vm, VM_PAUSED, "resume", err);

	if (ret < 0)
		return ret;
	resume_locked(vm);
	return 0;
}

int vm_hold(struct vm *vm, int *was_running, struct vm_error *err)
{
	pthread_mutex_lock(&vm->lock);
	if (vm->busy || vm->stop_req || (vm->state != VM_RUNNING && vm->state != VM_PAUSED)) {
		enum vm_state s = vm->state;
		int busy = vm->busy;

		pthread_mutex_unlock(&vm->lock);
		if (busy)
			return vm_error_set(err, EBUSY, "a checkpoint is already in progress");
		if (s == VM_EXITED || vm->stop_req)
			return vm_error_set(err, ESRCH, "the VM is exiting or has exited");
		return vm_error_set(err, EBUSY, "the VM is %s", s == VM_CREATED ? "not started yet" : vm_state_name(s));
	}
	vm->busy = 1;
	*was_running = vm->state == VM_RUNNING;
	if (*was_running)
		pause_locked(vm);
	if (vm->stop_req) {
		vm->busy = 0;
		pthread_mutex_unlock(&vm->lock);
		return vm_error_set(err, ESRCH, "the VM exited");
	}
	pthread_mutex_unlock(&vm->lock);
	return 0;
}

void vm_release(struct vm *vm, int was_running)
{
	pthread_mutex_lock(&vm->lock);
	vm->busy = 0;
	if (was_running && vm->state == VM_PAUSED && !vm->stop_req)
		resume_locked(vm);
	else
		pthread_mutex_unlock(&vm->lock);
}

static void vm_request_stop(struct vm *vm, enum vm_exit_reason reason, int code, const char *fmt, va_list ap)
{
	pthread_mutex_lock(&vm->lock);
	if (vm->exit.reason == VM_EXIT_NONE) {
		vm->exit.reason = reason;
		vm->exit.code = code;
		vsnprintf(vm->exit.message, sizeof(vm->exit.message), fmt, ap);
	}
	vm->stop_req = 1;
	pthread_cond_broadcast(&vm->cond);
	vm_kick_all(vm);
	pthread_mutex_unlock(&vm->lock);
	console_close(&vm->console);
}

void vm_end(struct vm *vm, enum vm_exit_reason reason, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vm_request_stop(vm, reason, code, fmt, ap);
	va_end(ap);
}

void vm_kill(struct vm *vm)
{
	int notify = 0;

	vm_end(vm, VM_EXIT_KILLED, 0, "killed by the host");
	pthread_mutex_lock(&vm->lock);
	if (vm->joined) {
		pthread_mutex_unlock(&vm->lock);
		return;
	}
	vm->joined = 1;
	pthread_mutex_unlock(&vm->lock);
	for (int i = 0; i < vm->nr_cpus; i++)
		if (vm->cpus[i].thread_started)
			pthread_join(vm->cpus[i].thread, NULL);
	pthread_mutex_lock(&vm->lock);
	vm->state = VM_EXITED;
	if (!vm->exit_notified) {
		vm->exit_notified = 1;	/* no vCPU thread ever ran, so none announced the end */
		notify = 1;
	}
	pthread_mutex_unlock(&vm->lock);
	if (notify && vm->cb.on_exit)
		vm->cb.on_exit(vm->cb.opaque);
}

void vm_destroy(struct vm *vm)
{
	if (!vm)
		return;
	vm_debug_unregister(vm);
	vm->cb.on_exit = NULL;
	vm->console.on_output = NULL;
	vm_kill(vm);
	for (int i = vm->nr_devices - 1; i >= 0; i--)
		if (vm->devices[i].type->teardown)
			vm->devices[i].type->teardown(vm, vm->devices[i].state);
	for (int i = 0; i < vm->nr_cpus; i++)
		vcpu_destroy(&vm->cpus[i]);
	guest_mem_exit(&vm->mem);
	if (vm->vm_fd >= 0)
		vm_pool_release(vm->vm_fd);	/* its slow last close, off this thread; vm->kvm_fd is the process's */
	console_exit(&vm->console);
	free(vm->devcfg.disk);
	for (int i = 0; i < VM_MAX_VOLUMES; i++)
		free(vm->devcfg.volumes[i]);
	for (size_t i = 0; i < vm->nr_resources; i++) {
		free((char *)vm->resources[i].device);
		free((char *)vm->resources[i].path);
	}
	free(vm->resources);
	pthread_cond_destroy(&vm->cond);
	pthread_mutex_destroy(&vm->lock);
	free(vm->cpus);
	free(vm);
}

int vm_irq_line(struct vm *vm, unsigned irq, int level)
{
	struct kvm_irq_level line = { .irq = irq, .level = (uint32_t)level };

	return kvm_ioctl(vm->vm_fd, KVM_IRQ_LINE, &line) < 0 ? -errno : 0;
}

size_t vm_console_read(struct vm *vm, void *buf, size_t len)
{
	return console_out_read(&vm->console, buf, len);
}

size_t vm_console_write(struct vm *vm, const void *buf, size_t len)
{
	size_t n = console_in_write(&vm->console, buf, len);

	for (int i = 0; n && i < vm->nr_frontends; i++)
		vm->frontends[i].fe->input_ready(vm->frontends[i].dev);
	return n;
}

enum vm_state vm_get_state(struct vm *vm)
{
	enum vm_state s;

	pthread_mutex_lock(&vm->lock);
	s = vm->state;
	pthread_mutex_unlock(&vm->lock);
	return s;
}

void vm_get_exit(struct vm *vm, struct vm_exit *out)
{
	pthread_mutex_lock(&vm->lock);
	*out = vm->exit;
	pthread_mutex_unlock(&vm->lock);
}

const char *vm_resource(const struct vm *vm, const char *device)
{
	const struct vm_device_resource *r = vm_device_resource_find(vm->resources, vm->nr_resources, device);

	return r ? r->path : NULL;
}

const char *vm_next_resource(const struct vm *vm, const char *device)
{
	const struct vm_device_resource *r = vm_device_resource_find(vm->next_resources, vm->nr_next_resources, device);

	return r ? r->path : NULL;
}

int vm_set_resources(struct vm *vm, const struct vm_device_resource *resources, size_t nr, struct vm_error *err)
{
	int ret = vm_resources_check(resources, nr, err);

	if (ret < 0)
		return ret;
	vm->resources = nr ? calloc(nr, sizeof(*vm->resources)) : NULL;
	if (nr && !vm->resources)
		return vm_error_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < nr; i++) {
		char *device = strdup(resources[i].device), *path = strdup(resources[i].path);

		vm->resources[vm->nr_resources++] = (struct vm_device_resource){ device, path };
		if (!device || !path)
			return vm_error_set(err, ENOMEM, "out of memory");
	}
	return 0;
}
