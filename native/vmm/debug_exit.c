/*
 * Debug exit: a byte written to port 0x501 ends the VM with reason `poweroff` and that byte as the exit code.
 * Tiny test guests use it to end with a status; Linux guests never touch the port.
 */
#include "device.h"
#include "internal.h"


#define DEBUG_EXIT_PORT 0x501

static void debug_exit_io(struct vm *vm, uint64_t offset, uint8_t *data, uint32_t len, int is_write, void *opaque)
{
	(void)offset;
	(void)len;
	(void)opaque;
	if (is_write)
		vm_end(vm, VM_EXIT_POWEROFF, data[0], "the guest powered off with code %u", data[0]);
	else
		data[0] = 0xff;
}

static struct device_type debug_exit_device = {
	.name = "debug-exit",
	.port = DEBUG_EXIT_PORT,
	.nr_ports = 1,
	.pio = debug_exit_io,
};
DEVICE_REGISTER(debug_exit_device, DEV_PRIO_CORE)
