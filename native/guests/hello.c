/*
 * Prints a greeting, its command line and how many e820 entries it was given, then ends the VM:
 * by i8042 reset (default), `exit=N` (debug-exit with code N), or `fault` (triple fault).
 */
#include "guest.h"

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
	if (cmdline_number(cmdline, "exit", 256) < 256)
		debug_exit((int)cmdline_number(cmdline, "exit", 0));
	i8042_reset();
}
