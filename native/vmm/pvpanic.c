/*
 * pvpanic, QEMU's ISA flavour: one port at 0x505, described in the DSDT as QEMU0001 (acpi.c). Reading it gives
 * the events the device supports: only PANICKED (bit 0), not CRASH_LOADED, so a guest with a crash kernel loaded
 * boots that instead of reporting. A write with bit 0 set ends the VM with reason `panic`; Linux's pvpanic driver
 * writes it from its panic notifier, before `panic=` reboots or halts. Other writes are ignored.
 */
#include "acpi.h"
#include "device.h"
#include "internal.h"

#include <string.h>

static void pvpanic_io(struct vm *vm, uint64_t offset, uint8_t *data, uint32_t len, int is_write, void *opaque)
{
	(void)offset;
	(void)opaque;
	if (!is_write) {
		memset(data, 0, len);
		data[0] = PVPANIC_PANICKED;
		return;
	}
	if (data[0] & PVPANIC_PANICKED)
		vm_end(vm, VM_EXIT_PANIC, 0, "the guest kernel panicked");
}

static struct device_type pvpanic_device = {
	.name = "pvpanic",
	.port = PVPANIC_PORT,
	.nr_ports = 1,
	.pio = pvpanic_io,
};
DEVICE_REGISTER(pvpanic_device, DEV_PRIO_PLATFORM)
