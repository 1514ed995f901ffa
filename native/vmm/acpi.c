/*
 * Hardware-reduced ACPI 6.5 tables: RSDP, XSDT, FADT, DSDT and MADT, written at ACPI_RSDP_ADDR (0xE0000), each
 * table at the next 16-byte boundary after the one before, in that order (docs/vmm.md has the addresses).
 *
 * Hardware-reduced (FADT flag HW_REDUCED_ACPI) means no fixed ACPI hardware: no PM1 event/control blocks, no PM
 * timer, no SCI, no GPEs, no FACS. What ACPI gives a guest here is what the MP table cannot say: how to power
 * off (the sleep control register and the \_S5_ sleep type) and which devices exist beyond the CPUs (the DSDT:
 * COM1, the pvpanic device and the VM generation ID with the event device that signals it). The MP table stays for
 * guests without ACPI (tiny guests, Linux with acpi=off).
 */
#include "acpi.h"
#include "boot.h"
#include "error.h"
#include "guest_mem.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#define ACPI_OEM_ID "SMOL  "		/* 6 bytes */
#define ACPI_OEM_REVISION 1
#define ACPI_CREATOR_ID "SMOL"
#define ACPI_CREATOR_REVISION 1
#define ACPI_HYPERVISOR_ID "SMOLVMM "	/* FADT HYPERVISOR_VENDOR_IDENTITY, 8 bytes */

#define FADT_F_PWR_BUTTON (1u << 4)
#define FADT_F_SLP_BUTTON (1u << 5)
#define FADT_F_HW_REDUCED_ACPI (1u << 20)

#define IAPC_BOOT_ARCH_LEGACY_DEVICES (1u << 0)
#define IAPC_BOOT_ARCH_VGA_NOT_PRESENT (1u << 2)
#define IAPC_BOOT_ARCH_CMOS_RTC_NOT_PRESENT (1u << 5)

#define GAS_SYSTEM_IO 1
#define GAS_ACCESS_BYTE 1

#define MADT_PCAT_COMPAT 1
#define MADT_LOCAL_APIC 0
#define MADT_IO_APIC 1
#define MADT_LOCAL_APIC_NMI 4
#define MADT_LAPIC_ENABLED 1
#define MADT_ALL_PROCESSORS 0xff

/* AML opcodes and prefixes (ACPI 6.5, chapter 20) */
#define AML_ZERO_OP 0x00
#define AML_NAME_OP 0x08
#define AML_BYTE_PREFIX 0x0a
#define AML_DWORD_PREFIX 0x0c
#define AML_STRING_PREFIX 0x0d
#define AML_SCOPE_OP 0x10
#define AML_BUFFER_OP 0x11
#define AML_PACKAGE_OP 0x12
#define AML_METHOD_OP 0x14
#define AML_DUAL_NAME_PREFIX 0x2e	/* two NameSegs follow */
#define AML_EXT_OP_PREFIX 0x5b
#define AML_DEVICE_OP 0x82		/* after AML_EXT_OP_PREFIX */
#define AML_ROOT_CHAR 0x5c		/* '\' */
#define AML_ARG0_OP 0x68
#define AML_NOTIFY_OP 0x86
#define AML_LEQUAL_OP 0x93
#define AML_IF_OP 0xa0

#define AML_MAX 1024			/* bytes of DSDT definition block; acpi_write fails if it grows past this */

struct acpi_header {
	char signature[4];
	uint32_t length;		/* of the whole table, header included */
	uint8_t revision, checksum;
	char oem_id[6], oem_table_id[8];
	uint32_t oem_revision;
	char creator_id[4];
	uint32_t creator_revision;
} __attribute__((packed));

struct acpi_rsdp {
	char signature[8];		/* "RSD PTR " */
	uint8_t checksum;		/* over the first 20 bytes (the ACPI 1.0 part) */
	char oem_id[6];
	uint8_t revision;		/* 2: ACPI 2.0 and later, with the XSDT */
	uint32_t rsdt_addr;		/* 0: no RSDT, the XSDT is the root */
	uint32_t length;		/* 36 */
	uint64_t xsdt_addr;
	uint8_t extended_checksum;	/* over all 36 bytes */
	uint8_t reserved[3];
} __attribute__((packed));

/* Generic Address Structure */
struct acpi_gas {
	uint8_t space_id, bit_width, bit_offset, access_size;
	uint64_t address;
} __attribute__((packed));

struct acpi_fadt {
	struct acpi_header h;
	uint32_t firmware_ctrl, dsdt;
	uint8_t reserved0, preferred_pm_profile;
	/* From here to `century`: the fixed hardware that a hardware-reduced platform does not have, all zero. */
	uint16_t sci_int;
	uint32_t smi_cmd;
	uint8_t acpi_enable, acpi_disable, s4bios_req, pstate_cnt;
	uint32_t pm1a_evt_blk, pm1b_evt_blk, pm1a_cnt_blk, pm1b_cnt_blk, pm2_cnt_blk, pm_tmr_blk, gpe0_blk, gpe1_blk;
	uint8_t pm1_evt_len, pm1_cnt_len, pm2_cnt_len, pm_tmr_len, gpe0_blk_len, gpe1_blk_len, gpe1_base, cst_cnt;
	uint16_t p_lvl2_lat, p_lvl3_lat, flush_size, flush_stride;
	uint8_t duty_offset, duty_width, day_alrm, mon_alrm, century;
	uint16_t iapc_boot_arch;
	uint8_t reserved1;
	uint32_t flags;
	struct acpi_gas reset_reg;
	uint8_t reset_value;
	uint16_t arm_boot_arch;
	uint8_t minor_version;
	uint64_t x_firmware_ctrl, x_dsdt;
	struct acpi_gas x_pm1a_evt_blk, x_pm1b_evt_blk, x_pm1a_cnt_blk, x_pm1b_cnt_blk, x_pm2_cnt_blk, x_pm_tmr_blk,
		x_gpe0_blk, x_gpe1_blk;
	struct acpi_gas sleep_control_reg, sleep_status_reg;
	char hypervisor_vendor_id[8];
} __attribute__((packed));

_Static_assert(sizeof(struct acpi_header) == 36, "ACPI table header");
_Static_assert(sizeof(struct acpi_rsdp) == 36, "RSDP revision 2");
_Static_assert(sizeof(struct acpi_gas) == 12, "Generic Address Structure");
_Static_assert(sizeof(struct acpi_fadt) == 276, "FADT revision 6");
_Static_assert(offsetof(struct acpi_fadt, iapc_boot_arch) == 109, "FADT IAPC_BOOT_ARCH");
_Static_assert(offsetof(struct acpi_fadt, flags) == 112, "FADT Flags");
_Static_assert(offsetof(struct acpi_fadt, x_dsdt) == 140, "FADT X_DSDT");
_Static_assert(offsetof(struct acpi_fadt, sleep_control_reg) == 244, "FADT SLEEP_CONTROL_REG");
_Static_assert(offsetof(struct acpi_fadt, hypervisor_vendor_id) == 268, "FADT HYPERVISOR_VENDOR_IDENTITY");

struct acpi_madt {
	struct acpi_header h;
	uint32_t lapic_addr, flags;
} __attribute__((packed));

struct madt_lapic {
	uint8_t type, length, processor_uid, apic_id;
	uint32_t flags;
} __attribute__((packed));

struct madt_ioapic {
	uint8_t type, length, ioapic_id, reserved;
	uint32_t address, gsi_base;
} __attribute__((packed));

struct madt_lapic_nmi {
	uint8_t type, length, processor_uid;
	uint16_t flags;			/* MPS INTI flags; 0: conforms to the bus */
	uint8_t lint;
} __attribute__((packed));

/* Where each table goes: one after the other, each 16-byte aligned, RSDP first. */
struct acpi_layout {
	uint64_t rsdp, xsdt, fadt, dsdt, madt, end;
};

static uint64_t align16(uint64_t a)
{
	return (a + 15) & ~15ULL;
}

static void header_init(struct acpi_header *h, const char signature[4], uint32_t length, uint8_t revision)
{
	memcpy(h->signature, signature, 4);
	h->length = length;
	h->revision = revision;
	memcpy(h->oem_id, ACPI_OEM_ID, 6);
	memcpy(h->oem_table_id, "SMOL", 4);
	memcpy(h->oem_table_id + 4, signature, 4);	/* "SMOLFACP", "SMOLAPIC", ... */
	h->oem_revision = ACPI_OEM_REVISION;
	memcpy(h->creator_id, ACPI_CREATOR_ID, 4);
	h->creator_revision = ACPI_CREATOR_REVISION;
}

/* The checksum goes last, once everything else in the table is written. */
static void header_checksum(struct acpi_header *h)
{
	h->checksum = 0;
	h->checksum = boot_checksum(h, h->length);
}

size_t acpi_aml_pkg_length(uint8_t out[4], size_t body_len)
{
	/*
	 * The lead byte's bits 7:6 say how many bytes follow it. Alone, its bits 5:0 are the length (up to 63);
	 * otherwise its bits 3:0 are the low nibble and each following byte carries the next 8 bits. The length
	 * counts the PkgLength bytes themselves, so the size of the encoding is part of the value it encodes.
	 */
	for (size_t n = 1; n <= 4; n++) {
		size_t max = n == 1 ? 0x3f : ((size_t)1 << (4 + 8 * (n - 1))) - 1;
		size_t total = body_len + n;

		if (body_len > max || total > max)
			continue;
		if (n == 1) {
			out[0] = (uint8_t)total;
			return 1;
		}
		out[0] = (uint8_t)(((n - 1) << 6) | (total & 0xf));
		for (size_t i = 1; i < n; i++)
			out[i] = (uint8_t)(total >> (4 + 8 * (i - 1)));
		return n;
	}
	return 0;
}

/* A DSDT definition block under construction. Packages are closed with aml_pkg_end, which inserts the PkgLength. */
struct aml {
	uint8_t buf[AML_MAX];
	size_t len;
	int overflow;
};

static void aml_put(struct aml *a, const void *p, size_t n)
{
	if (a->overflow || n > sizeof(a->buf) - a->len) {
		a->overflow = 1;
		return;
	}
	memcpy(a->buf + a->len, p, n);
	a->len += n;
}

static void aml_byte(struct aml *a, uint8_t b)
{
	aml_put(a, &b, 1);
}

/* Marks where a package's PkgLength goes: right after its opcode, before everything the package holds. */
static size_t aml_pkg_begin(struct aml *a)
{
	return a->len;
}

static void aml_pkg_end(struct aml *a, size_t start)
{
	uint8_t enc[4];
	size_t body = a->len - start, n;

	if (a->overflow)
		return;
	n = acpi_aml_pkg_length(enc, body);
	if (!n || n > sizeof(a->buf) - a->len) {
		a->overflow = 1;
		return;
	}
	memmove(a->buf + start + n, a->buf + start, body);
	memcpy(a->buf + start, enc, n);
	a->len += n;
}

static void aml_dword(struct aml *a, uint32_t v)
{
	const uint8_t enc[] = {
		AML_DWORD_PREFIX, (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24),
	};

	aml_put(a, enc, sizeof(enc));
}

/* Name (<name>, "<str>") */
static void aml_name_string(struct aml *a, const char name[4], const char *str)
{
	aml_byte(a, AML_NAME_OP);				/* NameOp */
	aml_put(a, name, 4);					/* NameSeg */
	aml_byte(a, AML_STRING_PREFIX);				/* StringPrefix, the ASCII characters and a NUL */
	aml_put(a, str, strlen(str) + 1);
}

/* Device (<name>) { ...: returns where its PkgLength goes, for aml_pkg_end once its contents are written. */
static size_t aml_device_begin(struct aml *a, const char name[4])
{
	size_t dev;

	aml_byte(a, AML_EXT_OP_PREFIX);				/* DeviceOp: ExtOpPrefix, */
	aml_byte(a, AML_DEVICE_OP);				/*   0x82 */
	dev = aml_pkg_begin(a);					/* PkgLength */
	aml_put(a, name, 4);					/* NameSeg */
	return dev;
}

/* Name (<name>, ResourceTemplate () { <descriptors> }): `res` is the descriptors without the End Tag. */
static void aml_name_resources(struct aml *a, const char name[4], const uint8_t *res, size_t len)
{
	static const uint8_t end_tag[] = {
		0x79, 0x00,		/* small item End Tag (type 0xF, 1 byte follows); checksum 0: none */
	};
	size_t buf;

	aml_byte(a, AML_NAME_OP);				/* NameOp */
	aml_put(a, name, 4);					/* NameSeg */
	aml_byte(a, AML_BUFFER_OP);				/* BufferOp */
	buf = aml_pkg_begin(a);					/* PkgLength */
	aml_byte(a, AML_BYTE_PREFIX);				/* BufferSize: BytePrefix, */
	aml_byte(a, (uint8_t)(len + sizeof(end_tag)));		/*   the descriptors and the End Tag */
	aml_put(a, res, len);
	aml_put(a, end_tag, sizeof(end_tag));
	aml_pkg_end(a, buf);
}

/*
 * The DSDT's definition block, as ASL:
 *
 *	Name (_S5_, Package () { 5, 0 })
 *	Scope (\_SB_) {
 *		Device (COM1) {
 *			Name (_HID, EisaId ("PNP0501"))
 *			Name (_UID, Zero)
 *			Name (_CRS, ResourceTemplate () { IO (Decode16, 0x3F8, 0x3F8, 1, 8) IRQNoFlags () { 4 } })
 *		}
 *		Device (PEVT) {
 *			Name (_HID, "QEMU0001")
 *			Name (_CRS, ResourceTemplate () { IO (Decode16, 0x505, 0x505, 1, 1) })
 *		}
 *		Device (VGEN) {
 *			Name (_HID, "VMGENCTR")
 *			Name (_CID, "VM_Gen_Counter")
 *			Name (_DDN, "VM_Gen_Counter")
 *			Name (ADDR, Package () { 0x000EF000, 0x00000000 })
 *		}
 *		Device (GED0) {
 *			Name (_HID, "ACPI0013")
 *			Name (_CRS, ResourceTemplate () {
 *				Interrupt (ResourceConsumer, Edge, ActiveHigh, Exclusive) { 23 }
 *			})
 *			Method (_EVT, 1, NotSerialized) {
 *				If (LEqual (Arg0, 23)) { Notify (\_SB_.VGEN, 0x80) }
 *			}
 *		}
 *	}
 *
 * \_S5_ is the sleep type OSPM writes to SLEEP_CONTROL_REG to power off (acpi_sleep.c ends the VM on it).
 * COM1 has to be here because a hardware-reduced platform has no legacy PIC: Linux then sets up no ISA IRQs by
 * itself, and COM1's IRQ 4 reaches the IOAPIC only when a device's _CRS names it. PEVT is QEMU's pvpanic ISA
 * device (pvpanic.c); Linux's pvpanic-mmio driver binds to QEMU0001 and takes an I/O port resource.
 *
 * VGEN is the VM generation ID (vmgenid.c; Microsoft's "Virtual Machine Generation ID" spec, the ids Linux's
 * vmgenid driver and Windows look for): ADDR is the ID's guest address, low then high 32 bits. A platform without
 * GPEs signals it through GED0, a Generic Event Device: Linux's evged driver requests the _CRS interrupt and, on
 * each edge, calls _EVT with the GSI, which notifies VGEN; the driver then rereads the ID and, if it changed,
 * reseeds the kernel's RNG.
 *
 * Then one device per virtio-mmio window (virtio_dev.c), as QEMU's microvm and Firecracker describe them:
 *
 *		Device (VR0n) {
 *			Name (_HID, "LNRO0005")
 *			Name (_UID, n)
 *			Name (_CRS, ResourceTemplate () {
 *				Memory32Fixed (ReadWrite, base, 0x1000)
 *				Interrupt (ResourceConsumer, Edge, ActiveHigh, Exclusive) { gsi }
 *			})
 *		}
 *
 * Linux's virtio_mmio driver binds to LNRO0005. The interrupt has to come from here, as COM1's does: on a
 * hardware-reduced platform an IRQ number given on the command line (virtio_mmio.device=) is never routed to the
 * IOAPIC, so the command line announces the devices only to a kernel booted with acpi=off (vm.c).
 */
static void virtio_aml(struct aml *a, const struct boot_virtio *v, int index)
{
	uint8_t res[21] = {
		0x86, 0x09, 0x00,			/* large item Memory32Fixed (type 0x06), 9 bytes follow */
		0x01,					/* read-write */
	};
	char name[4] = { 'V', 'R', (char)('0' + index / 10), (char)('0' + index % 10) };
	size_t dev;

	for (int i = 0; i < 4; i++) {
		res[4 + i] = (uint8_t)(v->base >> (8 * i));	/* base address */
		res[8 + i] = (uint8_t)(v->len >> (8 * i));	/* length */
	}
	res[12] = 0x89;					/* large item Extended Interrupt (type 0x09), */
	res[13] = 0x06;					/*   6 bytes follow */
	res[15] = 0x03;					/* consumer, edge; active high, exclusive */
	res[16] = 0x01;					/* one interrupt */
	for (int i = 0; i < 4; i++)
		res[17 + i] = (uint8_t)(v->gsi >> (8 * i));
	dev = aml_device_begin(a, name);
	aml_name_string(a, "_HID", "LNRO0005");
	aml_byte(a, AML_NAME_OP);				/* Name (_UID, BytePrefix index) */
	aml_put(a, "_UID", 4);
	aml_byte(a, AML_BYTE_PREFIX);
	aml_byte(a, (uint8_t)index);
	aml_name_resources(a, "_CRS", res, sizeof(res));
	aml_pkg_end(a, dev);
}

static void dsdt_aml(struct aml *a, const struct boot_virtio *virtio, int nr_virtio)
{
	static const uint8_t com1_res[] = {
		0x47,					/* small item I/O Port (type 0x8), 7 bytes follow */
		0x01,					/* Information: decodes 16 address bits */
		COM1_PORT & 0xff, COM1_PORT >> 8,	/* _MIN: lowest base address */
		COM1_PORT & 0xff, COM1_PORT >> 8,	/* _MAX: highest base address */
		0x01,					/* _ALN: base alignment */
		COM1_PORTS,				/* _LEN: ports */
		0x22,					/* small item IRQ (type 0x4), 2 bytes: edge, active high */
		1u << COM1_IRQ, 0x00,			/* _INT: IRQ mask, bit 4 */
	};
	static const uint8_t pvpanic_res[] = {
		0x47,					/* small item I/O Port (type 0x8), 7 bytes follow */
		0x01,					/* Information: decodes 16 address bits */
		PVPANIC_PORT & 0xff, PVPANIC_PORT >> 8,	/* _MIN */
		PVPANIC_PORT & 0xff, PVPANIC_PORT >> 8,	/* _MAX */
		0x01,					/* _ALN */
		0x01,					/* _LEN: one port */
	};
	static const uint8_t ged_res[] = {
		0x89,					/* large item Extended Interrupt (type 0x09), */
		0x06, 0x00,				/*   6 bytes follow */
		0x03,					/* consumer (bit 0), edge (bit 1); active high, exclusive */
		0x01,					/* interrupt table length: one */
		VMGENID_GSI & 0xff, (VMGENID_GSI >> 8) & 0xff,	/* the GSI, 32 bits */
		(VMGENID_GSI >> 16) & 0xff, (VMGENID_GSI >> 24) & 0xff,
	};
	static const uint8_t pnp0501[] = {
		0x41, 0xd0, 0x05, 0x01,			/* EisaId ("PNP0501"): "PNP" in 3x5 bits, then 0x0501 */
	};
	size_t pkg, scope, dev, method, cond;
	_Static_assert(VMGENID_GSI <= 0xff, "_EVT compares Arg0 with a BytePrefix integer");

	aml_byte(a, AML_NAME_OP);				/* NameOp */
	aml_put(a, "_S5_", 4);					/* NameSeg */
	aml_byte(a, AML_PACKAGE_OP);				/* PackageOp */
	pkg = aml_pkg_begin(a);					/* PkgLength */
	aml_byte(a, 2);						/* NumElements */
	aml_byte(a, AML_BYTE_PREFIX);				/* SLP_TYPa: BytePrefix 5 */
	aml_byte(a, ACPI_SLEEP_TYP_S5);
	aml_byte(a, AML_ZERO_OP);				/* SLP_TYPb: Zero (there is no PM1b) */
	aml_pkg_end(a, pkg);

	aml_byte(a, AML_SCOPE_OP);				/* ScopeOp */
	scope = aml_pkg_begin(a);				/* PkgLength */
	aml_byte(a, AML_ROOT_CHAR);				/* NameString \_SB_: RootChar, */
	aml_put(a, "_SB_", 4);					/*   NameSeg */

	dev = aml_device_begin(a, "COM1");
	aml_byte(a, AML_NAME_OP);				/* Name (_HID, */
	aml_put(a, "_HID", 4);
	aml_byte(a, AML_DWORD_PREFIX);				/*   DWordPrefix, compressed EISA id) */
	aml_put(a, pnp0501, sizeof(pnp0501));
	aml_byte(a, AML_NAME_OP);				/* Name (_UID, */
	aml_put(a, "_UID", 4);
	aml_byte(a, AML_ZERO_OP);				/*   Zero) */
	aml_name_resources(a, "_CRS", com1_res, sizeof(com1_res));
	aml_pkg_end(a, dev);

	dev = aml_device_begin(a, "PEVT");
	aml_name_string(a, "_HID", "QEMU0001");
	aml_name_resources(a, "_CRS", pvpanic_res, sizeof(pvpanic_res));
	aml_pkg_end(a, dev);

	dev = aml_device_begin(a, "VGEN");
	aml_name_string(a, "_HID", "VMGENCTR");
	aml_name_string(a, "_CID", "VM_Gen_Counter");
	aml_name_string(a, "_DDN", "VM_Gen_Counter");
	aml_byte(a, AML_NAME_OP);				/* Name (ADDR, */
	aml_put(a, "ADDR", 4);
	aml_byte(a, AML_PACKAGE_OP);				/*   Package () { */
	pkg = aml_pkg_begin(a);
	aml_byte(a, 2);						/*     NumElements */
	aml_dword(a, (uint32_t)VMGENID_ADDR);			/*     low 32 bits, high 32 bits }) */
	aml_dword(a, (uint32_t)(VMGENID_ADDR >> 32));
	aml_pkg_end(a, pkg);
	aml_pkg_end(a, dev);

	dev = aml_device_begin(a, "GED0");
	aml_name_string(a, "_HID", "ACPI0013");
	aml_name_resources(a, "_CRS", ged_res, sizeof(ged_res));
	aml_byte(a, AML_METHOD_OP);				/* Method (_EVT, */
	method = aml_pkg_begin(a);
	aml_put(a, "_EVT", 4);
	aml_byte(a, 0x01);					/*   MethodFlags: 1 argument, not serialized) { */
	aml_byte(a, AML_IF_OP);					/*   If ( */
	cond = aml_pkg_begin(a);
	aml_byte(a, AML_LEQUAL_OP);				/*     LEqual (Arg0, BytePrefix GSI)) { */
	aml_byte(a, AML_ARG0_OP);
	aml_byte(a, AML_BYTE_PREFIX);
	aml_byte(a, VMGENID_GSI);
	aml_byte(a, AML_NOTIFY_OP);				/*     Notify (\_SB_.VGEN: RootChar, DualNamePrefix, */
	aml_byte(a, AML_ROOT_CHAR);
	aml_byte(a, AML_DUAL_NAME_PREFIX);
	aml_put(a, "_SB_VGEN", 8);				/*       two NameSegs, */
	aml_byte(a, AML_BYTE_PREFIX);				/*       BytePrefix 0x80) } } */
	aml_byte(a, VMGENID_NOTIFY);
	aml_pkg_end(a, cond);
	aml_pkg_end(a, method);
	aml_pkg_end(a, dev);

	for (int i = 0; i < nr_virtio; i++)
		virtio_aml(a, &virtio[i], i);

	aml_pkg_end(a, scope);
}

static void rsdp_write(struct acpi_rsdp *rsdp, uint64_t xsdt)
{
	memcpy(rsdp->signature, "RSD PTR ", 8);
	memcpy(rsdp->oem_id, ACPI_OEM_ID, 6);
	rsdp->revision = 2;
	rsdp->length = sizeof(*rsdp);
	rsdp->xsdt_addr = xsdt;
	rsdp->checksum = boot_checksum(rsdp, 20);
	rsdp->extended_checksum = boot_checksum(rsdp, sizeof(*rsdp));
}

static void xsdt_write(struct acpi_header *xsdt, const struct acpi_layout *at)
{
	const uint64_t entries[] = { at->fadt, at->madt };

	header_init(xsdt, "XSDT", sizeof(*xsdt) + sizeof(entries), 1);
	memcpy(xsdt + 1, entries, sizeof(entries));	/* unaligned 64-bit entries right after the header */
	header_checksum(xsdt);
}

static void fadt_write(struct acpi_fadt *fadt, const struct acpi_layout *at)
{
	const struct acpi_gas sleep_reg = {
		.space_id = GAS_SYSTEM_IO, .bit_width = 8, .access_size = GAS_ACCESS_BYTE, .address = ACPI_SLEEP_PORT,
	};

	header_init(&fadt->h, "FACP", sizeof(*fadt), 6);
	fadt->minor_version = 5;			/* ACPI 6.5 */
	fadt->dsdt = (uint32_t)at->dsdt;		/* both, and equal: ACPICA warns when they differ */
	fadt->x_dsdt = at->dsdt;
	/*
	 * HW_REDUCED_ACPI: no fixed hardware (see the top of this file). PWR_BUTTON and SLP_BUTTON set mean "no
	 * fixed-feature power or sleep button": without them Linux would add a fixed power button whose status bits
	 * live in PM1 registers that do not exist here. No RESET_REG_SUP: Linux resets through the i8042 (reboot=k).
	 */
	fadt->flags = FADT_F_HW_REDUCED_ACPI | FADT_F_PWR_BUTTON | FADT_F_SLP_BUTTON;
	/*
	 * LEGACY_DEVICES: COM1 is an ISA-style device the OS must drive (the bit's own example is a Super I/O serial
	 * port); Linux on x86-64 reads it only to rule out a PnP BIOS. No VGA, no CMOS RTC (kvmclock gives the wall
	 * clock; Linux then registers no rtc_cmos). The 8042 bit stays clear: our i8042 is only a reset line, and with
	 * the bit clear Linux's i8042 driver does not probe it (it would fail its self-test); `reboot=k` writes port
	 * 0x64 directly and does not depend on that driver.
	 */
	fadt->iapc_boot_arch = IAPC_BOOT_ARCH_LEGACY_DEVICES | IAPC_BOOT_ARCH_VGA_NOT_PRESENT |
			       IAPC_BOOT_ARCH_CMOS_RTC_NOT_PRESENT;
	/* One register for both, like Cloud Hypervisor: Linux writes WAK_STS to it, then SLP_TYP | SLP_EN. */
	fadt->sleep_control_reg = sleep_reg;
	fadt->sleep_status_reg = sleep_reg;
	memcpy(fadt->hypervisor_vendor_id, ACPI_HYPERVISOR_ID, 8);
	header_checksum(&fadt->h);
}

static void dsdt_write(struct acpi_header *dsdt, const struct aml *a)
{
	header_init(dsdt, "DSDT", (uint32_t)(sizeof(*dsdt) + a->len), 2);	/* revision 2: 64-bit AML integers */
	memcpy(dsdt + 1, a->buf, a->len);
	header_checksum(dsdt);
}

static size_t madt_size(int nr_cpus)
{
	return sizeof(struct acpi_madt) + (size_t)nr_cpus * sizeof(struct madt_lapic) + sizeof(struct madt_ioapic) +
	       sizeof(struct madt_lapic_nmi);
}

/*
 * The same interrupt controllers as the MP table (mptable.c): one local APIC per vCPU with APIC id = index, the
 * IOAPIC with id nr_cpus and GSI base 0, and LINT1 of every local APIC wired to NMI.
 *
 * No Interrupt Source Override entries, on purpose. The MP table routes ISA IRQ n to IOAPIC pin n with the
 * bus's default polarity and trigger, and that identity mapping is exactly what ACPI assumes for every ISA IRQ
 * without an override, so overrides would repeat the default. Worse, one for IRQ 0 would be taken by Linux as the
 * SCI's (the FADT's SCI_INT is 0, as there is no SCI) and turn the timer's IRQ 0 active-low. If the MP table
 * ever routes an ISA IRQ elsewhere, an override belongs here (test_acpi.c checks that the two agree). LINT0's
 * ExtINT entry has no MADT counterpart: PCAT_COMPAT says the 8259s are there.
 */
static void madt_write(struct acpi_madt *madt, int nr_cpus)
{
	uint8_t *p = (uint8_t *)(madt + 1);
	struct madt_ioapic ioapic = {
		.type = MADT_IO_APIC, .length = sizeof(ioapic), .ioapic_id = (uint8_t)nr_cpus, .address = IOAPIC_ADDR,
	};
	struct madt_lapic_nmi nmi = {
		.type = MADT_LOCAL_APIC_NMI, .length = sizeof(nmi), .processor_uid = MADT_ALL_PROCESSORS, .lint = 1,
	};

	header_init(&madt->h, "APIC", (uint32_t)madt_size(nr_cpus), 6);	/* revision 6: ACPI 6.5 */
	madt->lapic_addr = LAPIC_ADDR;
	madt->flags = MADT_PCAT_COMPAT;
	for (int i = 0; i < nr_cpus; i++) {
		struct madt_lapic lapic = {
			.type = MADT_LOCAL_APIC, .length = sizeof(lapic), .processor_uid = (uint8_t)i,
			.apic_id = (uint8_t)i, .flags = MADT_LAPIC_ENABLED,
		};

		memcpy(p, &lapic, sizeof(lapic));
		p += sizeof(lapic);
	}
	memcpy(p, &ioapic, sizeof(ioapic));
	p += sizeof(ioapic);
	memcpy(p, &nmi, sizeof(nmi));
	header_checksum(&madt->h);
}

int acpi_write(struct guest_mem *mem, int nr_cpus, const struct boot_virtio *virtio, int nr_virtio,
	       struct vm_error *err)
{
	struct aml aml = { .len = 0 };
	struct acpi_layout at;
	uint8_t *base;

	if (nr_cpus < 1 || nr_cpus > 254)	/* one-byte APIC ids and processor UIDs; 0xff means "all" */
		return vm_error_set(err, EINVAL, "ACPI tables cannot describe %d vCPUs", nr_cpus);
	if (nr_virtio < 0 || nr_virtio > BOOT_MAX_VIRTIO)
		return vm_error_set(err, EINVAL, "the DSDT cannot list %d virtio devices", nr_virtio);
	dsdt_aml(&aml, virtio, nr_virtio);
	if (aml.overflow)
		return vm_error_set(err, ENOSPC, "the DSDT does not fit in %d bytes", AML_MAX);

	at.rsdp = ACPI_RSDP_ADDR;
	at.xsdt = align16(at.rsdp + sizeof(struct acpi_rsdp));
	at.fadt = align16(at.xsdt + sizeof(struct acpi_header) + 2 * sizeof(uint64_t));
	at.dsdt = align16(at.fadt + sizeof(struct acpi_fadt));
	at.madt = align16(at.dsdt + sizeof(struct acpi_header) + aml.len);
	at.end = at.madt + madt_size(nr_cpus);
	if (at.end > ACPI_TABLES_END)
		return vm_error_set(err, ENOSPC, "the ACPI tables need 0x%llx-0x%llx, past 0x%llx",
				    (unsigned long long)at.rsdp, (unsigned long long)at.end,
				    (unsigned long long)ACPI_TABLES_END);
	base = guest_mem_ptr(mem, at.rsdp, at.end - at.rsdp);
	if (!base)
		return vm_error_set(err, EINVAL, "no room for the ACPI tables at 0x%llx-0x%llx: guest memory ends first",
				    (unsigned long long)at.rsdp, (unsigned long long)at.end);
	memset(base, 0, at.end - at.rsdp);

	rsdp_write((struct acpi_rsdp *)base, at.xsdt);
	xsdt_write((struct acpi_header *)(base + (at.xsdt - at.rsdp)), &at);
	fadt_write((struct acpi_fadt *)(base + (at.fadt - at.rsdp)), &at);
	dsdt_write((struct acpi_header *)(base + (at.dsdt - at.rsdp)), &aml);
	madt_write((struct acpi_madt *)(base + (at.madt - at.rsdp)), nr_cpus);
	return 0;
}
