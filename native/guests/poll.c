/*
 * Echoes what it receives by polling COM1 as a boot loader or a bare-metal program does: interrupts stay off
 * (IF clear, IER 0), it reads LSR until DR is set and then RBR. A 0x04 (Ctrl-D) ends it with a reset.
 */
#include "guest.h"

int main(const uint8_t *bp)
{
	uint64_t received = 0;

	(void)bp;
	__asm__ volatile("cli");
	uart_init();
	uart_puts("poll: ready\n");
	for (;;) {
		int c = uart_getc_poll();

		if (c < 0)
			continue;
		received++;
		if (c == 0x04) {
			uart_puts("\npoll: bye after ");
			uart_putu(received);
			uart_puts(" bytes\n");
			i8042_reset();
		}
		uart_putc((char)c);
	}
}
