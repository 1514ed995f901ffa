/* The UART's state codec (uart.h, docs/snapshots.md "com1"): plain bytes, no KVM. */
#include "le_codec.h"
#include "uart.h"

void uart_state_encode(const struct uart_state *s, struct le_writer *w)
{
	le_put_u8(w, s->ier);
	le_put_u8(w, s->lcr);
	le_put_u8(w, s->mcr);
	le_put_u8(w, s->lsr);
	le_put_u8(w, s->scr);
	le_put_u8(w, s->dll);
	le_put_u8(w, s->dlm);
	le_put_u8(w, s->fcr);
	le_put_u8(w, s->thri_pending);
	le_put_u8(w, s->rx_len);
	le_put_bytes(w, s->rx, s->rx_len);
}

const char *uart_state_decode(const uint8_t *data, size_t len, struct uart_state *s)
{
	struct le_reader r;

	le_reader_init(&r, data, len);
	s->ier = le_get_u8(&r);
	s->lcr = le_get_u8(&r);
	s->mcr = le_get_u8(&r);
	s->lsr = le_get_u8(&r);
	s->scr = le_get_u8(&r);
	s->dll = le_get_u8(&r);
	s->dlm = le_get_u8(&r);
	s->fcr = le_get_u8(&r);
	s->thri_pending = le_get_u8(&r);
	s->rx_len = le_get_u8(&r);
	if (r.truncated)
		return "shorter than the registers";
	if (s->rx_len > UART_FIFO_SIZE)
		return "more bytes in the receive FIFO than it holds";
	le_get_bytes(&r, s->rx, s->rx_len);
	if (r.truncated || le_remaining(&r))
		return "its length does not match its receive FIFO";
	if (s->thri_pending > 1)
		return "the transmit-interrupt flag is not 0 or 1";
	if (!(s->fcr & UART_FCR_ENABLE) && s->rx_len > 1)
		return "more than one received byte with the FIFO off";
	if ((s->ier & ~0x0f) || (s->mcr & ~0x1f) || (s->lsr & ~(UART_LSR_OE | UART_LSR_DR)) || (s->fcr & ~0xc1))
		return "a register has bits set that the UART never keeps";
	if ((s->lsr & UART_LSR_DR) && s->rx_len)
		return "a byte offered from the host queue while the receive FIFO holds bytes";
	return le_finish(&r);
}

size_t uart_save(struct uart *u, uint8_t out[UART_STATE_MAX])
{
	struct uart_state s;
	struct le_writer w;

	uart_get_state(u, &s);
	le_writer_init(&w, out, UART_STATE_MAX);
	uart_state_encode(&s, &w);
	return w.len;
}

const char *uart_load(struct uart *u, const uint8_t *data, size_t len)
{
	struct uart_state s;
	const char *bad = uart_state_decode(data, len, &s);

	if (!bad)
		uart_set_state(u, &s);
	return bad;
}
