/*
 * Echoes what it receives, driven only by UART receive interrupts through the 8259 PIC: between interrupts the CPU
 * sits in HLT, so nothing would come back if interrupts did not work. A 0x04 (Ctrl-D) ends it with a reset.
 * Flow control like a driver's: when its buffer is full it masks the receive interrupt until it has caught up.
 */
#include "guest.h"

#define COM1_IRQ 4

#define RX_SIZE 4096u	/* a power of two */

static volatile uint8_t rx_buf[RX_SIZE];
static volatile uint32_t rx_head, rx_tail;	/* free-running; the ring holds head - tail bytes */
static volatile int rx_throttled;
volatile uint64_t interrupts;

IRQ_ENTRY(irq4_entry, irq4_handler);

void irq4_handler(void)
{
	int c;

	interrupts++;
	(void)inb(COM1 + 2);	/* IIR: acknowledge */
	while (rx_head - rx_tail < RX_SIZE && (c = uart_getc_poll()) >= 0)
		rx_buf[rx_head++ % RX_SIZE] = (uint8_t)c;
	if (rx_head - rx_tail == RX_SIZE) {
		outb(COM1 + 1, 0x00);	/* full: mask the receive interrupt until the main loop catches up */
		rx_throttled = 1;
	}
	pic_eoi();
}

int main(const uint8_t *bp)
{
	(void)bp;
	uart_init();
	idt_set(IRQ_BASE + COM1_IRQ, irq4_entry);
	idt_load();
	pic_init(1u << COM1_IRQ);
	outb(COM1 + 1, 0x01);	/* receive-data interrupt */
	uart_puts("echo: ready\n");
	for (;;) {
		__asm__ volatile("sti; hlt; cli");
		while (rx_tail != rx_head) {
			uint8_t c = rx_buf[rx_tail++ % RX_SIZE];

			if (c == 0x04) {
				uart_puts("\necho: bye after ");
				uart_putu(interrupts);
				uart_puts(" interrupts\n");
				i8042_reset();
			}
			uart_putc((char)c);
		}
		if (rx_throttled) {
			rx_throttled = 0;
			outb(COM1 + 1, 0x01);	/* unmask: data still waiting raises the interrupt again */
		}
	}
}
