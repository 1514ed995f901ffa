/*
 * Floods COM1 with numbered lines that a reader can check, for `smol bench ui`'s console throughput. It prints
 * "flood: ready" and waits (in HLT, woken by the UART's receive interrupt) until a byte is typed, so the viewer is
 * attached before the first line. Then it prints `lines=N` lines (default 100,000), each `width=W` bytes (16 to 250,
 * default 64) ending in CR LF: the line number in 10 digits, a space, and letters that depend on the number
 * (line_fill() says which). Then "flood: done N" and it idles, so the console stays open.
 *
 * By default a whole block of lines goes out in one `rep outsb`: KVM hands the VMM up to a page of bytes per exit,
 * so the guest side costs little and the host's console path is what is measured. With `bytewise` on the command
 * line it writes like a polled driver instead (wait for THRE, one OUTB per byte: two exits a byte).
 */
#include "guest.h"

#define COM1_IRQ 4
#define BLOCK 4096u

static char block[BLOCK];
static volatile int typed;

IRQ_ENTRY(irq4_entry, irq4_handler);

void irq4_handler(void)
{
	(void)inb(COM1 + 2);	/* IIR: acknowledge */
	while (uart_getc_poll() >= 0)
		typed = 1;
	pic_eoi();
}

/* The letter at column `i` of line `n`'s filler: readers compute the same. */
static char line_fill(uint64_t n, uint64_t i)
{
	return (char)('a' + (n + i) % 26);
}

/* Writes line `n`, `width` bytes, into `out`. */
static void line_make(char *out, uint64_t n, uint64_t width)
{
	uint64_t v = n;

	for (int d = 9; d >= 0; d--, v /= 10)
		out[d] = (char)('0' + v % 10);
	out[10] = ' ';
	for (uint64_t i = 11; i < width - 2; i++)
		out[i] = line_fill(n, i);
	out[width - 2] = '\r';
	out[width - 1] = '\n';
}

static void outsb_block(const char *data, uint64_t len)
{
	__asm__ volatile("cld; rep outsb" : "+S"(data), "+c"(len) : "d"((uint16_t)COM1) : "memory");
}

int main(const uint8_t *bp)
{
	const char *cmdline = boot_cmdline(bp);
	uint64_t lines = cmdline_number(cmdline, "lines", 100000), width = cmdline_number(cmdline, "width", 64);
	int bytewise = cmdline_has(cmdline, "bytewise");

	if (width < 16)
		width = 16;
	if (width > 250)
		width = 250;
	uart_init();
	idt_set(IRQ_BASE + COM1_IRQ, irq4_entry);
	idt_load();
	pic_init(1u << COM1_IRQ);
	outb(COM1 + 1, 0x01);	/* receive-data interrupt */
	uart_puts("flood: ready, type a key to start\r\n");
	while (!typed)
		__asm__ volatile("sti; hlt; cli");
	outb(COM1 + 1, 0x00);

	uint64_t per_block = BLOCK / width;

	for (uint64_t n = 1; n <= lines;) {
		uint64_t used = 0;

		for (uint64_t k = 0; k < per_block && n <= lines; k++, n++, used += width)
			line_make(block + used, n, width);
		if (bytewise) {
			for (uint64_t i = 0; i < used; i++)
				uart_putc(block[i]);
		} else {
			outsb_block(block, used);
		}
	}
	uart_puts("flood: done ");
	uart_putu(lines);
	uart_puts("\r\n");
	for (;;)
		__asm__ volatile("cli; hlt");
}
