/*
 * The ACPI sleep control and status register of a hardware-reduced platform (acpi.c puts it in the FADT as both
 * SLEEP_CONTROL_REG and SLEEP_STATUS_REG): one byte at port 0x600. Writing SLP_EN with SLP_TYP = 5, the sleep
 * type of the DSDT's \_S5_, ends the VM with reason `poweroff` and code 0: this is how `poweroff` ends a Linux
 * guest. Every other write is ignored, among them the WAK_STS (0x80) that Linux writes to the status register just
 * before; reads return 0 (WAK_STS clear: the guest never wakes from a sleep state).
 */
#include "acpi.h"
#include "device.h"
#include "internal.h"

#include <string.h>

static void acpi_sleep_io(struct vm *vm, uint64_t offset, uint8_t *data, uint32_t len, int is_write, void *opaque)
{
	uint8_t typ;

	(void)offset;
	(void)opaque;
	if (!is_write) {
		memset(data, 0, len);
		return;
	}
	typ = (data[0] & ACPI_SLEEP_TYP_MASK) >> ACPI_SLEEP_TYP_SHIFT;
	if ((data[0] & ACPI_SLEEP_EN) && typ == ACPI_SLEEP_TYP_S5)
		vm_end(vm, VM_EXIT_POWEROFF, 0, "the guest powered off (ACPI S5)");
}

static struct device_type acpi_sleep_device = {
	.name = "acpi-sleep",
	.port = ACPI_SLEEP_PORT,
	.nr_ports = 1,
	.pio = acpi_sleep_io,
};
DEVICE_REGISTER(acpi_sleep_device, DEV_PRIO_PLATFORM)
