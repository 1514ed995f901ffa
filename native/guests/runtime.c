#include "guest.h"

void uart_init(void)
{
	outb(COM1 + 1, 0x00);		/* no interrupts */
	outb(COM1 + 3, 0x80);		/* DLAB */
	outb(COM1 + 0, 0x01);		/* 115200 baud */
	outb(COM1 + 1, 0x00);
	outb(COM1 + 3, 0x03);		/* 8N1 */
	outb(COM1 + 2, 0x07);		/* FIFOs on and cleared, trigger 1 byte */
	outb(COM1 + 4, 0x0b);		/* DTR, RTS, OUT2 */
}

void uart_putc(char c)
{
	while (!(inb(COM1 + 5) & 0x20))	/* wait for THRE */
		;
	outb(COM1, (uint8_t)c);
}

void uart_puts(const char *s)
{
	while (*s)
		uart_putc(*s++);
}

void uart_putu(uint64_t v)
{
	char buf[21];
	int i = 20;

	buf[i] = 0;
	do {
		buf[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	uart_puts(buf + i);
}

int uart_getc_poll(void)
{
	return (inb(COM1 + 5) & 0x01) ? inb(COM1) : -1;
}

void debug_exit(int code)
{
	outb(0x501, (uint8_t)code);
	for (;;)
		__asm__ volatile("cli; hlt");
}

void i8042_reset(void)
{
	outb(0x64, 0xfe);
	for (;;)
		__asm__ volatile("cli; hlt");
}

void triple_fault(void)
{
	static const struct __attribute__((packed)) { uint16_t limit; uint64_t base; } empty = { 0, 0 };

	__asm__ volatile("lidt %0; int3" : : "m"(empty));
	for (;;)
		;
}

const char *boot_cmdline(const uint8_t *bp)
{
	uint32_t ptr = *(const uint32_t *)(bp + 0x228);

	return ptr ? (const char *)(uintptr_t)ptr : "";
}

unsigned boot_e820_entries(const uint8_t *bp)
{
	return bp[0x1e8];
}

static const char *word_find(const char *s, const char *key)
{
	for (const char *p = s; *p; p++) {
		const char *a = p, *b = key;

		if (p != s && p[-1] != ' ')
			continue;
		while (*b && *a == *b)
			a++, b++;
		if (!*b)
			return a;
	}
	return 0;
}

uint64_t cmdline_number(const char *cmdline, const char *key, uint64_t fallback)
{
	const char *p = word_find(cmdline, key);
	uint64_t v = 0;

	if (!p || *p != '=')
		return fallback;
	for (p++; *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (uint64_t)(*p - '0');
	return v;
}

int cmdline_has(const char *cmdline, const char *word)
{
	const char *p = word_find(cmdline, word);

	return p && (*p == 0 || *p == ' ');
}

struct idt_gate {
	uint16_t offset_lo, selector;
	uint8_t ist, type;
	uint16_t offset_mid;
	uint32_t offset_hi, zero;
} __attribute__((packed));

static struct idt_gate idt[256] __attribute__((aligned(16)));

void idt_set(int vector, void (*entry)(void))
{
	uint64_t a = (uint64_t)(uintptr_t)entry;

	idt[vector] = (struct idt_gate){ .offset_lo = (uint16_t)a, .selector = 0x08, .type = 0x8e,
					 .offset_mid = (uint16_t)(a >> 16), .offset_hi = (uint32_t)(a >> 32) };
}

void idt_load(void)
{
	struct __attribute__((packed)) { uint16_t limit; uint64_t base; } idtr = { sizeof(idt) - 1,
										   (uint64_t)(uintptr_t)idt };

	__asm__ volatile("lidt %0" : : "m"(idtr));
}

void pic_init(uint16_t unmasked)
{
	outb(PIC1, 0x11);		/* ICW1: edge triggered, cascade, ICW4 follows */
	outb(PIC2, 0x11);
	outb(PIC1 + 1, IRQ_BASE);	/* ICW2: vector bases */
	outb(PIC2 + 1, IRQ_BASE + 8);
	outb(PIC1 + 1, 4);		/* ICW3: the slave on IRQ 2 */
	outb(PIC2 + 1, 2);
	outb(PIC1 + 1, 1);		/* ICW4: 8086 mode */
	outb(PIC2 + 1, 1);
	outb(PIC1 + 1, (uint8_t)~unmasked);
	outb(PIC2 + 1, (uint8_t)~(unmasked >> 8));
}
