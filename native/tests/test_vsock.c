/*
 * virtio-vsock and its Unix-socket multiplexer: the device code and its thread run for real, a test driver plays the
 * guest through the MMIO registers and three queues in guest memory, and the host side is real Unix sockets.
 */
#include "test.h"
#include "error.h"
#include "guest_mem.h"
#include "virtio.h"
#include "virtio_vsock.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define RAM (16ULL << 20)
#define CID 7
#define QSIZE 64
#define RX_BUF_LEN (VSOCK_HDR_LEN + 4096)
#define WAIT_MS 3000

/* Queue q's rings at 0x10000 * (q + 1); rx buffers at 0x100000, event buffers at 0x200000, tx at 0x300000. */
struct vq {
	uint64_t desc, avail, used;
	uint16_t avail_idx, used_seen, next_desc;
};

struct rig {
	struct guest_mem mem;
	struct virtio_mmio t;
	struct virtio_vsock vs;
	struct vq q[VSOCK_QUEUES];
	char path[TEST_PATH_MAX];
	uint64_t tx_next;
};

static void w32(struct rig *r, uint64_t off, uint32_t v)
{
	virtio_mmio_access(&r->t, off, (uint8_t *)&v, 4, 1);
}

static uint32_t r32(struct rig *r, uint64_t off)
{
	uint32_t v;

	virtio_mmio_access(&r->t, off, (uint8_t *)&v, 4, 0);
	return v;
}

static void *gp(struct rig *r, uint64_t gpa, uint64_t len)
{
	return guest_mem_ptr(&r->mem, gpa, len);
}

/* Puts a one- or two-descriptor chain on queue qi and notifies it. */
static void offer(struct rig *r, int qi, uint64_t a1, uint32_t l1, uint16_t f1, uint64_t a2, uint32_t l2,
		  uint16_t f2)
{
	struct vq *q = &r->q[qi];
	uint16_t head = q->next_desc % QSIZE, second = (uint16_t)((head + 1) % QSIZE);
	uint8_t *d = gp(r, q->desc + 16ULL * head, 16), *avail = gp(r, q->avail, 4 + 2 * QSIZE);
	uint16_t flags = (uint16_t)(f1 | (l2 ? VIRTQ_DESC_F_NEXT : 0));

	memcpy(d, &a1, 8);
	memcpy(d + 8, &l1, 4);
	memcpy(d + 12, &flags, 2);
	memcpy(d + 14, &second, 2);
	q->next_desc++;
	if (l2) {
		d = gp(r, q->desc + 16ULL * second, 16);
		memcpy(d, &a2, 8);
		memcpy(d + 8, &l2, 4);
		memcpy(d + 12, &f2, 2);
		q->next_desc++;
	}
	memcpy(avail + 4 + 2 * (q->avail_idx % QSIZE), &head, 2);
	q->avail_idx++;
	__atomic_store_n((uint16_t *)(void *)(avail + 2), q->avail_idx, __ATOMIC_RELEASE);
	w32(r, VIRTIO_MMIO_QUEUE_NOTIFY, (uint32_t)qi);
}

static void post_rx(struct rig *r, int n, uint32_t len)
{
	for (int i = 0; i < n; i++) {
		uint64_t a = 0x100000 + (uint64_t)((r->q[0].avail_idx) % QSIZE) * 0x2000;

		offer(r, VSOCK_RX_QUEUE, a, len, VIRTQ_DESC_F_WRITE, 0, 0, 0);
	}
}

static void send_pkt(struct rig *r, uint32_t src_port, uint32_t dst_port, uint16_t op, uint32_t flags,
		     uint32_t buf_alloc, uint32_t fwd_cnt, const void *data, uint32_t len)
{
	struct vsock_hdr h = { .src_cid = CID, .dst_cid = VSOCK_HOST_CID, .src_port = src_port, .dst_port = dst_port,
			       .len = len, .type = VSOCK_TYPE_STREAM, .op = op, .flags = flags,
			       .buf_alloc = buf_alloc, .fwd_cnt = fwd_cnt };
	uint64_t a = 0x300000 + (r->tx_next++ % QSIZE) * 0x10000;

	memcpy(gp(r, a, sizeof(h)), &h, sizeof(h));
	if (len)
		memcpy(gp(r, a + 0x1000, len), data, len);
	offer(r, VSOCK_TX_QUEUE, a, sizeof(h), 0, len ? a + 0x1000 : 0, len, 0);
}

/* Waits for the next used element of rx; copies its header and up to `cap` bytes of data. 0 or -1 (timeout). */
static int recv_pkt(struct rig *r, struct vsock_hdr *h, void *data, uint32_t cap)
{
	struct vq *q = &r->q[VSOCK_RX_QUEUE];

	for (int ms = 0; ms < WAIT_MS; ms++) {
		uint8_t *used = gp(r, q->used, 4 + 8 * QSIZE);
		uint16_t idx = __atomic_load_n((uint16_t *)(void *)(used + 2), __ATOMIC_ACQUIRE);

		if (idx != q->used_seen) {
			uint32_t id, len;

			memcpy(&id, used + 4 + 8 * (q->used_seen % QSIZE), 4);
			memcpy(&len, used + 8 + 8 * (q->used_seen % QSIZE), 4);
			q->used_seen++;
			/* Which buffer: the descriptor's address. */
			uint64_t addr;

			memcpy(&addr, gp(r, q->desc + 16ULL * id, 8), 8);
			memcpy(h, gp(r, addr, sizeof(*h)), sizeof(*h));
			if (data && h->len)
				memcpy(data, gp(r, addr + sizeof(*h), h->len < cap ? h->len : cap), h->len < cap ? h->len : cap);
			return 0;
		}
		usleep(1000);
	}
	return -1;
}

static int rig_init(struct rig *r)
{
	struct vm_error err = { 0 };
	uint32_t status = VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER;

	memset(r, 0, sizeof(*r));
	if (guest_mem_init(&r->mem, RAM, &err) < 0)
		return -1;
	snprintf(r->path, 96, "%s/vsock-%d.sock", test_tmpdir(), getpid());
	if (virtio_vsock_init(&r->vs, CID, r->path, &err) < 0)
		return -1;
	virtio_mmio_init(&r->t, &virtio_vsock_ops, &r->vs, &r->mem);
	w32(r, VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE);
	w32(r, VIRTIO_MMIO_STATUS, status);
	w32(r, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	w32(r, VIRTIO_MMIO_DRIVER_FEATURES, 1);	/* VIRTIO_F_VERSION_1 */
	w32(r, VIRTIO_MMIO_STATUS, status |= VIRTIO_STATUS_FEATURES_OK);
	for (int qi = 0; qi < VSOCK_QUEUES; qi++) {
		struct vq *q = &r->q[qi];

		q->desc = 0x10000ULL * (qi + 1);
		q->avail = q->desc + 0x1000;
		q->used = q->desc + 0x2000;
		w32(r, VIRTIO_MMIO_QUEUE_SEL, (uint32_t)qi);
		w32(r, VIRTIO_MMIO_QUEUE_NUM, QSIZE);
		w32(r, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)q->desc);
		w32(r, VIRTIO_MMIO_QUEUE_DRIVER_LOW, (uint32_t)q->avail);
		w32(r, VIRTIO_MMIO_QUEUE_DEVICE_LOW, (uint32_t)q->used);
		w32(r, VIRTIO_MMIO_QUEUE_READY, 1);
	}
	w32(r, VIRTIO_MMIO_STATUS, status | VIRTIO_STATUS_DRIVER_OK);
	return virtio_vsock_start(&r->vs, &r->t, &err);
}

static void rig_exit(struct rig *r)
{
	virtio_vsock_exit(&r->vs);
	virtio_mmio_exit(&r->t);
	guest_mem_exit(&r->mem);
}

static int host_connect(const char *path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Reads exactly `len` bytes (or until EOF or WAIT_MS): how many arrived. */
static size_t host_read(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, WAIT_MS) <= 0)
			break;
		n = read(fd, (char *)buf + got, len - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	return got;
}

/* Host connects to guest port 52 and the guest accepts: returns the host fd and the device's host port. */
static int establish(struct rig *r, uint32_t *host_port)
{
	struct vsock_hdr h;
	char ok[32] = { 0 };
	int fd = host_connect(r->path);

	if (fd < 0 || write(fd, "CONNECT 52\n", 11) != 11 || recv_pkt(r, &h, NULL, 0) < 0)
		return -1;
	if (h.op != VSOCK_OP_REQUEST || h.dst_port != 52 || h.dst_cid != CID || h.src_cid != VSOCK_HOST_CID)
		return -1;
	*host_port = h.src_port;
	send_pkt(r, 52, h.src_port, VSOCK_OP_RESPONSE, 0, 65536, 0, NULL, 0);
	snprintf(ok, sizeof(ok), "OK %u\n", h.src_port);
	char got[32] = { 0 };

	if (host_read(fd, got, strlen(ok)) != strlen(ok) || strcmp(got, ok))
		return -1;
	return fd;
}

TEST(vsock_host_connects_to_a_guest_port_and_data_flows_both_ways)
{
	struct rig r;
	struct vsock_hdr h;
	uint32_t port;
	char data[64] = { 0 };
	int fd;

	REQUIRE(rig_init(&r) == 0);
	post_rx(&r, 16, RX_BUF_LEN);
	fd = establish(&r, &port);
	REQUIRE(fd >= 0);
	CHECK(port >= VSOCK_HOST_PORT_BASE);
	/* host -> guest */
	REQUIRE(write(fd, "hello guest", 11) == 11);
	REQUIRE(recv_pkt(&r, &h, data, sizeof(data)) == 0);
	CHECK_EQ_INT(h.op, VSOCK_OP_RW);
	CHECK_EQ_INT(h.len, 11);
	CHECK(!memcmp(data, "hello guest", 11));
	CHECK_EQ_INT(h.buf_alloc, VSOCK_BUF_ALLOC);
	/* guest -> host */
	send_pkt(&r, 52, port, VSOCK_OP_RW, 0, 65536, 11, "hello host", 10);
	memset(data, 0, sizeof(data));
	CHECK_EQ_INT(host_read(fd, data, 10), 10);
	CHECK(!strcmp(data, "hello host"));
	/* The guest closes: the device answers RST and the host sees the end of the stream. */
	send_pkt(&r, 52, port, VSOCK_OP_SHUTDOWN, VSOCK_SHUTDOWN_RCV | VSOCK_SHUTDOWN_SEND, 65536, 11, NULL, 0);
	REQUIRE(recv_pkt(&r, &h, NULL, 0) == 0);
	CHECK_EQ_INT(h.op, VSOCK_OP_RST);
	CHECK_EQ_INT(host_read(fd, data, 1), 0);
	close(fd);
	rig_exit(&r);
}

TEST(vsock_host_end_of_stream_reaches_the_guest_as_shutdown)
{
	struct rig r;
	struct vsock_hdr h;
	uint32_t port;
	int fd;

	REQUIRE(rig_init(&r) == 0);
	post_rx(&r, 16, RX_BUF_LEN);
	fd = establish(&r, &port);
	REQUIRE(fd >= 0);
	shutdown(fd, SHUT_WR);
	REQUIRE(recv_pkt(&r, &h, NULL, 0) == 0);
	CHECK_EQ_INT(h.op, VSOCK_OP_SHUTDOWN);
	CHECK_EQ_INT(h.flags, VSOCK_SHUTDOWN_SEND);
	/* The host still reads what the guest sends after that. */
	send_pkt(&r, 52, port, VSOCK_OP_RW, 0, 65536, 0, "late", 4);
	char data[8] = { 0 };

	CHECK_EQ_INT(host_read(fd, data, 4), 4);
	CHECK(!strcmp(data, "late"));
	close(fd);
	rig_exit(&r);
}

TEST(vsock_guest_connects_to_a_host_listener_or_is_refused)
{
	struct rig r;
	struct vsock_hdr h;
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int lfd, fd;
	char data[16] = { 0 };

	REQUIRE(rig_init(&r) == 0);
	post_rx(&r, 16, RX_BUF_LEN);
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%.96s_1234", r.path);
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	REQUIRE(bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) == 0 && listen(lfd, 4) == 0);
	send_pkt(&r, 5000, 1234, VSOCK_OP_REQUEST, 0, 65536, 0, NULL, 0);
	REQUIRE(recv_pkt(&r, &h, NULL, 0) == 0);
	CHECK_EQ_INT(h.op, VSOCK_OP_RESPONSE);
	CHECK_EQ_INT(h.src_port, 1234);
	CHECK_EQ_INT(h.dst_port, 5000);
	fd = accept(lfd, NULL, NULL);
	REQUIRE(fd >= 0);
	send_pkt(&r, 5000, 1234, VSOCK_OP_RW, 0, 65536, 0, "ping", 4);
	CHECK_EQ_INT(host_read(fd, data, 4), 4);
	CHECK(!strcmp(data, "ping"));
	REQUIRE(write(fd, "pong", 4) == 4);
	REQUIRE(recv_pkt(&r, &h, data, sizeof(data)) == 0);
	CHECK_EQ_INT(h.op, VSOCK_OP_RW);
	CHECK(!memcmp(data, "pong", 4));
	/* Nothing listens on port 999: refused with RST. */
	send_pkt(&r, 5001, 999, VSOCK_OP_REQUEST, 0, 65536, 0, NULL, 0);
	REQUIRE(recv_pkt(&r, &h, NULL, 0) == 0);
	CHECK_EQ_INT(h.op, VSOCK_OP_RST);
	CHECK_EQ_INT(h.dst_port, 5001);
	close(fd);
	close(lfd);
	rig_exit(&r);
}

TEST(vsock_never_sends_the_guest_more_than_its_credit)
{
	struct rig r;
	struct vsock_hdr h;
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	char big[100], data[128];
	int lfd, fd;

	REQUIRE(rig_init(&r) == 0);
	post_rx(&r, 16, RX_BUF_LEN);
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%.96s_77", r.path);
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	REQUIRE(bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) == 0 && listen(lfd, 4) == 0);
	send_pkt(&r, 6000, 77, VSOCK_OP_REQUEST, 0, 16, 0, NULL, 0);	/* a guest with a 16-byte buffer */
	REQUIRE(recv_pkt(&r, &h, NULL, 0) == 0);
	CHECK_EQ_INT(h.op, VSOCK_OP_RESPONSE);
	fd = accept(lfd, NULL, NULL);
	REQUIRE(fd >= 0);
	memset(big, 'x', sizeof(big));
	REQUIRE(write(fd, big, sizeof(big)) == sizeof(big));
	REQUIRE(recv_pkt(&r, &h, data, sizeof(data)) == 0);
	CHECK_EQ_INT(h.op, VSOCK_OP_RW);
	CHECK_EQ_INT(h.len, 16);
	CHECK(recv_pkt(&r, &h, NULL, 0) < 0);	/* nothing more until the guest has read it */
	send_pkt(&r, 6000, 77, VSOCK_OP_CREDIT_UPDATE, 0, 16, 16, NULL, 0);
	REQUIRE(recv_pkt(&r, &h, data, sizeof(data)) == 0);
	CHECK_EQ_INT(h.len, 16);
	close(fd);
	close(lfd);
	rig_exit(&r);
}

TEST(vsock_hostile_guest_packets_reset_the_connection_or_are_dropped)
{
	struct rig r;
	struct vsock_hdr h;
	uint32_t port;
	char junk[8] = "junkjunk";
	int fd;

	REQUIRE(rig_init(&r) == 0);
	post_rx(&r, 32, RX_BUF_LEN);
	fd = establish(&r, &port);
	REQUIRE(fd >= 0);
	/* A header that claims more payload than the chain holds: the connection is reset. */
	struct vsock_hdr bad = { .src_cid = CID, .dst_cid = VSOCK_HOST_CID, .src_port = 52, .dst_port = port,
				 .len = 100, .type = VSOCK_TYPE_STREAM, .op = VSOCK_OP_RW, .buf_alloc = 65536 };
	uint64_t a = 0x300000 + (r.tx_next++ % QSIZE) * 0x10000;

	memcpy(gp(&r, a, sizeof(bad)), &bad, sizeof(bad));
	offer(&r, VSOCK_TX_QUEUE, a, sizeof(bad), 0, a + 0x1000, 8, 0);
	REQUIRE(recv_pkt(&r, &h, NULL, 0) == 0);
	CHECK_EQ_INT(h.op, VSOCK_OP_RST);
	CHECK_EQ_INT(host_read(fd, junk, 1), 0);	/* the host side was closed */
	close(fd);
	/* A packet from the wrong CID, and one of an unknown type, are dropped: nothing comes back. */
	bad = (struct vsock_hdr){ .src_cid = 99, .dst_cid = VSOCK_HOST_CID, .src_port = 1, .dst_port = 2,
				  .type = VSOCK_TYPE_STREAM, .op = VSOCK_OP_REQUEST };
	a = 0x300000 + (r.tx_next++ % QSIZE) * 0x10000;
	memcpy(gp(&r, a, sizeof(bad)), &bad, sizeof(bad));
	offer(&r, VSOCK_TX_QUEUE, a, sizeof(bad), 0, 0, 0, 0);
	bad.src_cid = CID;
	bad.type = 2;
	a = 0x300000 + (r.tx_next++ % QSIZE) * 0x10000;
	memcpy(gp(&r, a, sizeof(bad)), &bad, sizeof(bad));
	offer(&r, VSOCK_TX_QUEUE, a, sizeof(bad), 0, 0, 0, 0);
	/* A chain shorter than a header is dropped too. */
	a = 0x300000 + (r.tx_next++ % QSIZE) * 0x10000;
	offer(&r, VSOCK_TX_QUEUE, a, 10, 0, 0, 0, 0);
	CHECK(recv_pkt(&r, &h, NULL, 0) < 0);
	CHECK_EQ_INT(r.vs.bad_packets, 4);
	/* A host connection that does not speak the protocol is closed. */
	fd = host_connect(r.path);
	REQUIRE(fd >= 0);
	REQUIRE(write(fd, "HELLO THERE\n", 12) == 12);
	CHECK_EQ_INT(host_read(fd, junk, 1), 0);
	close(fd);
	fd = host_connect(r.path);
	REQUIRE(fd >= 0);
	char longline[64];

	memset(longline, '9', sizeof(longline));
	REQUIRE(write(fd, "CONNECT ", 8) == 8 && write(fd, longline, sizeof(longline)) == sizeof(longline));
	CHECK_EQ_INT(host_read(fd, junk, 1), 0);
	close(fd);
	CHECK(!(r32(&r, VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_NEEDS_RESET));
	rig_exit(&r);
}

TEST(vsock_rx_buffers_too_small_for_a_header_make_the_device_need_a_reset)
{
	struct rig r;
	int fd;

	REQUIRE(rig_init(&r) == 0);
	post_rx(&r, 4, 8);
	fd = host_connect(r.path);
	REQUIRE(fd >= 0);
	REQUIRE(write(fd, "CONNECT 52\n", 11) == 11);
	for (int ms = 0; ms < WAIT_MS && !(r32(&r, VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_NEEDS_RESET); ms++)
		usleep(1000);
	CHECK(r32(&r, VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_NEEDS_RESET);
	close(fd);
	rig_exit(&r);
}

TEST(vsock_transport_reset_drops_connections_and_tells_the_guest)
{
	struct rig r;
	uint32_t port, event = 0xffffffff, len = 0, id;
	char byte;
	int fd;

	REQUIRE(rig_init(&r) == 0);
	post_rx(&r, 16, RX_BUF_LEN);
	offer(&r, VSOCK_EVENT_QUEUE, 0x200000, 4, VIRTQ_DESC_F_WRITE, 0, 0, 0);
	fd = establish(&r, &port);
	REQUIRE(fd >= 0);
	virtio_vsock_transport_reset(&r.vs);
	CHECK_EQ_INT(host_read(fd, &byte, 1), 0);
	uint8_t *used = gp(&r, r.q[VSOCK_EVENT_QUEUE].used, 4 + 8 * QSIZE);

	CHECK_EQ_INT(*(uint16_t *)(void *)(used + 2), 1);
	memcpy(&id, used + 4, 4);
	memcpy(&len, used + 8, 4);
	CHECK_EQ_INT(len, 4);
	memcpy(&event, gp(&r, 0x200000, 4), 4);
	CHECK_EQ_INT(event, VSOCK_EVENT_TRANSPORT_RESET);
	close(fd);
	rig_exit(&r);
}

/* Found by fuzz_vsock: the rx queue was marked broken for the event queue's fault, and evq kept a chain unanswered. */
TEST(vsock_event_buffer_too_small_for_the_event_breaks_the_event_queue)
{
	struct rig r;

	REQUIRE(rig_init(&r) == 0);
	offer(&r, VSOCK_EVENT_QUEUE, 0x200000, 2, VIRTQ_DESC_F_WRITE, 0, 0, 0);
	virtio_vsock_transport_reset(&r.vs);
	CHECK(r32(&r, VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_NEEDS_RESET);
	CHECK(r.t.q[VSOCK_EVENT_QUEUE].broken);
	CHECK(!r.t.q[VSOCK_RX_QUEUE].broken);
	rig_exit(&r);
}

/*
 * After a reset, a host connection must wait until the guest has handled the reset (it hands its event buffer
 * back): a REQUEST delivered earlier would be reset by the guest along with the old sockets, silently.
 */
TEST(vsock_after_a_transport_reset_requests_wait_for_the_guest_to_handle_it)
{
	struct rig r;
	struct vsock_hdr h;
	char ok[32] = { 0 };
	int fd;

	REQUIRE(rig_init(&r) == 0);
	post_rx(&r, 16, RX_BUF_LEN);
	offer(&r, VSOCK_EVENT_QUEUE, 0x200000, 4, VIRTQ_DESC_F_WRITE, 0, 0, 0);
	virtio_vsock_transport_reset(&r.vs);
	fd = host_connect(r.path);
	REQUIRE(fd >= 0);
	REQUIRE(write(fd, "CONNECT 52\n", 11) == 11);
	CHECK_EQ_INT(recv_pkt(&r, &h, NULL, 0), -1);	/* held back: the reset is not handled yet */
	offer(&r, VSOCK_EVENT_QUEUE, 0x200000, 4, VIRTQ_DESC_F_WRITE, 0, 0, 0);	/* handled: buffer back */
	REQUIRE(recv_pkt(&r, &h, NULL, 0) == 0);
	CHECK_EQ_INT(h.op, VSOCK_OP_REQUEST);
	CHECK_EQ_INT(h.dst_port, 52);
	send_pkt(&r, 52, h.src_port, VSOCK_OP_RESPONSE, 0, 65536, 0, NULL, 0);
	CHECK_EQ_INT(host_read(fd, ok, 3), 3);
	CHECK(!strncmp(ok, "OK ", 3));
	close(fd);
	rig_exit(&r);
}

TEST(vsock_init_refuses_a_reserved_cid_and_a_path_too_long)
{
	struct virtio_vsock vs;
	struct vm_error err = { 0 };
	char path[200];

	CHECK(virtio_vsock_init(&vs, 2, "/tmp/x.sock", &err) < 0);
	CHECK(test_str_contains(err.msg, "CID 2"));
	memset(path, 'a', sizeof(path) - 1);
	path[sizeof(path) - 1] = 0;
	CHECK(virtio_vsock_init(&vs, 3, path, &err) < 0);
	CHECK(test_str_contains(err.msg, "too long"));
}
