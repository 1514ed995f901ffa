/*
 * A tiny guest with a polled virtio-net driver (docs/network.md, "In a VM"): it asks for the gateway's MAC (ARP),
 * then opens TCP connections to host.smol.internal (10.0.2.2) on the ports its command line names, and says on
 * COM1 what came back:
 *
 *	ports=8080,9090   the gateway ports to send a SYN to, in turn (each from its own source port)
 *
 * prints `net: mac ok`, `net: arp ok`, then for each port `net: synack PORT` or `net: rst PORT` as the answers
 * arrive (nothing for a SYN the policy dropped), re-sending each unanswered SYN now and then, and runs until killed.
 * Everything it sends is addressed to the gateway, which the VM's stack maps to the host's loopback.
 */
#include "guest.h"

#define VIRTIO_BASE 0xc0001000ul
#define VIRTIO_SLOTS 8
#define VQ_SIZE 8
#define BUF 2048
#define HDR 12		/* virtio_net_hdr, VERSION_1 */
#define MAX_PORTS 8

struct vq {
	struct { uint64_t addr; uint32_t len; uint16_t flags, next; } desc[VQ_SIZE];
	struct { uint16_t flags, idx, ring[VQ_SIZE], event; } avail __attribute__((aligned(64)));
	struct { uint16_t flags; volatile uint16_t idx; struct { uint32_t id, len; } ring[VQ_SIZE]; uint16_t event; }
		used __attribute__((aligned(64)));
};

static struct vq rxq __attribute__((aligned(4096))), txq __attribute__((aligned(4096)));
static uint8_t rxbuf[VQ_SIZE][BUF] __attribute__((aligned(4096)));
static uint8_t txbuf[VQ_SIZE][BUF] __attribute__((aligned(4096)));
static volatile uint32_t *vmmio;
static uint16_t tx_next, rx_seen;
static uint8_t mac[6], gw_mac[6];

static const uint8_t guest_ip[4] = { 10, 0, 2, 15 }, gw_ip[4] = { 10, 0, 2, 2 };

static inline void vw(unsigned off, uint32_t v) { vmmio[off / 4] = v; }

static void queue(unsigned q, struct vq *vq)
{
	vw(0x30, q);
	vw(0x38, VQ_SIZE);
	vw(0x80, (uint32_t)(uint64_t)&vq->desc);
	vw(0x84, 0);
	vw(0x90, (uint32_t)(uint64_t)&vq->avail);
	vw(0x94, 0);
	vw(0xa0, (uint32_t)(uint64_t)&vq->used);
	vw(0xa4, 0);
	vw(0x44, 1);
}

/* Finds the virtio-net, sets it up as a driver does and offers every receive buffer; 0 when there is none. */
static int net_init(void)
{
	for (unsigned slot = 0; slot < VIRTIO_SLOTS && !vmmio; slot++) {
		volatile uint32_t *p = (volatile uint32_t *)(VIRTIO_BASE + 0x1000ul * slot);

		if (p[0] == 0x74726976 && p[2] == 1)	/* "virt", device ID 1 */
			vmmio = p;
	}
	if (!vmmio)
		return 0;
	vw(0x70, 0);
	vw(0x70, 1 | 2);
	vw(0x24, 0);
	vw(0x20, 1u << 5 | 1u << 16);	/* MAC, STATUS */
	vw(0x24, 1);
	vw(0x20, 1);			/* VERSION_1 */
	vw(0x70, 1 | 2 | 8);
	for (int i = 0; i < 6; i++)
		mac[i] = ((volatile uint8_t *)vmmio)[0x100 + i];
	queue(0, &rxq);
	queue(1, &txq);
	for (uint16_t i = 0; i < VQ_SIZE; i++) {
		rxq.desc[i] = (typeof(rxq.desc[0])){ (uint64_t)rxbuf[i], BUF, 2 /* WRITE */, 0 };
		rxq.avail.ring[i] = i;
	}
	__asm__ volatile("" ::: "memory");
	rxq.avail.idx = VQ_SIZE;
	vw(0x70, 1 | 2 | 8 | 4);
	vw(0x50, 0);
	return (vmmio[0x70 / 4] & 0x4c) == 0x0c;
}

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

static void copy(uint8_t *d, const uint8_t *s, unsigned n)
{
	while (n--)
		*d++ = *s++;
}

static uint32_t sum(uint32_t s, const uint8_t *p, unsigned n)
{
	for (unsigned i = 0; i + 1 < n; i += 2)
		s += get16(p + i);
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	return s;
}

static uint16_t fold(uint32_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* Sends the frame in the next transmit buffer (`len` bytes after the header). */
static void send(unsigned len)
{
	unsigned i = tx_next % VQ_SIZE;

	while ((uint16_t)(tx_next - txq.used.idx) >= VQ_SIZE)
		__asm__ volatile("pause" ::: "memory");
	txq.desc[i] = (typeof(txq.desc[0])){ (uint64_t)txbuf[i], HDR + len, 0, 0 };
	txq.avail.ring[i] = (uint16_t)i;
	__asm__ volatile("" ::: "memory");
	txq.avail.idx = ++tx_next;
	__asm__ volatile("" ::: "memory");
	vw(0x50, 1);
}

static uint8_t *frame_out(const uint8_t *dst, uint16_t type)
{
	uint8_t *f = txbuf[tx_next % VQ_SIZE];

	for (int i = 0; i < HDR; i++)
		f[i] = 0;
	f += HDR;
	copy(f, dst, 6);
	copy(f + 6, mac, 6);
	put16(f + 12, type);
	return f;
}

static void send_arp(void)
{
	static const uint8_t bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	uint8_t *a = frame_out(bcast, 0x0806) + 14;

	put16(a, 1);
	put16(a + 2, 0x0800);
	a[4] = 6, a[5] = 4;
	put16(a + 6, 1);
	copy(a + 8, mac, 6);
	copy(a + 14, guest_ip, 4);
	for (int i = 18; i < 24; i++)
		a[i] = 0;
	copy(a + 24, gw_ip, 4);
	send(42);
}

static void send_syn(uint16_t sport, uint16_t dport)
{
	uint8_t *ip = frame_out(gw_mac, 0x0800) + 14, *t = ip + 20;

	for (int i = 0; i < 40; i++)
		ip[i] = 0;
	ip[0] = 0x45;
	put16(ip + 2, 40);
	ip[8] = 64;
	ip[9] = 6;
	copy(ip + 12, guest_ip, 4);
	copy(ip + 16, gw_ip, 4);
	put16(ip + 10, fold(sum(0, ip, 20)));
	put16(t, sport);
	put16(t + 2, dport);
	t[7] = 1;		/* sequence number 1 */
	t[12] = 5 << 4;
	t[13] = 0x02;		/* SYN */
	put16(t + 14, 65535);
	put16(t + 16, fold(sum(sum(6 + 20, ip + 12, 8), t, 20)));
	send(54);
}

static void print_port(const char *what, uint16_t port)
{
	uart_puts("net: ");
	uart_puts(what);
	uart_putc(' ');
	uart_putu(port);
	uart_puts("\r\n");
}

static uint16_t ports[MAX_PORTS];
static uint8_t answered[MAX_PORTS];
static unsigned n_ports;
static int have_arp;

/* Takes what the device put in the receive buffers, and offers them again. */
static void receive(void)
{
	while (rx_seen != rxq.used.idx) {
		unsigned id = rxq.used.ring[rx_seen % VQ_SIZE].id % VQ_SIZE, len = rxq.used.ring[rx_seen % VQ_SIZE].len;
		const uint8_t *f = rxbuf[id] + HDR;

		if (len >= HDR + 42 && get16(f + 12) == 0x0806 && get16(f + 20) == 2 && !have_arp) {
			copy(gw_mac, f + 22, 6);
			have_arp = 1;
			uart_puts("net: arp ok\r\n");
		} else if (len >= HDR + 54 && get16(f + 12) == 0x0800 && f[14 + 9] == 6) {
			const uint8_t *t = f + 14 + (f[14] & 0xf) * 4;

			for (unsigned p = 0; p < n_ports; p++) {
				if (answered[p] || get16(t) != ports[p] || get16(t + 2) != 40000 + p)
					continue;
				if ((t[13] & 0x12) == 0x12)
					print_port("synack", ports[p]), answered[p] = 1;
				else if (t[13] & 0x04)
					print_port("rst", ports[p]), answered[p] = 1;
			}
		}
		rx_seen++;
		rxq.avail.ring[rxq.avail.idx % VQ_SIZE] = (uint16_t)id;
		__asm__ volatile("" ::: "memory");
		rxq.avail.idx++;
		vw(0x50, 0);
	}
}

int main(const uint8_t *bp)
{
	const char *cmdline = boot_cmdline(bp), *p = cmdline;

	uart_init();
	while (*p && !(p[0] == 'p' && p[1] == 'o' && p[2] == 'r' && p[3] == 't' && p[4] == 's' && p[5] == '='))
		p++;
	if (*p)
		p += 6;
	while (*p >= '0' && *p <= '9' && n_ports < MAX_PORTS) {
		uint32_t v = 0;

		while (*p >= '0' && *p <= '9')
			v = v * 10 + (uint32_t)(*p++ - '0');
		ports[n_ports++] = (uint16_t)v;
		if (*p == ',')
			p++;
	}
	if (!net_init()) {
		uart_puts("net: the VM has no virtio-net\r\n");
		debug_exit(1);
	}
	uart_puts("net: mac ok\r\n");
	for (uint64_t round = 0;; round++) {
		if (round % 200000 == 0) {
			if (!have_arp)
				send_arp();
			else
				for (unsigned i = 0; i < n_ports; i++)
					if (!answered[i])
						send_syn((uint16_t)(40000 + i), ports[i]);
		}
		receive();
		__asm__ volatile("pause" ::: "memory");
	}
}
