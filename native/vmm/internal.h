/* What the VMM's own files share: the VM and vCPU structures. Not part of the library's API. */
#ifndef SMOL_INTERNAL_H
#define SMOL_INTERNAL_H

#include <linux/kvm.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "boot.h"
#include "console.h"
#include "guest_mem.h"
#include "io.h"
#include "loader.h"
#include "trace.h"
#include "vm.h"

struct vcpu {
	struct vm *vm;
	int id;
	int fd;
	struct kvm_run *run;
	size_t run_size;
	pthread_t thread;
	int thread_started;
	int running;		/* under vm->lock: the thread has not finished yet (safe to signal) */
	int parked;
	int io_pending;		/* vCPU thread only: an I/O exit was handled and KVM_RUN has not completed it yet */
	/* For SMOL_DEBUG_DUMP (vm_debug_dump): written by the vCPU thread, read racily by the dumper. */
	int in_run;		/* inside KVM_RUN */
	int last_exit;		/* the last KVM_RUN's exit reason, or -errno */
	uint64_t nr_runs;
};

/*
 * A device the guest reads its console from (COM1, the virtio-console). Console input goes to the first front end,
 * in rank order, that takes it now (vm_console_input_owner): the one place that is decided. Every front end is told
 * when input arrives and pulls it only while it is the owner.
 */
struct console_frontend {
	const char *name;
	int (*takes_input)(void *dev);	/* NULL: always (the last resort) */
	void (*input_ready)(void *dev);
};

enum console_rank {
	CONSOLE_RANK_FIRST = 0,		/* a virtio-console, once its driver is up */
	CONSOLE_RANK_LAST = 1,		/* COM1: whenever no other takes it */
};

struct console_input {
	const struct console_frontend *fe;
	void *dev;
	int rank;
};

#define VM_MAX_CONSOLE_FRONTENDS 4

struct device_instance {
	const struct device_type *type;
	void *state;
};

/*
 * What optional devices a VM has: from its vm_config, or for a restore from the snapshot. What they use on the host
 * (a disk's writable layer, the vsock socket) is in vm->resources, by device name.
 */
struct vm_device_config {
	char *disk;		/* owned copy */
	char *volumes[VM_MAX_VOLUMES];	/* owned copies of the volumes' base images; NULL: no such volume */
	int rng;
	int virtio_console;
	uint64_t vsock_cid;
};

struct vm {
	int kvm_fd, vm_fd;
	struct guest_mem mem;
	int nr_cpus;
	struct vcpu *cpus;
	struct io_bus pio, mmio;
	struct console console;
	struct console_input frontends[VM_MAX_CONSOLE_FRONTENDS];	/* in rank order */
	int nr_frontends;
	struct device_instance devices[24];
	int nr_devices;
	struct kernel_image kernel;
	struct vm_callbacks cb;
	struct vm_device_config devcfg;
	/*
	 * What its devices use on the host, by device name (vm.h, struct vm_device_resource): owned copies, from the
	 * vm_config at a boot (disk_top, vsock_path), from vm_restore_params at a restore. A device reads its own entry
	 * with vm_resource(); no device's entry has a field of its own here.
	 */
	struct vm_device_resource *resources;
	size_t nr_resources;
	/* During vm_checkpoint only: the caller's, what the devices go on with (vm_next_resource). */
	const struct vm_device_resource *next_resources;
	size_t nr_next_resources;
	const struct snap_blob *restoring;	/* during vm_restore: the snapshot's sections (which devices exist) */
	struct boot_virtio virtio[BOOT_MAX_VIRTIO];	/* virtio-mmio windows, in slot order */
	int nr_virtio;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	enum vm_state state;
	int pause_req, stop_req, alive, parked, joined, exit_notified;
	int busy;		/* a checkpoint holds the VM: pause and resume from outside are refused */
	int dirty_log;		/* the memory slots log dirty pages */
	struct vm_exit exit;
	struct vm *debug_next;	/* SMOL_DEBUG_DUMP's list of live VMs */
	/*
	 * The operation that made it (trace.h, vm_trace_keep), and CLOCK_MONOTONIC ms of its vm_start, of vCPU 0's
	 * first KVM_RUN and of its first console output (0: not yet; written once, by whichever thread sees it).
	 */
	struct vm_trace trace;
	double t_start, t_first_entry, t_first_output;
};

/* vm.c, for snapshot.c: the parts of creating a VM that a restore shares with a boot. */
struct vm *vm_alloc(int nr_cpus, uint64_t console_limit, const struct vm_callbacks *cb, struct vm_error *err);
/* KVM, guest RAM (fresh of mem_size bytes, or with a layer a private copy of it), the vCPUs and the devices. */
int vm_build(struct vm *vm, uint64_t mem_size, struct mem_layer *layer, struct vm_error *err);
int vm_check_console_limit(uint64_t limit, struct vm_error *err);
/* The process's /dev/kvm, opened and checked (API version, capabilities) once; never closed. */
int vm_kvm_fd(struct vm_error *err);
/* TSS and identity-map addresses, the in-kernel irqchip and PIT of a new VM (vm_pool.c prepares VMs with it). */
int vm_platform_setup(int vm_fd, struct vm_error *err);
int vm_memory_register(struct vm *vm, int log_dirty, struct vm_error *err);
void vm_memory_unregister(struct vm *vm);
/*
 * Holds a running or paused VM for a checkpoint: marks it busy (outside pause and resume are refused) and parks
 * every vCPU. vm_release lets it go, resuming it when it was running.
 */
int vm_hold(struct vm *vm, int *was_running, struct vm_error *err);
void vm_release(struct vm *vm, int was_running);

/* console_frontend.c: console front ends, added by devices at setup and removed at teardown. */
int vm_console_frontend_add(struct vm *vm, const struct console_frontend *fe, void *dev, int rank,
			    struct vm_error *err);
void vm_console_frontend_remove(struct vm *vm, void *dev);
/* The front end console input goes to now, or NULL when there is none. */
const struct console_frontend *vm_console_input_owner(struct vm *vm);

/* virtio_blk_vm.c, for snapshot.c: the disk path in a virtio-blk device section (into out), or NULL. */
const char *vm_snapshot_disk_section(const uint8_t *data, size_t len, char *out, size_t out_len);

/* Ends the VM from inside (a device or a vCPU): records the first reason and asks every vCPU to stop. */
void vm_end(struct vm *vm, enum vm_exit_reason reason, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
int vm_irq_line(struct vm *vm, unsigned irq, int level);

/*
 * Debugging (SMOL_DEBUG_DUMP=1 or =FILE): SIGUSR1 prints every live VM's vCPUs, interrupt controllers and UART to
 * stderr or FILE. vm_debug_register and _unregister are called by vm_alloc and vm_destroy.
 */
void vm_debug_register(struct vm *vm);
void vm_debug_unregister(struct vm *vm);
void vm_debug_dump(struct vm *vm, FILE *out);

/* Sets *at (a CLOCK_MONOTONIC ms time of struct vm) to now unless it is set already. */
void vm_stamp_once(double *at);

/* cpu.c */
/* boot: set CPUID, MSRs, FPU and LAPIC for a first boot; a restore sets them from the snapshot instead. */
int vcpu_create(struct vm *vm, int id, int boot, struct vm_error *err);
int vcpu_setup_boot(struct vcpu *cpu, uint64_t entry, struct vm_error *err);
void vcpu_destroy(struct vcpu *cpu);
void *vcpu_thread(void *arg);
void vcpu_kick(struct vcpu *cpu);
void vcpu_signal_init(void);

/* The path of this VM's resource for `device` ("virtio-blk"), or NULL. */
const char *vm_resource(const struct vm *vm, const char *device);
/* During vm_checkpoint: the path the caller gave `device` to go on with, or NULL. */
const char *vm_next_resource(const struct vm *vm, const char *device);
/* Takes copies of `resources` as the VM's (checked first: vm_resources_check). */
int vm_set_resources(struct vm *vm, const struct vm_device_resource *resources, size_t nr, struct vm_error *err);
/* Every entry names a registered device, once, with a path; else EINVAL naming it. */
int vm_resources_check(const struct vm_device_resource *resources, size_t nr, struct vm_error *err);

#endif
