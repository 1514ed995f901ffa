/*
 * The i8042 keyboard controller, only as far as a microVM needs it: the reset line. Writing 0xFE (pulse output
 * port bit 0) to the command port ends the VM with reason `reset`, which is how Linux reboots with `reboot=k`.
 */
#include "device.h"
#include "internal.h"


#define I8042_DATA 0x60
#define I8042_COMMAND 0x64
#define I8042_CMD_RESET 0xfe

static void i8042_io(struct vm *vm, uint64_t offset, uint8_t *data, uint32_t len, int is_write, void *opaque)
{
	(void)len;
	(void)opaque;
	if (!is_write) {
		data[0] = 0;	/* status: output and input buffers empty; no data */
		return;
	}
	if (offset == I8042_COMMAND - I8042_DATA && data[0] == I8042_CMD_RESET)
		vm_end(vm, VM_EXIT_RESET, 0, "the guest reset the machine");
}

static struct device_type i8042_device = {
	.name = "i8042",
	.port = I8042_DATA,
	.nr_ports = 5,
	.pio = i8042_io,
};
DEVICE_REGISTER(i8042_device, DEV_PRIO_CORE)
