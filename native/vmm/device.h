/*
 * Devices register themselves at the bottom of their own file with DEVICE_REGISTER(type, level), so adding a device
 * edits nothing central (docs/devices.md). vm_create() calls every registered setup function in order of level,
 * then of name, whatever the link order; vm_destroy() calls the teardowns in the reverse order. A device that is
 * only a handler on a range of I/O ports, with no state, names the range and the handler instead of a setup
 * function, and vm_create() registers it.
 */
#ifndef SMOL_DEVICE_H
#define SMOL_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "io.h"

struct vm;
struct vm_error;
struct snap_writer;

/* Setup order, kvmtool's util-init.h levels in small. */
enum device_prio {
	DEV_PRIO_CORE = 1,	/* the PC's own ports: COM1, i8042, debug exit */
	DEV_PRIO_PLATFORM = 2,	/* what the ACPI tables describe: sleep, pvpanic, vmgenid */
	DEV_PRIO_VIRTIO = 3,	/* virtio-mmio devices (their slots, not this order, fix their windows) */
};

struct device_type {
	const char *name;
	enum device_prio prio;	/* set by DEVICE_REGISTER */
	/* Returns 0, -errno with err set, or 1 when this VM does not have the device (an optional one). */
	int (*setup)(struct vm *vm, void **state, struct vm_error *err);
	void (*teardown)(struct vm *vm, void *state);
	/* Instead of setup, for a stateless port device: ports [port, port + nr_ports) go to pio (opaque NULL). */
	uint16_t port, nr_ports;
	io_handler_fn pio;
	/*
	 * Snapshots (docs/snapshots.md), all optional. save appends the device's state to a DEVICE section; load puts
	 * it back into a device that setup has just created (untrusted bytes: check every length and value). clone is
	 * called after a restore or fork, before any vCPU runs: re-raise interrupts, mint a new identity.
	 */
	int (*save)(struct vm *vm, void *state, struct snap_writer *w);
	int (*load)(struct vm *vm, void *state, const uint8_t *data, size_t len, struct vm_error *err);
	void (*clone)(struct vm *vm, void *state);
	/*
	 * Optional, around a checkpoint, with every vCPU parked: quiesce stops the device's own threads touching guest
	 * memory (and prepares what save records, such as freezing a disk layer); resume lets them go on.
	 */
	int (*quiesce)(struct vm *vm, void *state, struct vm_error *err);
	void (*resume)(struct vm *vm, void *state);
	struct device_type *next;
};

void device_type_register(struct device_type *type);
struct device_type *device_types(void);

#define DEVICE_REGISTER(type, level)                                                  \
	static void __attribute__((constructor)) type##_register(void)                 \
	{                                                                              \
		(type).prio = (level);                                                 \
		device_type_register(&(type));                                         \
	}

#endif
