/*
 * Devices register themselves at the bottom of their own file with DEVICE_REGISTER(), so adding a device edits
 * nothing central. vm_create() calls every registered setup function; vm_destroy() calls the teardowns.
 */
#ifndef SMOL_DEVICE_H
#define SMOL_DEVICE_H

struct vm;
struct vm_error;

struct device_type {
	const char *name;
	int (*setup)(struct vm *vm, void **state, struct vm_error *err);
	void (*teardown)(struct vm *vm, void *state);
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
