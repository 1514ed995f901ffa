/*
 * Counts and prints `count=N`. By default it counts in memory and prints every `every=` iterations (default
 * 1,000,000), keeping its vCPU busy. With `hz=N` (1 to 100) it prints N lines a second, paced by the PIT's
 * interrupt, and sits in HLT in between: a guest that is alive and visibly moving but costs the host nothing,
 * which is what the engine's tests want (many VMs, one slow CPU). With `limit=N` it powers off with code 0 after
 * printing N lines; without, it counts until the host ends it.
 */
#include "guest.h"

#define PIT_HZ 1193182u
#define TICK_HZ 100u
#define PIT_IRQ 0

volatile uint64_t counter;
static volatile uint64_t ticks;

IRQ_ENTRY(irq0_entry, irq0_handler);

void irq0_handler(void)
{
	ticks++;
	pic_eoi();
}

/* PIT channel 0 as a rate generator at TICK_HZ, its interrupt the only one unmasked. */
static void pit_start(void)
{
	uint16_t divisor = (uint16_t)(PIT_HZ / TICK_HZ);

	idt_set(IRQ_BASE + PIT_IRQ, irq0_entry);
	idt_load();
	pic_init(1u << PIT_IRQ);
	outb(0x43, 0x34);		/* channel 0, low then high byte, mode 2 */
	outb(0x40, (uint8_t)divisor);
	outb(0x40, (uint8_t)(divisor >> 8));
}

/* Sleeps until `n` more ticks have passed. */
static void wait_ticks(uint64_t n)
{
	uint64_t until = ticks + n;

	while (ticks < until)
		__asm__ volatile("sti; hlt; cli");
}

int main(const uint8_t *bp)
{
	const char *cmdline = boot_cmdline(bp);
	uint64_t every = cmdline_number(cmdline, "every", 1000000), limit = cmdline_number(cmdline, "limit", 0);
	uint64_t hz = cmdline_number(cmdline, "hz", 0);

	uart_init();
	if (hz > TICK_HZ)
		hz = TICK_HZ;
	if (hz)
		pit_start();
	uart_puts("count: start\n");
	for (uint64_t line = 1; !limit || line <= limit; line++) {
		if (hz) {
			wait_ticks(TICK_HZ / hz);
			counter++;
		} else {
			for (uint64_t i = 0; i < every; i++)
				counter++;
		}
		uart_puts("count=");
		uart_putu(line);
		uart_putc('\n');
	}
	return 0;
}
