/*
 * Hardware-reduced ACPI (ACPI 6.5): the tables a guest finds at boot and the two I/O ports they describe.
 * docs/vmm.md has the layout; acpi_sleep.c and pvpanic.c are the devices behind the ports.
 */
#ifndef SMOL_ACPI_H
#define SMOL_ACPI_H

#include <stddef.h>
#include <stdint.h>

#define ACPI_RSDP_ADDR 0xe0000ULL	/* in the BIOS area Linux scans (0xE0000-0xFFFFF); e820 marks it reserved */
#define ACPI_TABLES_END VMGENID_ADDR	/* every table lies in [ACPI_RSDP_ADDR, ACPI_TABLES_END) */

/*
 * The VM generation ID (vmgenid.c): 16 random bytes that change when a snapshot is restored or forked, at a fixed
 * guest address in the e820-reserved BIOS area, past the ACPI tables (at most about 3 KiB even with 254 vCPUs), in
 * a page of its own. The DSDT's \_SB_.VGEN gives the address (ADDR); \_SB_.GED0, an ACPI Generic Event Device,
 * turns an edge on VMGENID_GSI into Notify (VGEN, 0x80). GSI 23 is the IOAPIC's last pin: above the ISA IRQs (KVM
 * also feeds GSIs below 16 to the 8259s) and clear of the virtio-mmio IRQs, which are numbered from 5 up.
 */
#define VMGENID_ADDR 0xef000ULL
#define VMGENID_LEN 16
#define VMGENID_GSI 23
#define VMGENID_NOTIFY 0x80		/* the Notify value the VM Generation ID spec asks for */

#define ACPI_SLEEP_PORT 0x600		/* FADT SLEEP_CONTROL_REG and SLEEP_STATUS_REG, one byte */
#define ACPI_SLEEP_TYP_S5 5		/* the SLP_TYP the DSDT's \_S5_ package gives */
#define ACPI_SLEEP_TYP_SHIFT 2		/* sleep control register: SLP_TYP in bits 4:2 */
#define ACPI_SLEEP_TYP_MASK 0x1c
#define ACPI_SLEEP_EN 0x20		/* bit 5 */

#define PVPANIC_PORT 0x505		/* QEMU's pvpanic ISA device (QEMU0001 in the DSDT) */
#define PVPANIC_PANICKED 0x01

struct guest_mem;
struct vm_error;
struct boot_virtio;

/*
 * Writes RSDP, XSDT, FADT, DSDT and MADT (one local APIC per vCPU) at ACPI_RSDP_ADDR. The DSDT lists the virtio-mmio
 * devices (`LNRO0005`, as QEMU and Firecracker), at most BOOT_MAX_VIRTIO.
 */
int acpi_write(struct guest_mem *mem, int nr_cpus, const struct boot_virtio *virtio, int nr_virtio,
	       struct vm_error *err);

/*
 * Encodes an AML PkgLength for a package whose contents after the PkgLength are `body_len` bytes (the encoded
 * value counts the PkgLength bytes too). Writes 1 to 4 bytes to `out` and returns how many, or 0 when the
 * package is too large for AML. Exposed for the unit tests.
 */
size_t acpi_aml_pkg_length(uint8_t out[4], size_t body_len);

#endif
