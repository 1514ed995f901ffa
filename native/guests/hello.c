/*
 * Prints a greeting, its command line and how many e820 entries it was given, then ends the VM:
 * by i8042 reset (default), `exit=N` (debug-exit with code N), `fault` (triple fault), `acpi-poweroff` (ACPI S5
 * through the sleep control register the FADT names, as Linux's `poweroff` does) or `panic` (the pvpanic port).
 * When one of the last two does not end the VM, it says why and ends with a debug-exit code from 96 up.
 */
#include "guest.h"

#define ACPI_SLEEP_TYP_S5 5	/* what the DSDT's \_S5_ says; a real guest reads it from there */
#define ACPI_SLEEP_EN 0x20
#define ACPI_WAK_STS 0x80
#define PVPANIC_PORT 0x505
#define PVPANIC_PANICKED 0x01

static void put_hex(uint64_t v)
{
	char buf[17];
	int i = 16;

	buf[i] = 0;
	do {
		buf[--i] = "0123456789abcdef"[v & 0xf];
		v >>= 4;
	} while (v);
	uart_puts("0x");
	uart_puts(buf + i);
}

__attribute__((noreturn)) static void fail(const char *why, int code)
{
	uart_puts(why);
	uart_puts("\n");
	debug_exit(code);
}

static int same(const uint8_t *p, const char *s, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (p[i] != (uint8_t)s[i])
			return 0;
	return 1;
}

static uint8_t sum(const uint8_t *p, uint32_t n)
{
	uint8_t s = 0;

	while (n--)
		s += *p++;
	return s;
}

static uint64_t rd(const uint8_t *p, unsigned n)	/* little-endian, any alignment */
{
	uint64_t v = 0;

	while (n--)
		v = v << 8 | p[n];
	return v;
}

/* The ACPI table at `addr` if it has signature `sig` and sums to zero (the first 4 GiB are identity-mapped). */
static const uint8_t *acpi_table(uint64_t addr, const char *sig)
{
	const uint8_t *t = (const uint8_t *)(uintptr_t)addr;

	if (!addr || addr >= (1ULL << 32) || !same(t, sig, 4) || sum(t, (uint32_t)rd(t + 4, 4)) != 0)
		return 0;
	return t;
}

/* The FADT, found the way an OS does: the RSDP on a 16-byte boundary in 0xE0000-0xFFFFF, its XSDT, the FACP. */
static const uint8_t *fadt_find(void)
{
	for (uintptr_t a = 0xe0000; a < 0x100000; a += 16) {
		const uint8_t *rsdp = (const uint8_t *)a, *xsdt;

		if (!same(rsdp, "RSD PTR ", 8) || sum(rsdp, 20) != 0)
			continue;
		if (rsdp[15] < 2 || sum(rsdp, 36) != 0 || !(xsdt = acpi_table(rd(rsdp + 24, 8), "XSDT")))
			return 0;
		for (uint32_t off = 36; off + 8 <= rd(xsdt + 4, 4); off += 8) {
			const uint8_t *fadt = acpi_table(rd(xsdt + off, 8), "FACP");

			if (fadt)
				return fadt;
		}
		return 0;
	}
	return 0;
}

/* Linux's order in a hardware-reduced S5: clear WAK_STS in the status register, then SLP_TYP | SLP_EN. */
__attribute__((noreturn)) static void acpi_poweroff(void)
{
	const uint8_t *fadt = fadt_find();
	uint16_t ctrl, status;

	if (!fadt || rd(fadt + 4, 4) < 268)
		fail("acpi: no FADT with sleep registers", 99);
	if (fadt[244] != 1 || fadt[256] != 1)	/* SLEEP_CONTROL_REG, SLEEP_STATUS_REG: SystemIO */
		fail("acpi: the sleep registers are not I/O ports", 99);
	ctrl = (uint16_t)rd(fadt + 248, 8);
	status = (uint16_t)rd(fadt + 260, 8);
	uart_puts("acpi: sleep control port ");
	put_hex(ctrl);
	uart_puts(", status port ");
	put_hex(status);
	uart_puts("\n");
	outb(status, ACPI_WAK_STS);
	if (inb(status) & ACPI_WAK_STS)
		fail("acpi: WAK_STS is set", 98);
	uart_puts("acpi: WAK_STS clear, entering S5\n");
	outb(ctrl, ACPI_SLEEP_TYP_S5 << 2 | ACPI_SLEEP_EN);
	fail("acpi: still running after entering S5", 97);
}

__attribute__((noreturn)) static void pvpanic(void)
{
	uint8_t events = inb(PVPANIC_PORT);

	uart_puts("pvpanic: events ");
	put_hex(events);
	uart_puts("\n");
	if (events != PVPANIC_PANICKED)
		fail("pvpanic: expected PANICKED only", 96);
	outb(PVPANIC_PORT, PVPANIC_PANICKED);
	fail("pvpanic: still running after reporting a panic", 96);
}

int main(const uint8_t *bp)
{
	const char *cmdline = boot_cmdline(bp);

	uart_init();
	uart_puts("smol: hello from a tiny guest\n");
	uart_puts("cmdline: ");
	uart_puts(cmdline);
	uart_puts("\ne820: ");
	uart_putu(boot_e820_entries(bp));
	uart_puts(" entries\n");
	if (cmdline_has(cmdline, "fault"))
		triple_fault();
	if (cmdline_has(cmdline, "acpi-poweroff"))
		acpi_poweroff();
	if (cmdline_has(cmdline, "panic"))
		pvpanic();
	if (cmdline_number(cmdline, "exit", 256) < 256)
		debug_exit((int)cmdline_number(cmdline, "exit", 0));
	i8042_reset();
}
