/*
 * Echoes what it receives, driven only by UART receive interrupts through the 8259 PIC: between interrupts the CPU
 * sits in HLT, so nothing would come back if interrupts did not work. A 0x04 (Ctrl-D) ends it with a reset.
 * Flow control like a driver's: when its buffer is full it masks the receive interrupt until it has caught up.
 */
#include "guest.h"

#define PIC1 0x20
#define PIC2 0xa0
#define IRQ_BASE 0x20
#define COM1_IRQ 4

struct idt_gate {
	uint16_t offset_lo, selector;
	uint8_t ist, type;
	uint16_t offset_mid;
	uint32_t offset_hi, zero;
} __attribute__((packed));

static struct idt_gate idt[256] __attribute__((aligned(16)));
#define RX_SIZE 4096u	/* a power of two */

static volatile uint8_t rx_buf[RX_SIZE];
static volatile uint32_t rx_head, rx_tail;	/* free-running; the ring holds head - tail bytes */
static volatile int rx_throttled;
volatile uint64_t interrupts;

extern void irq4_entry(void);

__asm__(".text\n"
	"irq4_entry:\n"
	"  push %rax; push %rcx; push %rdx; push %rsi; push %rdi; push %r8; push %r9; push %r10; push %r11\n"
	"  cld\n"
	"  call irq4_handler\n"
	"  pop %r11; pop %r10; pop %r9; pop %r8; pop %rdi; pop %rsi; pop %rdx; pop %rcx; pop %rax\n"
	"  iretq\n");

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
	outb(PIC1, 0x20);	/* end of interrupt */
}

static void idt_set(int vector, void (*fn)(void))
{
	uint64_t a = (uint64_t)(uintptr_t)fn;

	idt[vector] = (struct idt_gate){ .offset_lo = (uint16_t)a, .selector = 0x08, .type = 0x8e,
					 .offset_mid = (uint16_t)(a >> 16), .offset_hi = (uint32_t)(a >> 32) };
}

static void pic_init(void)
{
	outb(PIC1, 0x11);
	outb(PIC2, 0x11);
	outb(PIC1 + 1, IRQ_BASE);
	outb(PIC2 + 1, IRQ_BASE + 8);
	outb(PIC1 + 1, 4);
	outb(PIC2 + 1, 2);
	outb(PIC1 + 1, 1);
	outb(PIC2 + 1, 1);
	outb(PIC1 + 1, (uint8_t) ~(1u << COM1_IRQ));
	outb(PIC2 + 1, 0xff);
}

int main(const uint8_t *bp)
{
	struct __attribute__((packed)) { uint16_t limit; uint64_t base; } idtr = { sizeof(idt) - 1,
										   (uint64_t)(uintptr_t)idt };

	(void)bp;
	uart_init();
	idt_set(IRQ_BASE + COM1_IRQ, irq4_entry);
	__asm__ volatile("lidt %0" : : "m"(idtr));
	pic_init();
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
