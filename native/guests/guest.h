/* The little runtime every tiny guest shares: port I/O, the UART, ways to end, and the boot parameters. */
#ifndef SMOL_GUEST_H
#define SMOL_GUEST_H

#include <stdint.h>

#define COM1 0x3f8

static inline void outb(uint16_t port, uint8_t v) { __asm__ volatile("outb %0, %1" : : "a"(v), "Nd"(port)); }
static inline uint8_t inb(uint16_t port)
{
	uint8_t v;

	__asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}

void uart_init(void);
void uart_putc(char c);
void uart_puts(const char *s);
void uart_putu(uint64_t v);
int uart_getc_poll(void);		/* -1 when nothing is waiting */

__attribute__((noreturn)) void debug_exit(int code);	/* reason `poweroff`, exit code `code` */
__attribute__((noreturn)) void i8042_reset(void);	/* reason `reset` */
__attribute__((noreturn)) void triple_fault(void);	/* reason `shutdown` */

const char *boot_cmdline(const uint8_t *boot_params);
unsigned boot_e820_entries(const uint8_t *boot_params);
/* The value of `key=` on the command line, or `fallback` when it is absent. */
uint64_t cmdline_number(const char *cmdline, const char *key, uint64_t fallback);
int cmdline_has(const char *cmdline, const char *word);

/* Interrupts through the 8259 PIC, IRQ n at vector IRQ_BASE + n. */
#define PIC1 0x20
#define PIC2 0xa0
#define IRQ_BASE 0x20
void idt_set(int vector, void (*entry)(void));
void idt_load(void);
void pic_init(uint16_t unmasked);	/* bit n set: IRQ n delivered */
static inline void pic_eoi(void) { outb(PIC1, 0x20); }

/*
 * Defines `name`, an interrupt entry that saves the registers a C function may clobber, calls `handler` (a
 * `void handler(void)` that ends with pic_eoi()) and returns with IRETQ.
 */
#define IRQ_ENTRY(name, handler)                                                                            \
	extern void name(void);                                                                             \
	void handler(void);                                                                                 \
	__asm__(".text\n" #name ":\n"                                                                       \
		"  push %rax; push %rcx; push %rdx; push %rsi; push %rdi; push %r8; push %r9; push %r10; push %r11\n" \
		"  cld\n"                                                                                    \
		"  call " #handler "\n"                                                                      \
		"  pop %r11; pop %r10; pop %r9; pop %r8; pop %rdi; pop %rsi; pop %rdx; pop %rcx; pop %rax\n"  \
		"  iretq\n")

#endif
