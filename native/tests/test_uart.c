/* The 16550A model, driven the way a guest driver drives it, against a fake host that records what it sees. */
#include "test.h"
#include "uart.h"

#include <string.h>

struct fake_host {
	uint8_t tx[512];
	size_t ntx;
	uint8_t in[512];
	size_t in_len, in_pos;
	int irq_log[64];	/* every level the UART reported, in order */
	int nirq;
};

static void fake_tx(void *opaque, uint8_t byte)
{
	struct fake_host *h = opaque;

	if (h->ntx < sizeof(h->tx))
		h->tx[h->ntx++] = byte;
}

static size_t fake_rx_pull(void *opaque, uint8_t *buf, size_t max)
{
	struct fake_host *h = opaque;
	size_t n = h->in_len - h->in_pos < max ? h->in_len - h->in_pos : max;

	memcpy(buf, h->in + h->in_pos, n);
	h->in_pos += n;
	return n;
}

static int fake_rx_waiting(void *opaque)
{
	struct fake_host *h = opaque;

	return h->in_pos < h->in_len;
}

static void fake_set_irq(void *opaque, int level)
{
	struct fake_host *h = opaque;

	if (h->nirq < (int)(sizeof(h->irq_log) / sizeof(h->irq_log[0])))
		h->irq_log[h->nirq++] = level;
}

static int irq_level(const struct fake_host *h)
{
	return h->nirq ? h->irq_log[h->nirq - 1] : 0;
}

static void uart_setup(struct uart *u, struct fake_host *h)
{
	struct uart_hooks hooks = { .tx = fake_tx, .rx_waiting = fake_rx_waiting, .rx_pull = fake_rx_pull, .set_irq = fake_set_irq, .opaque = h };

	memset(h, 0, sizeof(*h));
	uart_init(u, &hooks);
}

/* The host user types `len` bytes. */
static void host_types(struct uart *u, struct fake_host *h, const void *data, size_t len)
{
	memcpy(h->in + h->in_len, data, len);
	h->in_len += len;
	uart_input_ready(u);
}

TEST(thr_write_transmits_the_byte)
{
	struct fake_host h;
	struct uart u;

	uart_setup(&u, &h);
	uart_write(&u, UART_THR, 'h');
	uart_write(&u, UART_THR, 'i');
	CHECK_EQ_INT(h.ntx, 2);
	CHECK(memcmp(h.tx, "hi", 2) == 0);
	uart_exit(&u);
}

TEST(lsr_reports_empty_transmitter_and_data_ready_only_when_data_waits)
{
	struct fake_host h;
	struct uart u;

	uart_setup(&u, &h);
	uart_write(&u, UART_MCR, UART_MCR_OUT2);
	uart_write(&u, UART_IER, UART_IER_RDI);
	CHECK_EQ_INT(uart_read(&u, UART_LSR), UART_LSR_THRE | UART_LSR_TEMT);
	host_types(&u, &h, "x", 1);
	CHECK_EQ_INT(uart_read(&u, UART_LSR), UART_LSR_THRE | UART_LSR_TEMT | UART_LSR_DR);
	CHECK_EQ_INT(uart_read(&u, UART_RBR), 'x');
	CHECK_EQ_INT(uart_read(&u, UART_LSR), UART_LSR_THRE | UART_LSR_TEMT);
	uart_exit(&u);
}

TEST(dlab_turns_offsets_0_and_1_into_the_divisor_latch)
{
	struct fake_host h;
	struct uart u;

	uart_setup(&u, &h);
	uart_write(&u, UART_IER, UART_IER_RDI);
	uart_write(&u, UART_LCR, UART_LCR_DLAB | 0x03);
	uart_write(&u, UART_THR, 0x01);		/* divisor 1: 115200 baud */
	uart_write(&u, UART_IER, 0x00);
	CHECK_EQ_INT(uart_read(&u, UART_RBR), 0x01);
	CHECK_EQ_INT(uart_read(&u, UART_IER), 0x00);
	CHECK_EQ_INT(h.ntx, 0);			/* the divisor write is not a character */
	uart_write(&u, UART_LCR, 0x03);
	CHECK_EQ_INT(uart_read(&u, UART_IER), UART_IER_RDI);	/* IER untouched by the latch write */
	uart_write(&u, UART_THR, 'a');
	CHECK_EQ_INT(h.ntx, 1);
	uart_exit(&u);
}

static void read_100_bytes_in_order(unsigned fcr)
{
	struct fake_host h;
	struct uart u;
	uint8_t input[100];
	int in_order = 1;

	uart_setup(&u, &h);
	uart_write(&u, UART_FCR, (uint8_t)fcr);
	uart_write(&u, UART_MCR, UART_MCR_OUT2);
	uart_write(&u, UART_IER, UART_IER_RDI);
	for (int i = 0; i < 100; i++)
		input[i] = (uint8_t)(i + 1);
	host_types(&u, &h, input, sizeof(input));
	for (int i = 0; i < 100; i++) {
		if (!(uart_read(&u, UART_LSR) & UART_LSR_DR)) {
			test_fail(__FILE__, __LINE__, "FCR 0x%02x: data ready is clear after %d of 100 bytes", fcr, i);
			break;
		}
		if (uart_read(&u, UART_RBR) != input[i])
			in_order = 0;
	}
	CHECK(in_order);
	CHECK_EQ_INT(uart_read(&u, UART_LSR) & UART_LSR_DR, 0);
	CHECK_EQ_INT(h.in_pos, 100);
	uart_exit(&u);
}

TEST(host_input_reaches_rbr_in_order_as_the_guest_reads)
{
	read_100_bytes_in_order(UART_FCR_ENABLE);	/* 16-byte FIFO, refilled as it drains */
	read_100_bytes_in_order(0);			/* 16450 mode: one byte at a time */
}

TEST(waiting_input_raises_the_rx_interrupt_until_read)
{
	struct fake_host h;
	struct uart u;
	uint8_t iir;

	uart_setup(&u, &h);
	uart_write(&u, UART_FCR, UART_FCR_ENABLE);
	uart_write(&u, UART_MCR, UART_MCR_OUT2);
	uart_write(&u, UART_IER, UART_IER_RDI);
	CHECK_EQ_INT(irq_level(&h), 0);
	host_types(&u, &h, "abc", 3);
	CHECK_EQ_INT(irq_level(&h), 1);
	iir = uart_read(&u, UART_IIR);
	CHECK_EQ_INT(iir & 0xc0, UART_IIR_FIFO_ENABLED);
	CHECK((iir & 0x0f) == UART_IIR_RDI || (iir & 0x0f) == UART_IIR_TIMEOUT);
	for (int i = 0; i < 3; i++)
		uart_read(&u, UART_RBR);
	CHECK_EQ_INT(irq_level(&h), 0);
	CHECK_EQ_INT(uart_read(&u, UART_IIR), UART_IIR_FIFO_ENABLED | UART_IIR_NO_INT);
	uart_exit(&u);
}

TEST(rx_interrupt_without_fifo_reports_plain_rdi)
{
	struct fake_host h;
	struct uart u;

	uart_setup(&u, &h);
	uart_write(&u, UART_MCR, UART_MCR_OUT2);
	uart_write(&u, UART_IER, UART_IER_RDI);
	host_types(&u, &h, "a", 1);
	CHECK_EQ_INT(irq_level(&h), 1);
	CHECK_EQ_INT(uart_read(&u, UART_IIR), UART_IIR_RDI);	/* no FIFO bits, no timeout in 16450 mode */
	uart_exit(&u);
}

TEST(thre_interrupt_is_raised_acknowledged_by_iir_and_raised_again_by_a_write)
{
	struct fake_host h;
	struct uart u;

	uart_setup(&u, &h);
	uart_write(&u, UART_IER, UART_IER_THRI);
	CHECK_EQ_INT(irq_level(&h), 1);
	CHECK_EQ_INT(uart_read(&u, UART_IIR), UART_IIR_THRI);
	CHECK_EQ_INT(irq_level(&h), 0);
	CHECK_EQ_INT(uart_read(&u, UART_IIR), UART_IIR_NO_INT);
	uart_write(&u, UART_THR, 'x');
	CHECK_EQ_INT(irq_level(&h), 1);
	CHECK_EQ_INT(uart_read(&u, UART_IIR), UART_IIR_THRI);
	uart_exit(&u);
}

TEST(interrupts_are_reported_line_status_first_then_rx_then_thre)
{
	struct fake_host h;
	struct uart u;

	uart_setup(&u, &h);
	uart_write(&u, UART_MCR, UART_MCR_LOOP);
	uart_write(&u, UART_FCR, UART_FCR_ENABLE);
	uart_write(&u, UART_IER, UART_IER_RLSI | UART_IER_RDI | UART_IER_THRI);
	for (int i = 0; i <= UART_FIFO_SIZE; i++)	/* one more than fits: overrun */
		uart_write(&u, UART_THR, (uint8_t)('a' + i));
	CHECK_EQ_INT(uart_read(&u, UART_IIR) & 0x0f, UART_IIR_RLSI);
	CHECK(uart_read(&u, UART_LSR) & UART_LSR_OE);		/* reading LSR clears the line status */
	CHECK_EQ_INT(uart_read(&u, UART_IIR) & 0x0f, UART_IIR_RDI);
	for (int i = 0; i < UART_FIFO_SIZE; i++)
		uart_read(&u, UART_RBR);
	CHECK_EQ_INT(uart_read(&u, UART_IIR) & 0x0f, UART_IIR_THRI);
	CHECK_EQ_INT(uart_read(&u, UART_IIR) & 0x0f, UART_IIR_NO_INT);
	CHECK_EQ_INT(irq_level(&h), 0);
	uart_exit(&u);
}

TEST(overrun_is_reported_once_and_keeps_the_fifo_contents)
{
	struct fake_host h;
	struct uart u;

	uart_setup(&u, &h);
	uart_write(&u, UART_MCR, UART_MCR_LOOP);
	uart_write(&u, UART_FCR, UART_FCR_ENABLE);
	for (int i = 0; i <= UART_FIFO_SIZE; i++)
		uart_write(&u, UART_THR, (uint8_t)('a' + i));
	CHECK_EQ_INT(uart_read(&u, UART_LSR) & UART_LSR_OE, UART_LSR_OE);
	CHECK_EQ_INT(uart_read(&u, UART_LSR) & UART_LSR_OE, 0);
	for (int i = 0; i < UART_FIFO_SIZE; i++)
		CHECK_EQ_INT(uart_read(&u, UART_RBR), 'a' + i);	/* the 17th byte is the one lost */
	CHECK_EQ_INT(uart_read(&u, UART_LSR) & UART_LSR_DR, 0);
	uart_exit(&u);
}

TEST(loopback_echoes_thr_into_rbr_without_transmitting_and_mirrors_modem_lines)
{
	static const struct { uint8_t mcr, msr; } lines[] = {
		{ 0x01, 0x20 },	/* DTR -> DSR */
		{ 0x02, 0x10 },	/* RTS -> CTS */
		{ 0x04, 0x40 },	/* OUT1 -> RI */
		{ 0x08, 0x80 },	/* OUT2 -> DCD */
		{ 0x00, 0x00 },
	};
	struct fake_host h;
	struct uart u;

	uart_setup(&u, &h);
	uart_write(&u, UART_MCR, UART_MCR_LOOP);
	host_types(&u, &h, "typed", 5);			/* host input waits while the driver self-tests */
	uart_write(&u, UART_THR, 0x5a);
	CHECK_EQ_INT(h.ntx, 0);
	CHECK_EQ_INT(uart_read(&u, UART_RBR), 0x5a);
	CHECK_EQ_INT(h.in_pos, 0);
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		uart_write(&u, UART_MCR, UART_MCR_LOOP | lines[i].mcr);
		CHECK_EQ_INT(uart_read(&u, UART_MSR) & 0xf0, lines[i].msr);
	}
	uart_write(&u, UART_MCR, 0x0b);			/* loopback off, OUT2 on */
	uart_write(&u, UART_IER, UART_IER_RDI);		/* and the driver ready to receive: the typed input arrives */
	CHECK_EQ_INT(uart_read(&u, UART_RBR), 't');
	uart_exit(&u);
}

TEST(fcr_clear_rx_empties_the_fifo)
{
	struct fake_host h;
	struct uart u;

	uart_setup(&u, &h);
	uart_write(&u, UART_FCR, UART_FCR_ENABLE);
	uart_write(&u, UART_MCR, UART_MCR_OUT2);
	uart_write(&u, UART_IER, UART_IER_RDI);
	host_types(&u, &h, "stale", 5);
	CHECK(uart_read(&u, UART_LSR) & UART_LSR_DR);
	uart_write(&u, UART_FCR, UART_FCR_ENABLE | UART_FCR_CLEAR_RX);
	CHECK_EQ_INT(uart_read(&u, UART_LSR) & UART_LSR_DR, 0);
	host_types(&u, &h, "new", 3);
	CHECK_EQ_INT(uart_read(&u, UART_RBR), 'n');
	uart_exit(&u);
}

/* What Linux's console does for each message: interrupts off, one LSR read per byte, the IER put back. */
static void linux_console_write(struct uart *u, const char *msg)
{
	uint8_t ier = uart_read(u, UART_IER);

	uart_write(u, UART_IER, 0);
	for (; *msg; msg++) {
		uart_read(u, UART_LSR);		/* wait_for_xmitr(THRE) */
		uart_write(u, UART_THR, (uint8_t)*msg);
	}
	uart_read(u, UART_LSR);			/* wait_for_xmitr(BOTH_EMPTY) */
	uart_write(u, UART_IER, ier);
}

static void linux_clear_fifos(struct uart *u)
{
	uart_write(u, UART_FCR, UART_FCR_ENABLE);
	uart_write(u, UART_FCR, UART_FCR_ENABLE | UART_FCR_CLEAR_RX | 0x04);	/* and clear TX */
	uart_write(u, UART_FCR, 0);
}

/* "Clear the interrupt registers": what start-up reads without looking, to drop stale input. */
static void linux_clear_interrupts(struct uart *u)
{
	uart_read(u, UART_LSR);
	uart_read(u, UART_RBR);
	uart_read(u, UART_IIR);
	uart_read(u, UART_MSR);
}

/*
 * Linux 6.1's 8250 probe and start-up (8250_port.c: autoconfig, serial8250_do_startup, set_termios), with its
 * console printing in between and input typed during boot: nothing may be lost to the FIFO clears and dummy reads.
 */
TEST(host_input_typed_during_linux_boot_survives_the_8250_probe_and_start_up)
{
	struct fake_host h;
	struct uart u;
	uint8_t scratch;

	uart_setup(&u, &h);
	host_types(&u, &h, "early", 5);
	CHECK_EQ_INT(uart_read(&u, UART_LSR) & UART_LSR_DR, 0);
	linux_console_write(&u, "Linux version 6.1\n");
	/* autoconfig: the IER existence test (OUT2 still clear), the FIFO probe, then the reset of the port */
	scratch = uart_read(&u, UART_IER);
	uart_write(&u, UART_IER, 0);
	uart_read(&u, UART_IER);
	uart_write(&u, UART_IER, 0x0f);
	uart_read(&u, UART_IER);
	uart_write(&u, UART_IER, scratch);
	uart_write(&u, UART_FCR, UART_FCR_ENABLE);
	uart_read(&u, UART_IIR);
	uart_write(&u, UART_FCR, 0);
	linux_clear_fifos(&u);
	uart_read(&u, UART_RBR);
	uart_write(&u, UART_IER, 0);
	linux_console_write(&u, "ttyS0 at I/O 0x3f8 is a 16550A\n");
	CHECK_EQ_INT(h.in_pos, 0);
	/* serial8250_do_startup, when init opens the console */
	linux_clear_fifos(&u);
	linux_clear_interrupts(&u);
	uart_read(&u, UART_LSR);			/* the "LSR safety check" */
	uart_read(&u, UART_LSR);			/* the THRE test: wait_for_xmitr */
	uart_write(&u, UART_IER, UART_IER_THRI);
	uart_read(&u, UART_IIR);
	uart_write(&u, UART_IER, 0);
	uart_write(&u, UART_IER, UART_IER_THRI);
	uart_read(&u, UART_IIR);
	uart_write(&u, UART_IER, 0);
	uart_write(&u, UART_LCR, 0x03);			/* "Now, initialize the UART" */
	uart_write(&u, UART_MCR, 0x0b);			/* DTR, RTS, OUT2 */
	uart_write(&u, UART_IER, UART_IER_THRI);	/* the TX-enable test */
	uart_read(&u, UART_LSR);
	uart_read(&u, UART_IIR);
	uart_write(&u, UART_IER, 0);
	linux_clear_interrupts(&u);			/* "again for luck" */
	CHECK_EQ_INT(h.in_pos, 0);
	uart_write(&u, UART_IER, UART_IER_RDI | UART_IER_RLSI);
	uart_write(&u, UART_FCR, UART_FCR_ENABLE);	/* set_termios */
	CHECK_EQ_INT(uart_read(&u, UART_IIR) & 0x0f, UART_IIR_RDI);	/* 5 bytes, trigger level 1 */
	for (int i = 0; i < 5; i++)
		CHECK_EQ_INT(uart_read(&u, UART_RBR), "early"[i]);
	uart_exit(&u);
}

/* A guest set up like native/guests/runtime.c's uart_init: no interrupts, FIFOs on, then it polls LSR for DR. */
static void read_polled(struct uart *u, uint8_t fcr, uint8_t mcr, char *out, size_t len)
{
	uart_write(u, UART_IER, 0);
	uart_write(u, UART_LCR, UART_LCR_DLAB);
	uart_write(u, UART_THR, 0x01);
	uart_write(u, UART_IER, 0);
	uart_write(u, UART_LCR, 0x03);
	uart_write(u, UART_FCR, fcr);
	uart_write(u, UART_MCR, mcr);
	for (size_t got = 0; got < len;) {
		int polls = 0;

		while (!(uart_read(u, UART_LSR) & UART_LSR_DR) && ++polls < 100)
			;
		if (polls == 100) {
			test_fail(__FILE__, __LINE__, "FCR 0x%02x MCR 0x%02x: no data ready after %zu bytes", fcr, mcr, got);
			return;
		}
		out[got++] = (char)uart_read(u, UART_RBR);
	}
}

TEST(a_guest_that_polls_lsr_with_interrupts_off_reads_host_input_in_order)
{
	static const struct { uint8_t fcr, mcr; } setups[] = {
		{ 0x07, 0x0b },	/* FIFOs on, OUT2 set (runtime.c) */
		{ 0x00, 0x03 },	/* 16450 mode, OUT2 clear */
	};

	for (size_t i = 0; i < sizeof(setups) / sizeof(setups[0]); i++) {
		struct fake_host h;
		struct uart u;
		char got[40] = { 0 };
		const char *typed = "typed before the guest polled, and more";

		uart_setup(&u, &h);
		host_types(&u, &h, typed, strlen(typed));
		read_polled(&u, setups[i].fcr, setups[i].mcr, got, strlen(typed));
		CHECK_STR_CONTAINS(got, typed);
		CHECK_EQ_INT(uart_read(&u, UART_LSR) & UART_LSR_DR, 0);
		CHECK_EQ_INT(h.nirq, 0);	/* no interrupt enabled, none raised */
		host_types(&u, &h, "!", 1);	/* and input typed while it polls */
		uart_read(&u, UART_LSR);
		CHECK_EQ_INT(uart_read(&u, UART_RBR), '!');
		uart_exit(&u);
	}
}

TEST(an_offered_byte_is_taken_only_by_the_rbr_read_right_after_the_lsr_read)
{
	struct fake_host h;
	struct uart u;

	uart_setup(&u, &h);
	host_types(&u, &h, "ab", 2);
	uart_read(&u, UART_LSR);			/* the first read after reset offers nothing */
	CHECK(uart_read(&u, UART_LSR) & UART_LSR_DR);
	uart_read(&u, UART_IIR);
	CHECK_EQ_INT(uart_read(&u, UART_RBR), 0);	/* another access came between: the offer is gone */
	CHECK_EQ_INT(h.in_pos, 0);
	CHECK(uart_read(&u, UART_LSR) & UART_LSR_DR);
	uart_write(&u, UART_FCR, UART_FCR_ENABLE | UART_FCR_CLEAR_RX);
	CHECK_EQ_INT(uart_read(&u, UART_RBR), 0);	/* a FIFO clear neither delivers nor drops it */
	CHECK_EQ_INT(uart_read(&u, UART_LSR) & UART_LSR_DR, 0);	/* the first read after configuring */
	CHECK(uart_read(&u, UART_LSR) & UART_LSR_DR);
	CHECK_EQ_INT(uart_read(&u, UART_RBR), 'a');
	CHECK(uart_read(&u, UART_LSR) & UART_LSR_DR);
	CHECK_EQ_INT(uart_read(&u, UART_RBR), 'b');
	CHECK_EQ_INT(uart_read(&u, UART_LSR) & UART_LSR_DR, 0);
	uart_exit(&u);
}

TEST(a_snapshot_between_lsr_and_rbr_keeps_the_offered_byte)
{
	uint8_t saved[UART_STATE_MAX];
	struct fake_host h;
	struct uart u, v;
	size_t n;

	uart_setup(&u, &h);
	host_types(&u, &h, "xy", 2);
	uart_read(&u, UART_LSR);
	CHECK(uart_read(&u, UART_LSR) & UART_LSR_DR);
	n = uart_save(&u, saved);
	CHECK_EQ_INT(n, UART_STATE_FIXED);
	uart_exit(&u);
	uart_setup(&v, &h);		/* the restored VM's console queue holds the saved input, "xy" */
	host_types(&v, &h, "xy", 2);
	REQUIRE(uart_load(&v, saved, n) == NULL);
	CHECK_EQ_INT(uart_read(&v, UART_RBR), 'x');
	CHECK_EQ_INT(h.in_pos, 1);
	uart_exit(&v);
}

TEST(a_driver_taking_transmit_but_not_receive_interrupts_gets_no_host_input)
{
	struct fake_host h;
	struct uart u;

	uart_setup(&u, &h);
	uart_write(&u, UART_MCR, 0x0b);
	uart_write(&u, UART_IER, UART_IER_THRI);	/* receive off: throttled, or closing the port */
	host_types(&u, &h, "zz", 2);
	for (int i = 0; i < 4; i++) {
		CHECK_EQ_INT(uart_read(&u, UART_LSR) & UART_LSR_DR, 0);
		CHECK_EQ_INT(uart_read(&u, UART_RBR), 0);
	}
	CHECK_EQ_INT(h.in_pos, 0);
	uart_exit(&u);
}

TEST(clearing_the_receive_interrupt_throttles_input_but_keeps_the_fifo)
{
	struct fake_host h;
	struct uart u;
	uint8_t input[40];

	memset(input, 'a', sizeof(input));
	uart_setup(&u, &h);
	uart_write(&u, UART_FCR, UART_FCR_ENABLE);
	uart_write(&u, UART_MCR, UART_MCR_OUT2);
	uart_write(&u, UART_IER, UART_IER_RDI);
	host_types(&u, &h, input, sizeof(input));
	CHECK_EQ_INT(h.in_pos, UART_FIFO_SIZE);
	uart_write(&u, UART_IER, UART_IER_THRI);	/* still taking transmit interrupts */
	for (int i = 0; i < UART_FIFO_SIZE; i++)
		CHECK_EQ_INT(uart_read(&u, UART_RBR), 'a');
	CHECK_EQ_INT(uart_read(&u, UART_LSR) & UART_LSR_DR, 0);
	CHECK_EQ_INT(uart_read(&u, UART_LSR) & UART_LSR_DR, 0);
	CHECK_EQ_INT(h.in_pos, UART_FIFO_SIZE);
	uart_write(&u, UART_IER, UART_IER_RDI);
	CHECK(uart_read(&u, UART_LSR) & UART_LSR_DR);
	CHECK_EQ_INT(h.in_pos, 2 * UART_FIFO_SIZE);
	uart_exit(&u);
}

TEST(turning_the_fifo_on_keeps_the_byte_already_received)
{
	struct fake_host h;
	struct uart u;

	uart_setup(&u, &h);
	uart_write(&u, UART_MCR, UART_MCR_OUT2);
	uart_write(&u, UART_IER, UART_IER_RDI | UART_IER_RLSI);	/* 16450 mode: one byte moves in */
	host_types(&u, &h, "uname", 5);
	CHECK_EQ_INT(h.in_pos, 1);
	uart_write(&u, UART_FCR, UART_FCR_ENABLE);		/* what set_termios does next */
	for (int i = 0; i < 5; i++)
		CHECK_EQ_INT(uart_read(&u, UART_RBR), "uname"[i]);
	CHECK_EQ_INT(uart_read(&u, UART_LSR) & (UART_LSR_DR | UART_LSR_OE), 0);
	uart_exit(&u);
}

TEST(scratch_register_keeps_what_was_written)
{
	struct fake_host h;
	struct uart u;

	uart_setup(&u, &h);
	uart_write(&u, UART_SCR, 0xa5);
	CHECK_EQ_INT(uart_read(&u, UART_SCR), 0xa5);
	uart_write(&u, UART_SCR, 0x5a);
	CHECK_EQ_INT(uart_read(&u, UART_SCR), 0x5a);
	uart_exit(&u);
}

TEST(irq_hook_is_called_only_when_the_level_changes)
{
	struct fake_host h;
	struct uart u;

	uart_setup(&u, &h);
	uart_write(&u, UART_IER, UART_IER_RDI | UART_IER_THRI);	/* THRE: up */
	host_types(&u, &h, "ab", 2);				/* RX too: still up */
	uart_read(&u, UART_IIR);
	uart_read(&u, UART_LSR);
	uart_read(&u, UART_RBR);
	uart_read(&u, UART_RBR);				/* THRE still pending: still up */
	uart_read(&u, UART_IIR);				/* acknowledges THRE: down */
	uart_read(&u, UART_IIR);
	uart_write(&u, UART_THR, 'x');				/* up */
	CHECK_EQ_INT(h.nirq, 3);
	CHECK(h.nirq == 3 && h.irq_log[0] == 1 && h.irq_log[1] == 0 && h.irq_log[2] == 1);
	uart_exit(&u);
}

TEST(describe_names_the_registers_and_the_pending_interrupt)
{
	struct fake_host h;
	struct uart u;
	char line[256];

	uart_setup(&u, &h);
	uart_write(&u, UART_MCR, UART_MCR_OUT2);
	uart_write(&u, UART_IER, UART_IER_RDI);
	host_types(&u, &h, "q", 1);
	uart_describe(&u, line, sizeof(line));
	CHECK_STR_CONTAINS(line, "IER=01 IIR=04 LCR=00 MCR=08 FCR=00 LSR-errors=00 rx_len=1 thri_pending=0 irq_level=1");
	CHECK(strlen(line) == strlen("IER=01 IIR=04 LCR=00 MCR=08 FCR=00 LSR-errors=00 rx_len=1 thri_pending=0 irq_level=1"));
	uart_exit(&u);
}
