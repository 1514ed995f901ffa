/*
 * Dirties guest memory on request, for the snapshot benchmarks: each `d` received on the console writes one word
 * into every 4 KiB page of `mib=N` MiB (default 10) starting at 8 MiB, then prints `dirty=K` (K counts the rounds).
 * It polls the UART (receive enabled in IER so the VMM delivers input, CPU interrupts off) with a pause between
 * polls, so an idle guest costs little. `v` checks that every page holds the current round and prints `verify=ok`
 * or `verify=bad` (a restored guest proves its memory came back whole). `q` resets.
 */
#include "guest.h"

#define REGION_START (8ULL << 20)
#define PAGE 4096ULL

int main(const uint8_t *bp)
{
	const char *cmdline = boot_cmdline(bp);
	uint64_t mib = cmdline_number(cmdline, "mib", 10), round = 0;

	uart_init();
	outb(COM1 + 1, 0x01);	/* receive interrupt enabled: the VMM moves input into the FIFO only then */
	uart_puts("dirty: ready\n");
	for (;;) {
		int c = uart_getc_poll();

		if (c < 0) {
			for (int i = 0; i < 20000; i++)
				__asm__ volatile("pause");
			continue;
		}
		if (c == 'q')
			i8042_reset();
		if (c == 'v') {
			uint64_t bad = 0;

			for (uint64_t a = REGION_START; a < REGION_START + (mib << 20); a += PAGE)
				bad += *(volatile uint64_t *)a != round;
			uart_puts(bad ? "verify=bad\n" : "verify=ok\n");
			continue;
		}
		if (c != 'd')
			continue;
		round++;
		for (uint64_t a = REGION_START; a < REGION_START + (mib << 20); a += PAGE)
			*(volatile uint64_t *)a = round;
		uart_puts("dirty=");
		uart_putu(round);
		uart_putc('\n');
	}
}
