/*
 * Floods COM1 with numbered lines that a reader can check, for `smol bench ui`'s console throughput. It prints
 * "flood: ready" and waits (in HLT, woken by the UART's receive interrupt) until a byte is typed, so the viewer is
 * attached before the first line. Then it prints `lines=N` lines (default 100,000), each `width=W` bytes (16 to 250,
 * default 64) ending in CR LF: the line number in 10 digits, a space, and letters that depend on the number
 * (line_fill() says which). Then "flood: done N" and it idles, so the console stays open. With `lines=0` it prints
 * without end and answers each byte typed, between blocks, with "flood: echo C at N" on COM1 (N: the last line
 * sent); with `console=hvc0` the typed bytes come through the virtio-console's receive queue, polled the same way.
 *
 * By default a whole block of lines goes out in one `rep outsb`: KVM hands the VMM up to a page of bytes per exit,
 * so the guest side costs little and the host's console path is what is measured. With `bytewise` on the command
 * line it writes like a polled driver instead (wait for THRE, one OUTB per byte: two exits a byte). With
 * `console=hvc0` (the word that gives a VM its virtio-console in the engine) the lines go out through the
 * virtio-console as Linux's hvc0 sends them: whole buffers on its transmit queue, 16 KiB each with up to eight in
 * flight, one notification each.
 *
 * Making the lines must cost the guest little, so that the console path is what is measured: a block holds a
 * multiple of 26 lines, so every block has the same letters in the same places, and after a block's first use only
 * the line numbers are written again (a decimal counter copied in).
 */
#include "guest.h"

#define COM1_IRQ 4
#define BLOCK 4096u

static char block[BLOCK];
static volatile int typed;

/* ---- a polled virtio-console driver: the transmit queue, and one receive buffer polled between blocks ---- */

#define VIRTIO_BASE 0xc0001000ul
#define VIRTIO_SLOTS 8
#define VQ_SIZE 8
#define VBLOCK 16384u

struct vq {
	struct { uint64_t addr; uint32_t len; uint16_t flags, next; } desc[VQ_SIZE];
	struct { uint16_t flags, idx, ring[VQ_SIZE], event; } avail __attribute__((aligned(64)));
	struct { uint16_t flags; volatile uint16_t idx; struct { uint32_t id, len; } ring[VQ_SIZE]; uint16_t event; }
		used __attribute__((aligned(64)));
};

static struct vq txq __attribute__((aligned(4096)));
static struct vq rxq __attribute__((aligned(4096)));	/* one buffer for typed bytes (answered on COM1) */
static char rxbuf[64];
static uint16_t rx_seen;

static char vblock[VQ_SIZE][VBLOCK] __attribute__((aligned(4096)));
static uint8_t vblock_made[VQ_SIZE];
static volatile uint32_t *vmmio;
static uint16_t tx_next;

static inline void vw(unsigned off, uint32_t v) { vmmio[off / 4] = v; }

/* Finds the virtio-console and sets it up as a driver does; 0 when the VM has none or it refused. */
static int vcon_init(void)
{
	for (unsigned slot = 0; slot < VIRTIO_SLOTS && !vmmio; slot++) {
		volatile uint32_t *p = (volatile uint32_t *)(VIRTIO_BASE + 0x1000ul * slot);

		if (p[0] == 0x74726976 && p[2] == 3)	/* "virt", device ID 3 */
			vmmio = p;
	}
	if (!vmmio)
		return 0;
	vw(0x70, 0);			/* status: reset */
	vw(0x70, 1 | 2);		/* ACKNOWLEDGE, DRIVER */
	vw(0x24, 1);			/* driver features, bits 32..63: */
	vw(0x20, 1);			/* VERSION_1 */
	vw(0x70, 1 | 2 | 8);		/* FEATURES_OK */
	vw(0x30, 1);			/* the transmit queue */
	vw(0x38, VQ_SIZE);
	vw(0x80, (uint32_t)(uint64_t)&txq.desc);
	vw(0x84, 0);
	vw(0x90, (uint32_t)(uint64_t)&txq.avail);
	vw(0x94, 0);
	vw(0xa0, (uint32_t)(uint64_t)&txq.used);
	vw(0xa4, 0);
	vw(0x44, 1);			/* ready */
	vw(0x30, 0);			/* the receive queue: typed bytes come here once DRIVER_OK is set */
	vw(0x38, VQ_SIZE);
	vw(0x80, (uint32_t)(uint64_t)&rxq.desc);
	vw(0x84, 0);
	vw(0x90, (uint32_t)(uint64_t)&rxq.avail);
	vw(0x94, 0);
	vw(0xa0, (uint32_t)(uint64_t)&rxq.used);
	vw(0xa4, 0);
	vw(0x44, 1);
	rxq.desc[0].addr = (uint64_t)rxbuf;
	rxq.desc[0].len = sizeof(rxbuf);
	rxq.desc[0].flags = 2;		/* VIRTQ_DESC_F_WRITE */
	rxq.avail.ring[0] = 0;
	rxq.avail.idx = 1;
	vw(0x70, 1 | 2 | 8 | 4);	/* DRIVER_OK */
	vw(0x50, 0);			/* notify the receive queue */
	return (vmmio[0x70 / 4] & 0x4c) == 0x0c;	/* FEATURES_OK and DRIVER_OK held, no NEEDS_RESET */
}

/* The next buffer: the device returns them in order, so it is free once fewer than VQ_SIZE are out. */
static int vcon_buffer(void)
{
	while ((uint16_t)(tx_next - txq.used.idx) >= VQ_SIZE)
		__asm__ volatile("pause" ::: "memory");
	return tx_next % VQ_SIZE;
}

static void vcon_send(int i, uint32_t len)
{
	txq.desc[i].addr = (uint64_t)vblock[i];
	txq.desc[i].len = len;
	txq.desc[i].flags = 0;
	txq.avail.ring[i] = (uint16_t)i;
	__asm__ volatile("" ::: "memory");
	txq.avail.idx = ++tx_next;
	__asm__ volatile("" ::: "memory");
	vw(0x50, 1);			/* notify the transmit queue */
}

/* Answers a byte typed during an endless flood, on COM1. */
static void echo_typed(int c, uint64_t n)
{
	char echo[2] = { (char)c, 0 };

	uart_puts("\r\nflood: echo ");
	uart_puts(echo);
	uart_puts(" at ");
	uart_putu(n);
	uart_puts("\r\n");
}

/* Answers the bytes typed into the virtio-console since the last look, on COM1, and gives the buffer back. */
static void vcon_typed(uint64_t n)
{
	while (rxq.used.idx != rx_seen) {
		uint32_t len = rxq.used.ring[rx_seen % VQ_SIZE].len;

		__asm__ volatile("" ::: "memory");
		for (uint32_t j = 0; j < len && j < sizeof(rxbuf); j++)
			echo_typed(rxbuf[j], n);
		rx_seen++;
		rxq.avail.ring[rxq.avail.idx % VQ_SIZE] = 0;
		__asm__ volatile("" ::: "memory");
		rxq.avail.idx++;
		__asm__ volatile("" ::: "memory");
		vw(0x50, 0);
	}
}

/* Until the device has taken every buffer, so that what the UART says next comes after them. */
static void vcon_flush(void)
{
	while (txq.used.idx != tx_next)
		__asm__ volatile("pause" ::: "memory");
}

IRQ_ENTRY(irq4_entry, irq4_handler);

void irq4_handler(void)
{
	(void)inb(COM1 + 2);	/* IIR: acknowledge */
	while (uart_getc_poll() >= 0)
		typed = 1;
	pic_eoi();
}

/* The letter at column `i` of line `n`'s filler: readers compute the same. */
static char line_fill(uint64_t n, uint64_t i)
{
	return (char)('a' + (n + i) % 26);
}

/* Writes line `n`, `width` bytes, into `out`. */
static void line_make(char *out, uint64_t n, uint64_t width)
{
	uint64_t v = n;

	for (int d = 9; d >= 0; d--, v /= 10)
		out[d] = (char)('0' + v % 10);
	out[10] = ' ';
	for (uint64_t i = 11; i < width - 2; i++)
		out[i] = line_fill(n, i);
	out[width - 2] = '\r';
	out[width - 1] = '\n';
}

static void outsb_block(const char *data, uint64_t len)
{
	__asm__ volatile("cld; rep outsb" : "+S"(data), "+c"(len) : "d"((uint16_t)COM1) : "memory");
}

int main(const uint8_t *bp)
{
	const char *cmdline = boot_cmdline(bp);
	uint64_t lines = cmdline_number(cmdline, "lines", 100000), width = cmdline_number(cmdline, "width", 64);
	int bytewise = cmdline_has(cmdline, "bytewise"), virtio = cmdline_has(cmdline, "console=hvc0");

	if (width < 16)
		width = 16;
	if (width > 250)
		width = 250;
	uart_init();
	idt_set(IRQ_BASE + COM1_IRQ, irq4_entry);
	idt_load();
	pic_init(1u << COM1_IRQ);
	outb(COM1 + 1, 0x01);	/* receive-data interrupt */
	uart_puts("flood: ready, type a key to start\r\n");
	while (!typed)
		__asm__ volatile("sti; hlt; cli");
	outb(COM1 + 1, 0x00);

	if (virtio && !vcon_init()) {
		uart_puts("flood: the VM has no virtio-console\r\n");
		debug_exit(1);
	}

	char number[10];
	uint64_t per_block = (virtio ? VBLOCK : BLOCK) / width / 26 * 26;
	uint8_t block_made = 0;

	for (int d = 0; d < 10; d++)
		number[d] = '0';
	for (uint64_t n = 1; !lines || n <= lines;) {
		int i = virtio ? vcon_buffer() : 0;
		char *out = virtio ? vblock[i] : block;
		uint8_t *made = virtio ? &vblock_made[i] : &block_made;
		uint64_t used = 0;

		for (uint64_t k = 0; k < per_block && (!lines || n <= lines); k++, n++, used += width) {
			for (int d = 9; ++number[d] > '9'; d--)	/* number = n, in decimal */
				number[d] = '0';
			if (*made)
				__builtin_memcpy(out + used, number, 10);
			else
				line_make(out + used, n, width);
		}
		*made = used == per_block * width;	/* a full block: its letters are right for every later one */
		if (virtio)
			vcon_send(i, (uint32_t)used);
		else if (bytewise)
			for (uint64_t j = 0; j < used; j++)
				uart_putc(block[j]);
		else
			outsb_block(block, used);
		for (int c; !lines && !virtio && (c = uart_getc_poll()) >= 0;)
			echo_typed(c, n - 1);
		if (!lines && virtio)
			vcon_typed(n - 1);
	}
	if (virtio)
		vcon_flush();
	uart_puts("flood: done ");
	uart_putu(lines);
	uart_puts("\r\n");
	for (;;)
		__asm__ volatile("cli; hlt");
}
