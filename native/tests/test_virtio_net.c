/*
 * virtio-net (vmm/virtio_net.c) driven through its registers and two queues in guest memory as Linux's
 * virtio_net does, over the real libslirp backend (vmm/net_slirp.c): the guest's ARP request for the gateway goes
 * out of the transmit queue and libslirp's answer comes back in a receive buffer with its header. Every packet
 * stays in this process.
 */
#include "test.h"

#include "error.h"
#include "le_codec.h"
#include "net_frames.h"
#include "net_policy.h"
#include "net_slirp.h"
#include "virtio_driver.h"
#include "virtio_net.h"

#include <errno.h>
#include <poll.h>
#include <time.h>
#include <stdlib.h>
#include <unistd.h>

#define RAM (16ULL << 20)
#define QNUM 8
#define BUF_LEN 2048

#define Q_DESC(q) (0x100000ULL + 0x10000ULL * (q))
#define Q_AVAIL(q) (Q_DESC(q) + 0x1000)
#define Q_USED(q) (Q_DESC(q) + 0x2000)
#define Q_BUF(q, i) (0x200000ULL + 0x100000ULL * (q) + 0x1000ULL * (i))

struct rig {
	struct guest_mem mem;
	struct virtio_net vn;
	struct virtio_mmio t;
	struct drv d;
	uint16_t avail[2];
	struct net_policy policy;
	struct net_slirp *ns;
	struct virtio_net_backend backend;
	int rx_ready;
};

static void count_rx_ready(void *opaque)
{
	__atomic_add_fetch(&((struct rig *)opaque)->rx_ready, 1, __ATOMIC_SEQ_CST);
}

static struct rig *rig_new(int with_backend)
{
	struct rig *r = calloc(1, sizeof(*r));
	struct vm_error err = { 0 };

	if (!r || guest_mem_init(&r->mem, RAM, &err) < 0)
		return NULL;
	virtio_net_random_mac(r->vn.mac);
	net_policy_init(&r->policy);
	if (with_backend) {
		struct net_slirp_config cfg = { .policy = &r->policy, .rx_ready = count_rx_ready, .rx_opaque = r };

		if (net_slirp_start(&r->ns, &cfg, &err) < 0) {
			test_fail(__FILE__, __LINE__, "net_slirp_start: %s", err.msg);
			return NULL;
		}
		r->backend = (struct virtio_net_backend){ net_slirp_backend_send, net_slirp_backend_recv, r->ns };
		r->vn.backend = &r->backend;
	}
	virtio_mmio_init(&r->t, &virtio_net_ops, &r->vn, &r->mem);
	r->d.t = &r->t;
	r->d.mem = &r->mem;
	r->t.raise_irq = drv_irq;
	r->t.irq_opaque = &r->d;
	return r;
}

static void rig_free(struct rig *r)
{
	virtio_mmio_exit(&r->t);
	net_slirp_stop(r->ns);
	guest_mem_exit(&r->mem);
	free(r);
}

static void queue_setup(struct rig *r, uint32_t q)
{
	drv_w32(&r->d, VIRTIO_MMIO_QUEUE_SEL, q);
	drv_w32(&r->d, VIRTIO_MMIO_QUEUE_NUM, QNUM);
	drv_w32(&r->d, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)Q_DESC(q));
	drv_w32(&r->d, VIRTIO_MMIO_QUEUE_DRIVER_LOW, (uint32_t)Q_AVAIL(q));
	drv_w32(&r->d, VIRTIO_MMIO_QUEUE_DEVICE_LOW, (uint32_t)Q_USED(q));
	drv_w32(&r->d, VIRTIO_MMIO_QUEUE_READY, 1);
}

/* As Linux's driver: VERSION_1, MAC and STATUS, both queues, DRIVER_OK. */
static void driver_up(struct rig *r)
{
	const uint32_t base = VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER;

	drv_w32(&r->d, VIRTIO_MMIO_STATUS, 0);
	drv_w32(&r->d, VIRTIO_MMIO_STATUS, base);
	drv_w32(&r->d, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	drv_w32(&r->d, VIRTIO_MMIO_DRIVER_FEATURES, 1u << VIRTIO_NET_F_MAC | 1u << VIRTIO_NET_F_STATUS);
	drv_w32(&r->d, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	drv_w32(&r->d, VIRTIO_MMIO_DRIVER_FEATURES, 1);
	drv_w32(&r->d, VIRTIO_MMIO_STATUS, base | VIRTIO_STATUS_FEATURES_OK);
	queue_setup(r, VIRTIO_NET_RX);
	queue_setup(r, VIRTIO_NET_TX);
	drv_w32(&r->d, VIRTIO_MMIO_STATUS, base | VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_DRIVER_OK);
}

static void offer(struct rig *r, uint32_t q, uint16_t i, uint32_t len, int writable)
{
	uint64_t addr = Q_BUF(q, i);
	uint16_t flags = writable ? VIRTQ_DESC_F_WRITE : 0, zero = 0;
	uint8_t *desc = guest_mem_ptr(&r->mem, Q_DESC(q) + 16ULL * i, 16);
	uint8_t *avail = guest_mem_ptr(&r->mem, Q_AVAIL(q), 4 + 2 * QNUM);

	memcpy(desc, &addr, 8);
	memcpy(desc + 8, &len, 4);
	memcpy(desc + 12, &flags, 2);
	memcpy(desc + 14, &zero, 2);
	memcpy(avail + 4 + 2 * (r->avail[q] % QNUM), &i, 2);
	r->avail[q]++;
	memcpy(avail + 2, &r->avail[q], 2);
}

static uint16_t used_idx(struct rig *r, uint32_t q)
{
	uint16_t v;

	memcpy(&v, (uint8_t *)guest_mem_ptr(&r->mem, Q_USED(q), 4) + 2, 2);
	return v;
}

static void used(struct rig *r, uint32_t q, uint16_t n, uint32_t *id, uint32_t *len)
{
	uint8_t *e = guest_mem_ptr(&r->mem, Q_USED(q) + 4 + 8ULL * (n % QNUM), 8);

	memcpy(id, e, 4);
	memcpy(len, e + 4, 4);
}

/* The guest's ARP request for the gateway, behind a zero virtio_net_hdr, in transmit slot i. */
static uint32_t put_arp(struct rig *r, uint16_t i)
{
	uint8_t *b = guest_mem_ptr(&r->mem, Q_BUF(VIRTIO_NET_TX, i), BUF_LEN), *a = b + VIRTIO_NET_HDR_LEN + 14;

	memset(b, 0, VIRTIO_NET_HDR_LEN + 42);
	memset(b + VIRTIO_NET_HDR_LEN, 0xff, 6);
	memcpy(b + VIRTIO_NET_HDR_LEN + 6, r->vn.mac, 6);
	nf_put16(b + VIRTIO_NET_HDR_LEN + 12, 0x0806);
	nf_put16(a, 1);
	nf_put16(a + 2, 0x0800);
	a[4] = 6, a[5] = 4;
	nf_put16(a + 6, 1);
	memcpy(a + 8, r->vn.mac, 6);
	a[14] = 10, a[16] = 2, a[17] = 15;	/* 10.0.2.15 asks for 10.0.2.2 */
	a[24] = 10, a[26] = 2, a[27] = 2;
	return VIRTIO_NET_HDR_LEN + 42;
}

TEST(virtio_net_offers_mac_and_link_status_and_no_checksum_offloads)
{
	struct rig *r = rig_new(0);
	uint8_t mac[6];

	REQUIRE(r);
	CHECK_EQ_INT(drv_r32(&r->d, VIRTIO_MMIO_DEVICE_ID), VIRTIO_ID_NET);
	drv_w32(&r->d, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	uint32_t f = drv_r32(&r->d, VIRTIO_MMIO_DEVICE_FEATURES);

	CHECK(f & (1u << VIRTIO_NET_F_MAC));
	CHECK(f & (1u << VIRTIO_NET_F_STATUS));
	CHECK_EQ_INT(f & 3, 0);	/* neither CSUM nor GUEST_CSUM */
	for (int i = 0; i < 6; i++)
		virtio_mmio_access(&r->t, VIRTIO_MMIO_CONFIG + i, &mac[i], 1, 0);
	CHECK_EQ_INT(memcmp(mac, r->vn.mac, 6), 0);
	uint8_t status[2];

	virtio_mmio_access(&r->t, VIRTIO_MMIO_CONFIG + 6, status, 2, 0);
	CHECK_EQ_INT(status[0], VIRTIO_NET_S_LINK_UP);
	rig_free(r);
}

TEST(an_arp_request_goes_out_and_its_answer_comes_back_in_a_receive_buffer)
{
	struct rig *r = rig_new(1);
	uint32_t id, len;

	REQUIRE(r);
	driver_up(r);
	CHECK_EQ_INT(drv_r32(&r->d, VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_NEEDS_RESET, 0);
	for (uint16_t i = 0; i < 4; i++)
		offer(r, VIRTIO_NET_RX, i, BUF_LEN, 1);
	drv_w32(&r->d, VIRTIO_MMIO_QUEUE_NOTIFY, VIRTIO_NET_RX);
	CHECK_EQ_INT(used_idx(r, VIRTIO_NET_RX), 0);	/* nothing to receive yet: the buffers wait */

	offer(r, VIRTIO_NET_TX, 0, put_arp(r, 0), 0);
	drv_w32(&r->d, VIRTIO_MMIO_QUEUE_NOTIFY, VIRTIO_NET_TX);
	CHECK_EQ_INT(used_idx(r, VIRTIO_NET_TX), 1);
	CHECK_EQ_INT(r->vn.tx_frames, 1);

	/* The backend says a frame waits (the VM's wiring kicks the device's thread there); serve the queue. */
	struct pollfd p = { .fd = net_slirp_rx_fd(r->ns), .events = POLLIN };

	CHECK_EQ_INT(poll(&p, 1, 5000), 1);
	/* The slirp thread kicks the fd, then calls rx_ready: under load this thread can wake between the two. */
	for (int i = 0; i < 1000 && __atomic_load_n(&r->rx_ready, __ATOMIC_SEQ_CST) < 1; i++)
		nanosleep(&(struct timespec){ .tv_nsec = 5000000 }, NULL);
	CHECK(__atomic_load_n(&r->rx_ready, __ATOMIC_SEQ_CST) >= 1);
	int irqs = r->d.irqs;

	drv_w32(&r->d, VIRTIO_MMIO_QUEUE_NOTIFY, VIRTIO_NET_RX);
	REQUIRE(used_idx(r, VIRTIO_NET_RX) == 1);
	CHECK(r->d.irqs > irqs);
	used(r, VIRTIO_NET_RX, 0, &id, &len);
	CHECK_EQ_INT(id, 0);
	REQUIRE(len >= VIRTIO_NET_HDR_LEN + 42);
	const uint8_t *b = guest_mem_ptr(&r->mem, Q_BUF(VIRTIO_NET_RX, 0), len), *f = b + VIRTIO_NET_HDR_LEN;

	CHECK_EQ_INT(b[10], 1);	/* num_buffers */
	CHECK_EQ_INT(b[0], 0);	/* no flags: full checksums */
	CHECK_EQ_INT(memcmp(f, r->vn.mac, 6), 0);
	CHECK_EQ_INT(nf_get16(f + 12), 0x0806);
	CHECK_EQ_INT(nf_get16(f + 14 + 6), 2);	/* a reply */
	CHECK_EQ_INT(f[14 + 17], 2);		/* from 10.0.2.2 */
	CHECK_EQ_INT(r->vn.rx_frames, 1);
	rig_free(r);
}

TEST(virtio_net_drops_frames_without_a_header_or_past_the_mtu)
{
	struct rig *r = rig_new(1);

	REQUIRE(r);
	driver_up(r);
	offer(r, VIRTIO_NET_TX, 0, 8, 0);			/* shorter than the header */
	offer(r, VIRTIO_NET_TX, 1, VIRTIO_NET_HDR_LEN + 1515, 0);	/* one byte past the MTU */
	drv_w32(&r->d, VIRTIO_MMIO_QUEUE_NOTIFY, VIRTIO_NET_TX);
	CHECK_EQ_INT(used_idx(r, VIRTIO_NET_TX), 2);
	CHECK_EQ_INT(r->vn.bad_frames, 2);
	CHECK_EQ_INT(r->vn.tx_frames, 0);
	CHECK_EQ_INT(drv_r32(&r->d, VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_NEEDS_RESET, 0);
	rig_free(r);
}

TEST(virtio_net_state_round_trips_and_refuses_a_multicast_mac)
{
	struct virtio_net_state s = { .dev = { .slot = 4, .gsi = 9, .base = 0xd0004000 } }, back;
	uint8_t buf[VIRTIO_NET_STATE_LEN + 4];
	struct le_writer w;

	s.dev.transport.nr_queues = 2;
	virtio_net_random_mac(s.mac);
	le_writer_init(&w, buf, sizeof(buf));
	virtio_net_state_encode(&s, &w);
	CHECK_EQ_INT(w.len, VIRTIO_NET_STATE_LEN);
	const char *why = virtio_net_state_decode(buf, w.len, &back);

	CHECK(why == NULL);
	CHECK_EQ_INT(memcmp(back.mac, s.mac, 6), 0);
	CHECK_EQ_INT(back.dev.base, s.dev.base);
	CHECK(virtio_net_state_decode(buf, w.len - 1, &back) != NULL);
	buf[VIRTIO_DEV_STATE_LEN] |= 1;
	CHECK_STR_CONTAINS(virtio_net_state_decode(buf, w.len, &back), "multicast");
}

TEST(each_fork_gets_its_own_mac)
{
	uint8_t a[6], b[6];

	virtio_net_random_mac(a);
	virtio_net_random_mac(b);
	CHECK(memcmp(a, b, 6) != 0);
	CHECK_EQ_INT(a[0] & 3, 2);	/* locally administered, unicast */
}
