/* Intel MultiProcessor Specification 1.4 tables: the floating pointer, then the configuration table. */
#include "boot.h"
#include "error.h"
#include "guest_mem.h"

#include <errno.h>
#include <string.h>

#define MP_PROCESSOR 0
#define MP_BUS 1
#define MP_IOAPIC 2
#define MP_INTSRC 3
#define MP_LINTSRC 4
#define MP_IRQ_INT 0
#define MP_IRQ_NMI 1
#define MP_IRQ_EXTINT 3
#define MP_LEGACY_IRQS 24

struct mpf_intel {
	char signature[4];
	uint32_t physptr;
	uint8_t length, specification, checksum, feature[5];
} __attribute__((packed));

struct mpc_table {
	char signature[4];
	uint16_t length;
	uint8_t spec, checksum;
	char oem[8], productid[12];
	uint32_t oemptr;
	uint16_t oemsize, oemcount;
	uint32_t lapic, reserved;
} __attribute__((packed));

struct mpc_cpu {
	uint8_t type, apicid, apicver, cpuflag;
	uint32_t cpufeature, featureflag, reserved[2];
} __attribute__((packed));

struct mpc_bus {
	uint8_t type, busid;
	char bustype[6];
} __attribute__((packed));

struct mpc_ioapic {
	uint8_t type, apicid, apicver, flags;
	uint32_t apicaddr;
} __attribute__((packed));

struct mpc_intsrc {
	uint8_t type, irqtype;
	uint16_t irqflag;
	uint8_t srcbus, srcbusirq, dstapic, dstirq;
} __attribute__((packed));

static size_t mptable_size(int nr_cpus)
{
	return sizeof(struct mpf_intel) + sizeof(struct mpc_table) + nr_cpus * sizeof(struct mpc_cpu) +
	       sizeof(struct mpc_bus) + sizeof(struct mpc_ioapic) + MP_LEGACY_IRQS * sizeof(struct mpc_intsrc) +
	       2 * sizeof(struct mpc_intsrc);
}

int mptable_write(struct guest_mem *mem, uint64_t addr, int nr_cpus, struct vm_error *err)
{
	size_t size = mptable_size(nr_cpus);
	uint8_t *base = guest_mem_ptr(mem, addr, size), *p;
	struct mpf_intel *mpf;
	struct mpc_table *table;
	uint8_t ioapic_id = (uint8_t)nr_cpus;

	if (!base)
		return vm_error_set(err, EINVAL, "no room for the MP table at 0x%llx", (unsigned long long)addr);
	memset(base, 0, size);
	mpf = (struct mpf_intel *)base;
	table = (struct mpc_table *)(mpf + 1);
	p = (uint8_t *)(table + 1);

	for (int i = 0; i < nr_cpus; i++) {
		struct mpc_cpu *cpu = (struct mpc_cpu *)p;

		cpu->type = MP_PROCESSOR;
		cpu->apicid = (uint8_t)i;
		cpu->apicver = 0x14;
		cpu->cpuflag = 1 | (i == 0 ? 2 : 0);		/* enabled, boot processor */
		cpu->cpufeature = 0x600;
		cpu->featureflag = 0x201;			/* FPU, APIC */
		p += sizeof(*cpu);
	}
	struct mpc_bus *bus = (struct mpc_bus *)p;
	bus->type = MP_BUS;
	memcpy(bus->bustype, "ISA   ", 6);
	p += sizeof(*bus);

	struct mpc_ioapic *ioapic = (struct mpc_ioapic *)p;
	ioapic->type = MP_IOAPIC;
	ioapic->apicid = ioapic_id;
	ioapic->apicver = 0x11;
	ioapic->flags = 1;
	ioapic->apicaddr = IOAPIC_ADDR;
	p += sizeof(*ioapic);

	for (int irq = 0; irq < MP_LEGACY_IRQS; irq++) {
		struct mpc_intsrc *src = (struct mpc_intsrc *)p;

		src->type = MP_INTSRC;
		src->irqtype = MP_IRQ_INT;
		src->srcbusirq = (uint8_t)irq;
		src->dstapic = ioapic_id;
		src->dstirq = (uint8_t)irq;
		p += sizeof(*src);
	}
	for (int lint = 0; lint < 2; lint++) {
		struct mpc_intsrc *src = (struct mpc_intsrc *)p;

		src->type = MP_LINTSRC;
		src->irqtype = lint == 0 ? MP_IRQ_EXTINT : MP_IRQ_NMI;
		src->dstapic = 0xff;				/* every local APIC */
		src->dstirq = (uint8_t)lint;
		p += sizeof(*src);
	}

	memcpy(table->signature, "PCMP", 4);
	table->length = (uint16_t)(p - (uint8_t *)table);
	table->spec = 4;
	memcpy(table->oem, "SMOL    ", 8);
	memcpy(table->productid, "SMOLSTUDIO  ", 12);
	table->oemcount = (uint16_t)(nr_cpus + 2 + MP_LEGACY_IRQS + 2);	/* entries that follow the header */
	table->lapic = LAPIC_ADDR;
	table->checksum = boot_checksum(table, table->length);

	memcpy(mpf->signature, "_MP_", 4);
	mpf->physptr = (uint32_t)(addr + sizeof(*mpf));
	mpf->length = 1;
	mpf->specification = 4;
	mpf->checksum = boot_checksum(mpf, sizeof(*mpf));
	return 0;
}
