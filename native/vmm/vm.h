/* The public API of the VMM library: create a VM, run it, talk to its console, end it. See docs/vmm.md. */
#ifndef SMOL_VM_H
#define SMOL_VM_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define VM_MAX_CPUS 64
#define VM_MIN_MEM_MIB 2
#define VM_MAX_MEM_MIB (256 * 1024)
#define VM_MIN_CONSOLE_LIMIT 64
#define VM_MAX_CONSOLE_LIMIT (64u << 20)
#define VM_MAX_VOLUMES 4	/* virtio-blk disks besides the root disk (slots 5 to 8, virtio_dev.h) */

struct vm;

enum vm_state { VM_CREATED, VM_RUNNING, VM_PAUSED, VM_EXITED };

enum vm_exit_reason {
	VM_EXIT_NONE,
	VM_EXIT_RESET,		/* the guest pulsed the i8042 reset line */
	VM_EXIT_POWEROFF,	/* the guest powered off: ACPI S5 (code 0), or its exit code on the debug-exit port */
	VM_EXIT_SHUTDOWN,	/* triple fault */
	VM_EXIT_KILLED,		/* the host ended it */
	VM_EXIT_ERROR,		/* KVM could not run a vCPU */
	VM_EXIT_PANIC,		/* the guest kernel reported a panic on the pvpanic port */
};

struct vm_exit {
	enum vm_exit_reason reason;
	int code;
	char message[256];
};

struct vm_device_resource;

struct vm_config {
	uint64_t mem_size;	/* bytes, a whole number of MiB */
	int nr_cpus;
	const char *kernel;
	const char *initrd;	/* NULL: none */
	const char *cmdline;	/* NULL: empty */
	uint64_t console_limit;	/* bytes of unread console output before the guest waits; 0: 1 MiB */
	/*
	 * A virtio-blk disk (docs/disks.md), NULL for none: `disk` is the base image (raw), `disk_top` the writable
	 * layer the VM writes to, opened when it exists (it must sit on `disk`) and created over `disk` when not.
	 * Without disk_top the disk is read-only.
	 */
	const char *disk;
	const char *disk_top;
	/*
	 * Further virtio-blk disks (volumes, docs/disks.md "Volumes"): volume i (0-based) is the device
	 * "virtio-blk-<i+1>", /dev/vd? with the serial "smol-vol<i+1>". `base` is its raw image; `top`, as disk_top, its
	 * writable layer (NULL: read-only), which is that device's resource at restores and checkpoints.
	 */
	struct vm_volume_config {
		const char *base;
		const char *top;
	} volumes[VM_MAX_VOLUMES];
	int nr_volumes;
	int rng;		/* a virtio-rng device */
	/*
	 * A virtio-console device on the same console as COM1 (/dev/hvc0; boot Linux with console=hvc0): output goes
	 * out a buffer per VM exit; input goes to it instead of COM1 once the guest's driver is up.
	 */
	int virtio_console;
	/*
	 * A virtio-vsock device (docs/vmm.md, "vsock"), NULL for none: the host side is a Unix socket at `vsock_path`
	 * (Firecracker's muxer: connect, send `CONNECT <port>\n`); the guest's CID is `vsock_cid` (0: 3).
	 */
	const char *vsock_path;
	uint64_t vsock_cid;
	/*
	 * Host resources of devices that the resource alone configures (docs/vmm.md, "Device resources"), the same
	 * list a restore takes, at most VM_BOOT_RESOURCES_MAX: today "virtio-net", the path of its network
	 * configuration (docs/network.md). The two above are the devices' entries too; they may not be given twice.
	 */
	const struct vm_device_resource *resources;
	size_t nr_resources;
};

#define VM_BOOT_RESOURCES_MAX 8

/* Both are called from VMM threads; they must not call back into the VM, only wake the owner. */
struct vm_callbacks {
	void *opaque;
	void (*on_output)(void *opaque);	/* console output is waiting: call vm_console_read() */
	void (*on_exit)(void *opaque);		/* every vCPU thread has ended; called once */
};

int vm_create(const struct vm_config *cfg, const struct vm_callbacks *cb, struct vm **out, struct vm_error *err);
int vm_start(struct vm *vm, struct vm_error *err);
int vm_pause(struct vm *vm, struct vm_error *err);	/* returns when every vCPU is parked */
int vm_resume(struct vm *vm, struct vm_error *err);
void vm_kill(struct vm *vm);				/* ends the VM and joins its threads; idempotent */
void vm_destroy(struct vm *vm);				/* vm_kill, then frees everything */

size_t vm_console_read(struct vm *vm, void *buf, size_t len);
size_t vm_console_write(struct vm *vm, const void *buf, size_t len);

/*
 * Snapshots (docs/snapshots.md). A struct vm_snapshot is a checkpoint in memory: the state blob and the frozen
 * memory layers it references. It can be written to a directory, restored any number of times (a fork is a
 * checkpoint restored n times), and is freed with vm_snapshot_put.
 */
struct vm_snapshot;

struct vm_checkpoint_stats {
	double pause_ms;	/* from the request to park the vCPUs until they run again */
	uint64_t dirty_pages;	/* pages frozen into the new layer (all of RAM on the first checkpoint) */
	int new_layer;		/* 0 when nothing was written since the last checkpoint */
};

struct vm_snapshot_info {
	char id[2 * 16 + 1];	/* hex */
	char parent_dir[4096];	/* the snapshot this one is a diff against; empty for a full one */
	int full;
	uint64_t pages;		/* pages in this snapshot's memory layer */
	uint64_t bytes_written;	/* page data written (zero pages are holes) */
	uint64_t mem_size;
	int nr_cpus;
};

typedef void (*vm_progress_fn)(void *opaque, uint64_t done, uint64_t total);

/*
 * What one device needs from the host at a restore, checkpoint or fork, keyed by the device's name (Firecracker's
 * LoadSnapshotParams in small): a new device adds an entry, not a parameter. Today:
 *   "virtio-blk"    path: the new writable disk layer (it must not exist) over the one the snapshot froze
 *   "virtio-blk-N"  the same for volume N (1 to VM_MAX_VOLUMES), when it is writable
 *   "virtio-vsock"  path: the Unix socket the vsock muxer listens on
 * A name no registered device has is refused (EINVAL), so is a name given twice.
 */
struct vm_device_resource {
	const char *device;
	const char *path;
};

struct vm_checkpoint_params {
	const struct vm_device_resource *resources;
	size_t nr_resources;
};

/* The entry for `device` in a list of resources, or NULL. */
const struct vm_device_resource *vm_device_resource_find(const struct vm_device_resource *resources, size_t nr,
							 const char *device);

/*
 * Parks the vCPUs only while state is captured and memory frozen; a running VM runs again before this returns.
 * A VM with a writable disk freezes its top layer (the snapshot records it) and goes on writing to a new layer at
 * the "virtio-blk" resource's path, which must be given then and must not exist. `params` may be NULL (no
 * resources).
 */
int vm_checkpoint(struct vm *vm, const struct vm_checkpoint_params *params, struct vm_snapshot **out,
		  struct vm_checkpoint_stats *stats, struct vm_error *err);
/* Publishes the snapshot atomically as `dir`, which must not exist. Blocks for the disk writes. */
int vm_snapshot_write(struct vm_snapshot *snap, const char *dir, vm_progress_fn progress, void *opaque,
		      struct vm_snapshot_info *info, struct vm_error *err);
/* Opens and checks a snapshot directory (and its parents) without reading guest memory. */
int vm_snapshot_open(const char *dir, struct vm_snapshot **out, struct vm_error *err);
void vm_snapshot_get_info(const struct vm_snapshot *snap, struct vm_snapshot_info *info);
void vm_snapshot_put(struct vm_snapshot *snap);
struct vm_restore_params {
	uint64_t console_limit;			/* as vm_config's */
	const struct vm_callbacks *cb;
	const struct vm_device_resource *resources;
	size_t nr_resources;
};

/*
 * A new VM (state created: call vm_start) that continues from the snapshot. When the snapshot's disk was writable,
 * the VM writes to a new layer at the "virtio-blk" resource's path (required then; it must not exist) over the
 * frozen one. When the snapshot's VM had a vsock device, the new VM's host side listens at the "virtio-vsock"
 * resource's path (required then); the guest is told that its connections were reset. A fork is a checkpoint
 * restored once per child, each with resources of its own.
 */
int vm_restore(struct vm_snapshot *snap, const struct vm_restore_params *params, struct vm **out,
	       struct vm_error *err);
/* The disk layer a snapshot's disk was frozen in (or its read-only image), or NULL when the VM had no disk. */
const char *vm_snapshot_disk(const struct vm_snapshot *snap);

struct vm_memory_stats {
	uint64_t guest_bytes;		/* the VM's RAM size */
	uint64_t resident_bytes;	/* pages of it mapped in this process (touched) */
	uint64_t private_bytes;		/* of those, pages only this VM has */
	uint64_t shared_bytes;		/* of those, pages read from a snapshot layer that other VMs may map too */
};
int vm_memory_stats(struct vm *vm, struct vm_memory_stats *out, struct vm_error *err);
/* CPU time the VM's running vCPU threads have used so far, in nanoseconds (cheap: no I/O). */
int vm_cpu_time_ns(struct vm *vm, uint64_t *out, struct vm_error *err);

/*
 * Where the time of the operation that made the VM went (trace.h; docs/snapshots.md, "Where the time goes"). The
 * caller that ran the operation keeps its trace in the VM; vm_trace_get gives it back with the VM's vm_start, its
 * first vCPU entry and its first console output in ms since the trace began (-1: not yet).
 */
struct vm_trace;
struct vm_trace_times {
	double start_ms, first_entry_ms, first_output_ms;
};
void vm_trace_keep(struct vm *vm, const struct vm_trace *trace);
void vm_trace_get(struct vm *vm, struct vm_trace *out, struct vm_trace_times *times);

/*
 * Prepared VMs (docs/snapshots.md, "Prepared VMs"): empty KVM VMs made ahead by a background thread, as many as
 * the largest batch asked for in the last 30 s (a fork(n): n; a create or restore: 1), at most `max` (SMOL_VM_POOL,
 * default 64; 0: none). A
 * create, restore or fork child takes one when one is ready; no VM is ever used twice.
 */
#define VM_POOL_LIMIT 1024
struct vm_pool_stats {
	unsigned max, target, ready;
	unsigned long long taken, missed, made, closed, failed;
	unsigned long long reaped;	/* destroyed VMs' fds its thread closed */
	unsigned reaping;		/* and those it has still to close */
	int thread;	/* its thread is running */
};
int vm_pool_set_max(unsigned max, struct vm_error *err);
/* A batch of n VMs is about to be asked for (fork(n) says so first): the pool keeps that many ready from now on. */
void vm_pool_want(unsigned n);
void vm_pool_get_stats(struct vm_pool_stats *out);
/*
 * Stops the thread and closes every prepared VM, and the destroyed VMs' fds it had still to close (the module's
 * unload calls it); a later demand starts it again.
 */
void vm_pool_drain(void);

enum vm_state vm_get_state(struct vm *vm);
void vm_get_exit(struct vm *vm, struct vm_exit *out);
const char *vm_state_name(enum vm_state state);
const char *vm_exit_reason_name(enum vm_exit_reason reason);

#endif
