/*
 * The ACPI tables are how a Linux guest finds its CPUs and devices and learns how to power off: read them back
 * the way a guest would, from the RSDP down, and check every checksum, pointer and AML byte that matters.
 */
#include "test.h"
#include "acpi.h"
#include "boot.h"
#include "error.h"
#include "guest_mem.h"
#include "loader.h"

#include <stdint.h>
#include <string.h>

#define RAM (64ULL << 20)

/* A guest of `nr_cpus` vCPUs set up by boot_setup, as the VMM does before the first instruction. */
static int boot(struct guest_mem *mem, int nr_cpus, struct vm_error *err)
{
	static const struct kernel_image k = { .kind = KERNEL_ELF64, .entry = 0x100000, .end = 0x200000 };
	struct boot_info info = { .cmdline = "", .nr_cpus = nr_cpus };

	if (guest_mem_init(mem, RAM, err) < 0)
		return -1;
	return boot_setup(mem, &k, &info, err);
}

/* The table at `addr` if it has signature `sig`, lies in guest RAM and sums to zero; NULL (and a failure) if not. */
static const uint8_t *table(const struct guest_mem *mem, uint64_t addr, const char *sig, uint32_t *len)
{
	const uint8_t *t = guest_mem_ptr(mem, addr, 36);

	if (!t || memcmp(t, sig, 4) != 0) {
		test_fail(__FILE__, __LINE__, "no %s table at 0x%llx", sig, (unsigned long long)addr);
		return NULL;
	}
	*len = test_rd32(t + 4);
	t = guest_mem_ptr(mem, addr, *len);
	if (!t || *len < 36 || test_byte_sum(t, *len) != 0) {
		test_fail(__FILE__, __LINE__, "%s at 0x%llx: length %u or checksum is wrong", sig, (unsigned long long)addr,
			  *len);
		return NULL;
	}
	return t;
}

/* The table the XSDT lists with signature `sig` (exactly one must be listed); its address goes to *addr. */
static const uint8_t *xsdt_find(const struct guest_mem *mem, const char *sig, uint64_t *addr, uint32_t *len)
{
	const uint8_t *rsdp = guest_mem_ptr(mem, ACPI_RSDP_ADDR, 36), *xsdt, *found = NULL;
	uint32_t xsdt_len;

	if (!rsdp || !(xsdt = table(mem, test_rd64(rsdp + 24), "XSDT", &xsdt_len)))
		return NULL;
	for (uint32_t off = 36; off + 8 <= xsdt_len; off += 8) {
		const uint8_t *t = guest_mem_ptr(mem, test_rd64(xsdt + off), 4);

		if (t && memcmp(t, sig, 4) == 0) {
			if (found)
				test_fail(__FILE__, __LINE__, "the XSDT lists %s twice", sig);
			*addr = test_rd64(xsdt + off);
			found = table(mem, *addr, sig, len);
		}
	}
	if (!found)
		test_fail(__FILE__, __LINE__, "the XSDT does not list %s", sig);
	return found;
}

/* Decodes an AML PkgLength at p; *n gets its size in bytes. */
static size_t pkg_length(const uint8_t *p, size_t *n)
{
	size_t follow = p[0] >> 6, v;

	*n = follow + 1;
	if (!follow)
		return p[0] & 0x3f;
	v = p[0] & 0x0f;
	for (size_t i = 1; i <= follow; i++)
		v |= (size_t)p[i] << (4 + 8 * (i - 1));
	return v;
}

TEST(rsdp_at_0xe0000_has_both_checksums_and_leads_to_fadt_and_madt)
{
	struct vm_error err = { 0 };
	struct guest_mem mem;
	const uint8_t *rsdp, *zero_page, *xsdt;
	uint32_t len;
	uint64_t addr;

	CHECK_OK(boot(&mem, 1, &err), err.msg);
	REQUIRE(mem.host);
	rsdp = guest_mem_ptr(&mem, 0xe0000, 36);
	REQUIRE(rsdp);
	CHECK(memcmp(rsdp, "RSD PTR ", 8) == 0);
	CHECK_EQ_INT(test_byte_sum(rsdp, 20), 0);			/* ACPI 1.0 checksum */
	CHECK_EQ_INT(test_byte_sum(rsdp, 36), 0);			/* extended checksum */
	CHECK_EQ_INT(rsdp[15], 2);			/* revision */
	CHECK_EQ_INT(test_rd32(rsdp + 16), 0);		/* no RSDT */
	CHECK_EQ_INT(test_rd32(rsdp + 20), 36);		/* length */
	zero_page = guest_mem_ptr(&mem, BOOT_ZERO_PAGE, 4096);
	REQUIRE(zero_page);
	CHECK_EQ_INT(test_rd64(zero_page + 0x070), 0xe0000);	/* boot_params.acpi_rsdp_addr */

	xsdt = table(&mem, test_rd64(rsdp + 24), "XSDT", &len);
	REQUIRE(xsdt);
	CHECK_EQ_INT(len, 36 + 2 * 8);			/* FADT and MADT, nothing else */
	CHECK(xsdt_find(&mem, "FACP", &addr, &len) != NULL);
	CHECK(xsdt_find(&mem, "APIC", &addr, &len) != NULL);
	guest_mem_exit(&mem);
}

TEST(fadt_is_hardware_reduced_with_the_sleep_register_on_port_0x600)
{
	static const uint8_t sleep_gas[12] = { 1, 8, 0, 1, 0x00, 0x06 };	/* SystemIO, 8 bits, byte access, 0x600 */
	struct vm_error err = { 0 };
	struct guest_mem mem;
	const uint8_t *fadt;
	uint32_t len, dsdt_len;
	uint64_t addr;

	CHECK_OK(boot(&mem, 2, &err), err.msg);
	REQUIRE(mem.host);
	fadt = xsdt_find(&mem, "FACP", &addr, &len);
	REQUIRE(fadt);
	CHECK_EQ_INT(len, 276);
	CHECK_EQ_INT(fadt[8], 6);				/* revision */
	CHECK_EQ_INT(fadt[131], 5);				/* minor version: ACPI 6.5 */
	CHECK(test_rd32(fadt + 112) & (1u << 20));			/* HW_REDUCED_ACPI */
	CHECK_EQ_INT(test_rd32(fadt + 112) & ~((1u << 20) | (1u << 4) | (1u << 5)), 0);	/* and only the buttons */
	CHECK_EQ_INT(test_rd16(fadt + 109), (1 << 0) | (1 << 2) | (1 << 5));	/* legacy devices, no VGA, no RTC; no 8042 */
	CHECK_EQ_INT(test_rd16(fadt + 46), 0);			/* SCI_INT: none */
	CHECK_EQ_INT(test_rd32(fadt + 56), 0);			/* no PM1a event block, */
	CHECK_EQ_INT(test_rd32(fadt + 76), 0);			/* no PM timer */
	CHECK_EQ_INT(test_rd64(fadt + 132), 0);			/* no FACS */
	CHECK(memcmp(fadt + 244, sleep_gas, 12) == 0);		/* SLEEP_CONTROL_REG */
	CHECK(memcmp(fadt + 256, sleep_gas, 12) == 0);		/* SLEEP_STATUS_REG */
	CHECK_EQ_INT(test_rd32(fadt + 40), test_rd64(fadt + 140));	/* DSDT == X_DSDT */
	CHECK(table(&mem, test_rd64(fadt + 140), "DSDT", &dsdt_len) != NULL);
	guest_mem_exit(&mem);
}

static void check_madt(int nr_cpus)
{
	struct vm_error err = { 0 };
	struct guest_mem mem;
	const uint8_t *madt, *p, *end;
	uint32_t len;
	uint64_t addr;
	int lapics = 0, ioapics = 0, nmis = 0;

	CHECK_OK(boot(&mem, nr_cpus, &err), err.msg);
	REQUIRE(mem.host);
	madt = xsdt_find(&mem, "APIC", &addr, &len);
	REQUIRE(madt);
	CHECK_EQ_INT(test_rd32(madt + 36), 0xfee00000);		/* local APIC address */
	CHECK_EQ_INT(test_rd32(madt + 40), 1);			/* PCAT_COMPAT */
	end = madt + len;
	for (p = madt + 44; p + 2 <= end && p[1] >= 2 && p + p[1] <= end; p += p[1]) {
		switch (p[0]) {
		case 0:						/* processor local APIC: UID = APIC id = index */
			CHECK_EQ_INT(p[1], 8);
			CHECK_EQ_INT(p[2], lapics);
			CHECK_EQ_INT(p[3], lapics);
			CHECK_EQ_INT(test_rd32(p + 4), 1);		/* enabled */
			lapics++;
			break;
		case 1:						/* I/O APIC: as in the MP table */
			CHECK_EQ_INT(p[1], 12);
			CHECK_EQ_INT(p[2], nr_cpus);
			CHECK_EQ_INT(test_rd32(p + 4), 0xfec00000);
			CHECK_EQ_INT(test_rd32(p + 8), 0);		/* GSI base */
			ioapics++;
			break;
		case 4:						/* local APIC NMI: LINT1 of every processor */
			CHECK_EQ_INT(p[1], 6);
			CHECK_EQ_INT(p[2], 0xff);
			CHECK_EQ_INT(test_rd16(p + 3), 0);
			CHECK_EQ_INT(p[5], 1);
			nmis++;
			break;
		default:
			test_fail(__FILE__, __LINE__, "unexpected MADT entry type %u", p[0]);
		}
	}
	CHECK(p == end);
	CHECK_EQ_INT(lapics, nr_cpus);
	CHECK_EQ_INT(ioapics, 1);
	CHECK_EQ_INT(nmis, 1);
	guest_mem_exit(&mem);
}

TEST(madt_lists_the_single_vcpu)
{
	check_madt(1);
}

TEST(madt_lists_two_vcpus)
{
	check_madt(2);
}

TEST(madt_lists_64_vcpus)
{
	check_madt(64);
}

/*
 * ACPI assumes ISA IRQ n is GSI n, edge-triggered and active high, unless an Interrupt Source Override says
 * otherwise; the MADT has none. So the MP table, which Linux reads instead with acpi=off, must route every ISA IRQ
 * below 16 the same way, or the two descriptions of one machine disagree.
 */
TEST(madt_and_mp_table_route_isa_irqs_alike)
{
	struct vm_error err = { 0 };
	struct guest_mem mem;
	const uint8_t *mpf, *mpc, *p;
	uint16_t mpc_len;
	int isa = 0;

	CHECK_OK(boot(&mem, 2, &err), err.msg);
	REQUIRE(mem.host);
	mpf = guest_mem_ptr(&mem, BOOT_EBDA, 16);
	REQUIRE(mpf);
	mpc = guest_mem_ptr(&mem, test_rd32(mpf + 4), 44);
	REQUIRE(mpc);
	mpc_len = test_rd16(mpc + 4);
	mpc = guest_mem_ptr(&mem, test_rd32(mpf + 4), mpc_len);
	REQUIRE(mpc);
	for (p = mpc + 44; p < mpc + mpc_len; p += p[0] == 0 ? 20 : 8) {
		if (p[0] == 2)
			CHECK_EQ_INT(p[1], 2);			/* IOAPIC id: the MADT's is nr_cpus too */
		if (p[0] != 3 || p[5] >= 16)			/* I/O interrupt entries of ISA IRQs */
			continue;
		CHECK_EQ_INT(p[1], 0);				/* INT, not NMI/SMI/ExtINT */
		CHECK_EQ_INT(test_rd16(p + 2), 0);			/* polarity and trigger conform to the bus */
		CHECK_EQ_INT(p[7], p[5]);			/* pin = IRQ */
		isa++;
	}
	CHECK_EQ_INT(isa, 16);
	guest_mem_exit(&mem);
}

static const uint8_t *find(const uint8_t *hay, size_t len, const void *needle, size_t n)
{
	for (size_t i = 0; i + n <= len; i++)
		if (memcmp(hay + i, needle, n) == 0)
			return hay + i;
	return NULL;
}

/* Device (name) directly in the scope: checks that its PkgLength ends where the next one starts; returns its end. */
static const uint8_t *device(const uint8_t *p, const uint8_t *scope_end, const char *name, const uint8_t **body)
{
	size_t n, len;

	if (p + 7 > scope_end || p[0] != 0x5b || p[1] != 0x82 || memcmp(p + 2 + (p[2] >> 6) + 1, name, 4) != 0) {
		test_fail(__FILE__, __LINE__, "Device (%s) is not where expected", name);
		return NULL;
	}
	len = pkg_length(p + 2, &n);
	*body = p + 2 + n + 4;
	return p + 2 + len;
}

static const uint8_t s5[] = { 0x08, '_', 'S', '5', '_', 0x12, 0x05, 0x02, 0x0a, 0x05, 0x00 };

/*
 * The DSDT's definition block: Name (_S5_, ...), then Scope (\_SB_) to the end of the table. *p gets the first
 * device in the scope and *scope_end the scope's end, checked against the table's length.
 */
static int dsdt_scope(const struct guest_mem *mem, const uint8_t **p, const uint8_t **scope_end)
{
	const uint8_t *fadt, *dsdt, *aml, *end;
	uint32_t len, fadt_len;
	uint64_t addr;
	size_t n;

	fadt = xsdt_find(mem, "FACP", &addr, &fadt_len);
	if (!fadt || !(dsdt = table(mem, test_rd64(fadt + 140), "DSDT", &len)))
		return -1;
	CHECK_EQ_INT(dsdt[8], 2);				/* revision 2: 64-bit integers */
	aml = dsdt + 36;
	end = dsdt + len;
	if (end - aml <= (long)sizeof(s5) + 8 || memcmp(aml, s5, sizeof(s5)) != 0 || aml[sizeof(s5)] != 0x10) {
		test_fail(__FILE__, __LINE__, "the DSDT does not start with \\_S5_ and Scope (\\_SB_)");
		return -1;
	}
	*p = aml + sizeof(s5);
	CHECK_EQ_INT((*p)[1] >> 6, 1);				/* this PkgLength needs two bytes */
	*scope_end = *p + 1 + pkg_length(*p + 1, &n);
	CHECK(*scope_end == end);
	*p += 1 + n;
	CHECK(memcmp(*p, "\\_SB_", 5) == 0);
	*p += 5;
	return *scope_end == end ? 0 : -1;
}

TEST(dsdt_aml_has_s5_com1_and_the_pvpanic_device)
{
	static const uint8_t com1_hid[] = { 0x08, '_', 'H', 'I', 'D', 0x0c, 0x41, 0xd0, 0x05, 0x01 };
	static const uint8_t com1_crs[] = { 0x08, '_', 'C', 'R', 'S', 0x11, 0x10, 0x0a, 0x0d,
					    0x47, 0x01, 0xf8, 0x03, 0xf8, 0x03, 0x01, 0x08,	/* IO 0x3f8, 8 ports */
					    0x22, 0x10, 0x00,				/* IRQ 4 */
					    0x79, 0x00 };
	static const uint8_t pevt_hid[] = { 0x08, '_', 'H', 'I', 'D', 0x0d, 'Q', 'E', 'M', 'U', '0', '0', '0', '1', 0 };
	static const uint8_t pevt_crs[] = { 0x08, '_', 'C', 'R', 'S', 0x11, 0x0d, 0x0a, 0x0a,
					    0x47, 0x01, 0x05, 0x05, 0x05, 0x05, 0x01, 0x01,	/* IO 0x505, 1 port */
					    0x79, 0x00 };
	struct vm_error err = { 0 };
	struct guest_mem mem;
	const uint8_t *scope_end, *p, *body, *dev_end;

	CHECK_OK(boot(&mem, 1, &err), err.msg);
	REQUIRE(mem.host);
	REQUIRE(dsdt_scope(&mem, &p, &scope_end) == 0);

	dev_end = device(p, scope_end, "COM1", &body);
	REQUIRE(dev_end && dev_end <= scope_end);
	CHECK(find(body, dev_end - body, com1_hid, sizeof(com1_hid)) != NULL);
	CHECK(find(body, dev_end - body, "\x08_UID\x00", 6) != NULL);
	p = find(body, dev_end - body, com1_crs, sizeof(com1_crs));
	CHECK(p && p + sizeof(com1_crs) == dev_end);		/* the buffer's PkgLength ends with the device */

	dev_end = device(dev_end, scope_end, "PEVT", &body);
	REQUIRE(dev_end && dev_end <= scope_end);
	CHECK(find(body, dev_end - body, pevt_hid, sizeof(pevt_hid)) != NULL);
	p = find(body, dev_end - body, pevt_crs, sizeof(pevt_crs));
	CHECK(p && p + sizeof(pevt_crs) == dev_end);
	guest_mem_exit(&mem);
}

/*
 * What Linux needs to reseed a fork: \_SB_.VGEN with the ids its vmgenid driver binds to and ADDR giving where the
 * 16-byte ID is, and \_SB_.GED0, a Generic Event Device whose one interrupt is VMGENID_GSI (edge, active high,
 * exclusive) and whose _EVT, called with that GSI, notifies VGEN. Every PkgLength must end where the next object
 * starts, down to the If in the method.
 */
TEST(dsdt_describes_the_vm_generation_id_and_the_event_device_that_signals_it)
{
	static const uint8_t vgen_hid[] = { 0x08, '_', 'H', 'I', 'D', 0x0d, 'V', 'M', 'G', 'E', 'N', 'C', 'T', 'R', 0 };
	static const uint8_t vgen_cid[] = { 0x08, '_', 'C', 'I', 'D', 0x0d, 'V', 'M', '_', 'G', 'e', 'n', '_',
					    'C', 'o', 'u', 'n', 't', 'e', 'r', 0 };
	static const uint8_t addr_pkg[] = { 0x08, 'A', 'D', 'D', 'R', 0x12, 0x0c, 0x02 };	/* Package, 2 elements */
	static const uint8_t ged_hid[] = { 0x08, '_', 'H', 'I', 'D', 0x0d, 'A', 'C', 'P', 'I', '0', '0', '1', '3', 0 };
	static const uint8_t ged_crs[] = { 0x08, '_', 'C', 'R', 'S', 0x11, 0x0e, 0x0a, 0x0b,
					   0x89, 0x06, 0x00 };				/* Extended Interrupt, 6 bytes */
	static const uint8_t evt[] = { 0x14 };						/* MethodOp */
	static const uint8_t notify[] = { 0x86, 0x5c, 0x2e, '_', 'S', 'B', '_', 'V', 'G', 'E', 'N', 0x0a, 0x80 };
	struct vm_error err = { 0 };
	struct guest_mem mem;
	const uint8_t *scope_end, *p, *body, *dev_end, *com1_end, *method, *method_end, *cond, *cond_end;
	size_t n;

	CHECK_OK(boot(&mem, 64, &err), err.msg);
	REQUIRE(mem.host);
	REQUIRE(dsdt_scope(&mem, &p, &scope_end) == 0);
	com1_end = device(p, scope_end, "COM1", &body);
	REQUIRE(com1_end);
	dev_end = device(com1_end, scope_end, "PEVT", &body);
	REQUIRE(dev_end);

	dev_end = device(dev_end, scope_end, "VGEN", &body);
	REQUIRE(dev_end && dev_end <= scope_end);
	CHECK(find(body, dev_end - body, vgen_hid, sizeof(vgen_hid)) != NULL);
	CHECK(find(body, dev_end - body, vgen_cid, sizeof(vgen_cid)) != NULL);
	CHECK(find(body, dev_end - body, "\x08_DDN\x0dVM_Gen_Counter", 21) != NULL);
	p = find(body, dev_end - body, addr_pkg, sizeof(addr_pkg));
	REQUIRE(p && p + 5 + 1 + 0x0c == dev_end);		/* the package ends with the device */
	p += sizeof(addr_pkg);
	REQUIRE(p[0] == 0x0c && p[5] == 0x0c);			/* two DWords: low and high 32 bits */
	CHECK_EQ_INT(test_rd32(p + 1) | (uint64_t)test_rd32(p + 6) << 32, VMGENID_ADDR);

	dev_end = device(dev_end, scope_end, "GED0", &body);
	REQUIRE(dev_end);
	CHECK(dev_end == scope_end);				/* the last device */
	CHECK(find(body, dev_end - body, ged_hid, sizeof(ged_hid)) != NULL);
	p = find(body, dev_end - body, ged_crs, sizeof(ged_crs));
	REQUIRE(p);
	p += sizeof(ged_crs);
	CHECK_EQ_INT(p[0] & 0x01, 0x01);			/* resource consumer */
	CHECK_EQ_INT(p[0] & 0x02, 0x02);			/* edge-triggered */
	CHECK_EQ_INT(p[0] & 0x04, 0);				/* active high */
	CHECK_EQ_INT(p[0] & 0x08, 0);				/* exclusive */
	CHECK_EQ_INT(p[1], 1);					/* one interrupt, */
	CHECK_EQ_INT(test_rd32(p + 2), VMGENID_GSI);		/*   the GSI */
	CHECK(p[6] == 0x79 && p[7] == 0x00);			/* End Tag */
	method = p + 8;						/* the method follows the buffer it ends */
	REQUIRE(memcmp(method, evt, sizeof(evt)) == 0);
	method_end = method + 1 + pkg_length(method + 1, &n);
	CHECK(method_end == dev_end);
	p = method + 1 + n;
	CHECK(memcmp(p, "_EVT", 4) == 0);
	CHECK_EQ_INT(p[4], 0x01);				/* one argument, not serialized */
	cond = p + 5;
	REQUIRE(cond[0] == 0xa0);				/* If */
	cond_end = cond + 1 + pkg_length(cond + 1, &n);
	CHECK(cond_end == method_end);
	p = cond + 1 + n;
	CHECK(p[0] == 0x93 && p[1] == 0x68 && p[2] == 0x0a);	/* LEqual (Arg0, BytePrefix */
	CHECK_EQ_INT(p[3], VMGENID_GSI);			/*   GSI) */
	CHECK(cond_end - (p + 4) == (long)sizeof(notify) && memcmp(p + 4, notify, sizeof(notify)) == 0);
	guest_mem_exit(&mem);
}

static void check_tables_apart(int nr_cpus)
{
	static const char *const sigs[] = { "FACP", "APIC" };
	struct vm_error err = { 0 };
	struct guest_mem mem;
	uint64_t start[5], stop[5], addr;
	const uint8_t *fadt;
	uint32_t len;
	int n = 0;

	CHECK_OK(boot(&mem, nr_cpus, &err), err.msg);
	REQUIRE(mem.host);
	start[n] = ACPI_RSDP_ADDR;
	stop[n] = start[n] + 36;
	n++;
	start[n] = test_rd64((const uint8_t *)guest_mem_ptr(&mem, ACPI_RSDP_ADDR, 36) + 24);
	stop[n] = start[n] + 52;
	n++;
	for (int i = 0; i < 2; i++) {
		REQUIRE(xsdt_find(&mem, sigs[i], &addr, &len));
		start[n] = addr;
		stop[n++] = addr + len;
	}
	fadt = xsdt_find(&mem, "FACP", &addr, &len);
	REQUIRE(fadt && table(&mem, test_rd64(fadt + 140), "DSDT", &len));
	start[n] = test_rd64(fadt + 140);
	stop[n] = start[n] + len;
	for (int i = 0; i <= n; i++) {
		CHECK(start[i] >= 0xe0000);			/* above the MP table and the EBDA */
		CHECK(stop[i] <= VMGENID_ADDR);			/* below the generation ID, and so below the kernel */
		for (int j = 0; j < i; j++)
			CHECK(stop[i] <= start[j] || stop[j] <= start[i]);
	}
	guest_mem_exit(&mem);
}

TEST(acpi_tables_do_not_overlap_and_stay_below_the_generation_id)
{
	check_tables_apart(1);
	check_tables_apart(64);
}

/* The generation ID is 16-byte aligned, e820-reserved, and the tables leave it alone even at 254 vCPUs. */
TEST(acpi_tables_for_the_most_vcpus_leave_the_generation_id_alone)
{
	struct vm_error err = { 0 };
	struct guest_mem mem;
	uint8_t *id;

	CHECK_EQ_INT(VMGENID_ADDR % 16, 0);
	CHECK(VMGENID_ADDR >= BOOT_EBDA && VMGENID_ADDR + VMGENID_LEN <= 0x100000);
	REQUIRE(guest_mem_init(&mem, RAM, &err) == 0);
	id = guest_mem_ptr(&mem, VMGENID_ADDR, VMGENID_LEN);
	REQUIRE(id);
	memset(id, 0xa5, VMGENID_LEN);
	CHECK_OK(acpi_write(&mem, 254, NULL, 0, &err), err.msg);
	for (int i = 0; i < VMGENID_LEN; i++)
		CHECK_EQ_INT(id[i], 0xa5);
	guest_mem_exit(&mem);
}

/* Every slot filled (the root disk, rng, vsock, console, net and four volumes) still fits the DSDT and the area. */
TEST(acpi_tables_list_every_virtio_slot)
{
	struct boot_virtio v[BOOT_MAX_VIRTIO + 1];
	struct vm_error err = { 0 };
	struct guest_mem mem;

	for (int i = 0; i <= BOOT_MAX_VIRTIO; i++)
		v[i] = (struct boot_virtio){ .base = 0xc0001000ULL + 0x1000ULL * (uint64_t)i, .len = 0x1000,
					     .gsi = 5 + (uint32_t)i };
	REQUIRE(guest_mem_init(&mem, RAM, &err) == 0);
	CHECK_OK(acpi_write(&mem, 64, v, BOOT_MAX_VIRTIO, &err), err.msg);
	CHECK(acpi_write(&mem, 1, v, BOOT_MAX_VIRTIO + 1, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "cannot list");
	CHECK(5 + BOOT_MAX_VIRTIO - 1 < VMGENID_GSI);	/* no virtio GSI meets the generation ID's */
	guest_mem_exit(&mem);
}

TEST(acpi_tables_refuse_guest_memory_that_ends_below_them)
{
	struct vm_error err = { 0 };
	struct guest_mem mem;

	REQUIRE(guest_mem_init(&mem, ACPI_RSDP_ADDR + 256, &err) == 0);
	CHECK(acpi_write(&mem, 1, NULL, 0, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "no room for the ACPI tables");
	guest_mem_exit(&mem);
}

TEST(aml_pkg_length_takes_one_to_four_bytes)
{
	uint8_t out[4];

	CHECK_EQ_INT(acpi_aml_pkg_length(out, 0), 1);
	CHECK_EQ_INT(out[0], 0x01);				/* counts itself */
	CHECK_EQ_INT(acpi_aml_pkg_length(out, 62), 1);
	CHECK_EQ_INT(out[0], 0x3f);				/* 63: the most one byte holds */
	CHECK_EQ_INT(acpi_aml_pkg_length(out, 63), 2);		/* 65 = 0x41 */
	CHECK_EQ_INT(out[0], 0x41);				/* one byte follows, low nibble 1 */
	CHECK_EQ_INT(out[1], 0x04);
	CHECK_EQ_INT(acpi_aml_pkg_length(out, 4093), 2);	/* 4095: the most two bytes hold */
	CHECK_EQ_INT(out[0], 0x4f);
	CHECK_EQ_INT(out[1], 0xff);
	CHECK_EQ_INT(acpi_aml_pkg_length(out, 4094), 3);	/* 4097 = 0x1001 */
	CHECK_EQ_INT(out[0], 0x81);
	CHECK_EQ_INT(out[1], 0x00);
	CHECK_EQ_INT(out[2], 0x01);
	CHECK_EQ_INT(acpi_aml_pkg_length(out, 0x0ffffffb), 4);
	CHECK_EQ_INT(acpi_aml_pkg_length(out, 0x0ffffffc), 0);	/* past 28 bits: no encoding */
}
