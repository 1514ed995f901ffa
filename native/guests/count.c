/*
 * Counts in memory and prints `count=N` every `every=` iterations (default 1,000,000). With `limit=N` it powers
 * off with code 0 after printing N lines; without, it counts until the host ends it.
 */
#include "guest.h"

volatile uint64_t counter;

int main(const uint8_t *bp)
{
	const char *cmdline = boot_cmdline(bp);
	uint64_t every = cmdline_number(cmdline, "every", 1000000), limit = cmdline_number(cmdline, "limit", 0);

	uart_init();
	uart_puts("count: start\n");
	for (uint64_t line = 1; !limit || line <= limit; line++) {
		for (uint64_t i = 0; i < every; i++)
			counter++;
		uart_puts("count=");
		uart_putu(line);
		uart_putc('\n');
	}
	return 0;
}
