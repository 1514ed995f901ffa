/*
 * A 16550A UART register model (8250 family), independent of KVM so it can be unit-tested. The host side is four
 * hooks: transmit a byte, say whether input waits, pull received bytes, drive the interrupt line. Input reaches an
 * interrupt-driven guest through the receive FIFO and a polling one through LSR.DR and RBR (uart.c says when).
 */
#ifndef SMOL_UART_H
#define SMOL_UART_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define UART_FIFO_SIZE 16

/* Register offsets */
#define UART_RBR 0	/* receive buffer (read, DLAB=0) */
#define UART_THR 0	/* transmit holding (write, DLAB=0) */
#define UART_IER 1
#define UART_IIR 2	/* read */
#define UART_FCR 2	/* write */
#define UART_LCR 3
#define UART_MCR 4
#define UART_LSR 5
#define UART_MSR 6
#define UART_SCR 7

#define UART_IER_RDI 0x01
#define UART_IER_THRI 0x02
#define UART_IER_RLSI 0x04
#define UART_IER_MSI 0x08

#define UART_IIR_NO_INT 0x01
#define UART_IIR_MSI 0x00
#define UART_IIR_THRI 0x02
#define UART_IIR_RDI 0x04
#define UART_IIR_RLSI 0x06
#define UART_IIR_TIMEOUT 0x0c
#define UART_IIR_FIFO_ENABLED 0xc0

#define UART_FCR_ENABLE 0x01
#define UART_FCR_CLEAR_RX 0x02
#define UART_LCR_DLAB 0x80
#define UART_MCR_OUT2 0x08
#define UART_MCR_LOOP 0x10

#define UART_LSR_DR 0x01
#define UART_LSR_OE 0x02
#define UART_LSR_THRE 0x20
#define UART_LSR_TEMT 0x40

struct uart_hooks {
	void (*tx)(void *opaque, uint8_t byte);			/* called without the UART lock held; may wait */
	int (*rx_waiting)(void *opaque);				/* whether host input waits to be received */
	size_t (*rx_pull)(void *opaque, uint8_t *buf, size_t max);	/* takes host input waiting to be received */
	void (*set_irq)(void *opaque, int level);			/* called with the lock held, on changes only */
	void *opaque;
};

struct uart {
	pthread_mutex_t lock;
	uint8_t ier, lcr, mcr, lsr_errors, scr, dll, dlm, fcr;
	uint8_t rx[UART_FIFO_SIZE];
	unsigned rx_head, rx_len;
	int thri_pending;	/* transmit-holding-empty interrupt raised and not yet acknowledged */
	int rx_offered;		/* the last access was an LSR read that reported a byte still in the host queue */
	int rx_settling;	/* a configuring write since the last LSR read: the next one offers no host input */
	int irq_level;
	struct uart_hooks hooks;
};

void uart_init(struct uart *u, const struct uart_hooks *hooks);
void uart_exit(struct uart *u);
uint8_t uart_read(struct uart *u, unsigned offset);
void uart_write(struct uart *u, unsigned offset, uint8_t value);
/* The host has new input: move what fits into the receive FIFO and raise the interrupt. */
void uart_input_ready(struct uart *u);

/*
 * State, as plain data (docs/snapshots.md, "com1"): the registers, the receive FIFO in order and the pending
 * transmit interrupt. The line-status byte has DR set when a polling guest was offered a byte from the host queue
 * and has not read RBR yet (the byte itself is in the saved console input). uart_state_decode checks untrusted
 * bytes (uart_state.c) and returns what is wrong, or NULL; uart_get_state and uart_set_state take the UART's lock.
 * uart_resync_irq drives the interrupt line to what the registers say (after a restore: a pending interrupt is
 * raised again).
 */
struct le_writer;

struct uart_state {
	uint8_t ier, lcr, mcr, lsr, scr, dll, dlm, fcr;
	uint8_t thri_pending;
	uint8_t rx_len;
	uint8_t rx[UART_FIFO_SIZE];
};

#define UART_STATE_FIXED 10
#define UART_STATE_MAX (UART_STATE_FIXED + UART_FIFO_SIZE)
void uart_state_encode(const struct uart_state *s, struct le_writer *w);
const char *uart_state_decode(const uint8_t *data, size_t len, struct uart_state *s);
void uart_get_state(struct uart *u, struct uart_state *s);
void uart_set_state(struct uart *u, const struct uart_state *s);
/* The two together, as a device section holds them: the bytes written, or what is wrong (and nothing changed). */
size_t uart_save(struct uart *u, uint8_t out[UART_STATE_MAX]);
const char *uart_load(struct uart *u, const uint8_t *data, size_t len);
void uart_resync_irq(struct uart *u);
/* One line describing the registers and the interrupt, for debugging. */
void uart_describe(struct uart *u, char *buf, size_t size);

#endif
