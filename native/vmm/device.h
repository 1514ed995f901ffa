/*
 * Devices register themselves at the bottom of their own file with DEVICE_REGISTER(), so adding a device edits
 * nothing central. vm_create() calls every registered setup function; vm_destroy() calls the teardowns. A device
 * that is only a handler on a range of I/O ports, with no state, names the range and the handler instead of a setup
 * function, and vm_create() registers it.
 */
#ifndef SMOL_DEVICE_H
#define SMOL_DEVICE_H

#include <stdint.h>

#include "io.h"

struct vm;
struct vm_error;

struct device_type {
	const char *name;
	int (*setup)(struct vm *vm, void **state, struct vm_error *err);
	void (*teardown)(struct vm *vm, void *state);
	/* Instead of setup, for a stateless port device: ports [port, port + nr_ports) go to pio (opaque NULL). */
	uint16_t port, nr_ports;
	io_handler_fn pio;
	struct device_type *next;
};

void device_type_register(struct device_type *type);
struct device_type *device_types(void);

#define DEVICE_REGISTER(type)                                                         \
	static void __attribute__((constructor)) type##_register(void)                 \
	{                                                                              \
		device_type_register(&(type));                                         \
	}

#endif
