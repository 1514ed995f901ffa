#include "uart.h"

#include <stdio.h>
#include <string.h>

static unsigned rx_capacity(const struct uart *u)
{
	return (u->fcr & UART_FCR_ENABLE) ? UART_FIFO_SIZE : 1;
}

static unsigned rx_trigger(const struct uart *u)
{
	static const unsigned levels[4] = { 1, 4, 8, 14 };

	return (u->fcr & UART_FCR_ENABLE) ? levels[u->fcr >> 6] : 1;
}

static int rx_push(struct uart *u, uint8_t byte)
{
	if (u->rx_len >= rx_capacity(u)) {
		u->lsr_errors |= UART_LSR_OE;
		return 0;
	}
	u->rx[(u->rx_head + u->rx_len++) % UART_FIFO_SIZE] = byte;
	return 1;
}

/*
 * Host input reaches the guest in one of two ways, and until one applies it waits in the host queue, so nothing
 * typed or piped before a reader exists is lost to a driver's start-up.
 *
 * Interrupt-driven: once the receive interrupt is enabled (IER.RDI) with OUT2 set (on a PC, OUT2 connects the
 * UART's interrupt to the interrupt controller; drivers set it when they use the IRQ), the receive FIFO is refilled
 * from the host queue as the guest reads. Linux's 8250 probe sets IER to 0x0f for a moment with OUT2 still clear,
 * and its probe and start-up clear the FIFOs and read RBR to drop stale bytes; input moved in earlier would be lost
 * there. A driver that clears IER.RDI keeps what is already in the FIFO and gets no more until it sets it again.
 *
 * Polled (rx_offer): a guest that reads LSR finds DR set while the host queue holds input, and the RBR read that
 * follows takes one byte, as on a 16550 whose FIFO holds it. The byte stays in the host queue until that read, so
 * no FIFO clear can drop it. Two kinds of read never see it: the first LSR read after a write that configures the
 * port (IER, FCR, LCR, MCR, the divisor), because that is how drivers throw stale input away (Linux's start-up and
 * probe read LSR and RBR once each, without looking, right after writing FCR or IER), while a polling reader reads
 * LSR again and again; and any read while the guest takes some interrupts but not the receive one (a driver that
 * turned RDI off to throttle, or is closing the port, and still handles transmit interrupts).
 */
static void rx_refill(struct uart *u)
{
	uint8_t buf[UART_FIFO_SIZE];
	size_t n;

	if ((u->mcr & UART_MCR_LOOP) || !(u->mcr & UART_MCR_OUT2) || !(u->ier & UART_IER_RDI) ||
	    !u->hooks.rx_pull || u->rx_len >= rx_capacity(u))
		return;
	n = u->hooks.rx_pull(u->hooks.opaque, buf, rx_capacity(u) - u->rx_len);
	for (size_t i = 0; i < n; i++)
		rx_push(u, buf[i]);
}

/* Whether an LSR read may report a byte that is still in the host queue (see above). */
static int rx_offerable(const struct uart *u)
{
	unsigned enabled = u->ier & 0x0f;

	return !(u->mcr & UART_MCR_LOOP) && !u->rx_settling && (!enabled || (enabled & UART_IER_RDI)) &&
	       u->hooks.rx_waiting && u->hooks.rx_pull && u->hooks.rx_waiting(u->hooks.opaque);
}

static uint8_t iir_value(const struct uart *u)
{
	if ((u->ier & UART_IER_RLSI) && (u->lsr_errors & UART_LSR_OE))
		return UART_IIR_RLSI;
	if ((u->ier & UART_IER_RDI) && u->rx_len)
		return u->rx_len >= rx_trigger(u) ? UART_IIR_RDI : UART_IIR_TIMEOUT;
	if ((u->ier & UART_IER_THRI) && u->thri_pending)
		return UART_IIR_THRI;
	return UART_IIR_NO_INT;
}

static void irq_update(struct uart *u)
{
	int level = iir_value(u) != UART_IIR_NO_INT;

	if (level != u->irq_level) {
		u->irq_level = level;
		if (u->hooks.set_irq)
			u->hooks.set_irq(u->hooks.opaque, level);
	}
}

static uint8_t msr_value(const struct uart *u)
{
	if (u->mcr & UART_MCR_LOOP) {
		/* DTR->DSR, RTS->CTS, OUT1->RI, OUT2->DCD */
		return (uint8_t)(((u->mcr & 0x01) << 5) | ((u->mcr & 0x02) << 3) | ((u->mcr & 0x04) << 4) |
				 ((u->mcr & 0x08) << 4));
	}
	return 0xb0;	/* carrier detect, data set ready, clear to send */
}

void uart_init(struct uart *u, const struct uart_hooks *hooks)
{
	memset(u, 0, sizeof(*u));
	pthread_mutex_init(&u->lock, NULL);
	u->hooks = *hooks;
	u->dll = 12;		/* 9600 baud */
	u->rx_settling = 1;
}

void uart_exit(struct uart *u)
{
	pthread_mutex_destroy(&u->lock);
}

uint8_t uart_read(struct uart *u, unsigned offset)
{
	uint8_t v = 0xff;
	int offered;

	pthread_mutex_lock(&u->lock);
	offered = u->rx_offered;	/* an offer lasts until the next access, whatever it is */
	u->rx_offered = 0;
	switch (offset) {
	case UART_RBR:
		if (u->lcr & UART_LCR_DLAB) {
			v = u->dll;
			break;
		}
		v = 0;
		if (u->rx_len) {
			v = u->rx[u->rx_head];
			u->rx_head = (u->rx_head + 1) % UART_FIFO_SIZE;
			u->rx_len--;
		} else if (offered && u->hooks.rx_pull && u->hooks.rx_pull(u->hooks.opaque, &v, 1) != 1) {
			v = 0;	/* the input went elsewhere meanwhile (the virtio-console took over) */
		}
		rx_refill(u);
		break;
	case UART_IER:
		v = (u->lcr & UART_LCR_DLAB) ? u->dlm : u->ier;
		break;
	case UART_IIR:
		v = iir_value(u);
		if (v == UART_IIR_THRI)
			u->thri_pending = 0;	/* reading IIR acknowledges a THRE interrupt */
		if (u->fcr & UART_FCR_ENABLE)
			v |= UART_IIR_FIFO_ENABLED;
		break;
	case UART_LCR:
		v = u->lcr;
		break;
	case UART_MCR:
		v = u->mcr;
		break;
	case UART_LSR:
		/* Transmission is instantaneous, so the holding register and the shifter are always empty. */
		v = UART_LSR_THRE | UART_LSR_TEMT | u->lsr_errors;
		if (u->rx_len)
			v |= UART_LSR_DR;
		else if (rx_offerable(u))
			v |= UART_LSR_DR, u->rx_offered = 1;
		u->lsr_errors = 0;
		u->rx_settling = 0;
		break;
	case UART_MSR:
		v = msr_value(u);
		break;
	case UART_SCR:
		v = u->scr;
		break;
	}
	irq_update(u);
	pthread_mutex_unlock(&u->lock);
	return v;
}

void uart_write(struct uart *u, unsigned offset, uint8_t value)
{
	int transmit = 0;

	pthread_mutex_lock(&u->lock);
	u->rx_offered = 0;
	if (offset != UART_SCR && (offset != UART_THR || (u->lcr & UART_LCR_DLAB)))
		u->rx_settling = 1;	/* the port is being configured: the next LSR read offers no host input */
	switch (offset) {
	case UART_THR:
		if (u->lcr & UART_LCR_DLAB) {
			u->dll = value;
			break;
		}
		if (u->mcr & UART_MCR_LOOP)
			rx_push(u, value);
		else
			transmit = 1;
		u->thri_pending = 1;
		break;
	case UART_IER:
		if (u->lcr & UART_LCR_DLAB) {
			u->dlm = value;
			break;
		}
		/* Enabling the THRE interrupt while the holding register is empty raises it at once, as on a 16550. */
		if ((value & UART_IER_THRI) && !(u->ier & UART_IER_THRI))
			u->thri_pending = 1;
		u->ier = value & 0x0f;
		rx_refill(u);
		break;
	case UART_FCR:
		/*
		 * A real 16550 also empties its FIFOs when FCR0 changes. Here they hold host input that is not stored
		 * anywhere else, and Linux's set_termios turns the FIFOs on just after its start-up enabled the
		 * receive interrupt, so bytes waiting then would be lost: only an explicit clear empties them.
		 */
		if (value & UART_FCR_CLEAR_RX)
			u->rx_head = u->rx_len = 0;
		u->fcr = value & 0xc1;
		rx_refill(u);
		break;
	case UART_LCR:
		u->lcr = value;
		break;
	case UART_MCR:
		u->mcr = value & 0x1f;
		rx_refill(u);
		break;
	case UART_SCR:
		u->scr = value;
		break;
	default:
		break;	/* LSR and MSR are read-only */
	}
	irq_update(u);
	pthread_mutex_unlock(&u->lock);
	if (transmit && u->hooks.tx)
		u->hooks.tx(u->hooks.opaque, value);
}

void uart_input_ready(struct uart *u)
{
	pthread_mutex_lock(&u->lock);
	rx_refill(u);
	irq_update(u);
	pthread_mutex_unlock(&u->lock);
}

void uart_get_state(struct uart *u, struct uart_state *s)
{
	pthread_mutex_lock(&u->lock);
	*s = (struct uart_state){ .ier = u->ier, .lcr = u->lcr, .mcr = u->mcr, .scr = u->scr, .dll = u->dll,
				  .dlm = u->dlm, .fcr = u->fcr, .thri_pending = (uint8_t)u->thri_pending,
				  .rx_len = (uint8_t)u->rx_len };
	s->lsr = (uint8_t)(u->lsr_errors | (u->rx_offered ? UART_LSR_DR : 0));	/* DR: a polled read was offered a byte */
	for (unsigned i = 0; i < u->rx_len; i++)
		s->rx[i] = u->rx[(u->rx_head + i) % UART_FIFO_SIZE];
	pthread_mutex_unlock(&u->lock);
}

void uart_set_state(struct uart *u, const struct uart_state *s)
{
	pthread_mutex_lock(&u->lock);
	u->ier = s->ier;
	u->lcr = s->lcr;
	u->mcr = s->mcr;
	u->lsr_errors = s->lsr & UART_LSR_OE;
	u->rx_offered = !!(s->lsr & UART_LSR_DR);
	u->scr = s->scr;
	u->dll = s->dll;
	u->dlm = s->dlm;
	u->fcr = s->fcr;
	u->thri_pending = s->thri_pending;
	u->rx_head = 0;
	u->rx_len = s->rx_len;
	memcpy(u->rx, s->rx, s->rx_len);
	pthread_mutex_unlock(&u->lock);
}

void uart_resync_irq(struct uart *u)
{
	pthread_mutex_lock(&u->lock);
	rx_refill(u);
	u->irq_level = iir_value(u) != UART_IIR_NO_INT;
	if (u->hooks.set_irq)
		u->hooks.set_irq(u->hooks.opaque, u->irq_level);
	pthread_mutex_unlock(&u->lock);
}

void uart_describe(struct uart *u, char *buf, size_t size)
{
	pthread_mutex_lock(&u->lock);
	snprintf(buf, size, "IER=%02x IIR=%02x LCR=%02x MCR=%02x FCR=%02x LSR-errors=%02x rx_len=%u thri_pending=%d "
		 "irq_level=%d", u->ier, iir_value(u), u->lcr, u->mcr, u->fcr, u->lsr_errors, u->rx_len, u->thri_pending,
		 u->irq_level);
	pthread_mutex_unlock(&u->lock);
}
