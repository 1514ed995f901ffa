/*
 * libFuzzer target for virtio-vsock (docs/vmm.md, "vsock"): the input is a script (vsock_input.h) of what a hostile
 * guest driver does on the three queues (packets with any op, ports, CIDs, type, len, credit and chain shape; rx
 * and event buffers of any size, or none; notifies, device resets, raw writes to the rings) and of what host
 * programs do on the VM's Unix socket, with transport resets in between. Guest RAM has an inaccessible page on each
 * side; the sanitizers catch the rest.
 *
 * The device code is included here rather than linked so that the multiplexer's loop body runs in this thread after
 * every step (mux_poll) instead of in its own: each input then runs the same way every time, and fast.
 *
 * What must hold: no crash or hang; every used element names a chain the driver offered and not yet got back, with
 * no more written than it had room for; the device never takes more than was offered; a broken queue means
 * DEVICE_NEEDS_RESET, after which nothing more is used; every packet the guest gets is well-formed and no RW
 * payload exceeds the credit the guest granted (its buf_alloc and fwd_cnt); host programs receive only bytes the
 * guest sent, and the guest only bytes host programs sent; no file descriptor outlives its input.
 */
#define _GNU_SOURCE
#include "virtio_vsock.c"

#include <fcntl.h>
#include <sys/mman.h>

#include "vsock_input.h"

#define RAM (6ULL << 20)
#define CID 7
#define RING(q) (0x4000ULL * (q))	/* descriptors, then the avail ring at +0x1000 and the used ring at +0x2000 */
#define EV_AREA 0x10000ULL		/* each descriptor index has a slot of its own in its queue's area */
#define EV_SLOT 0x100
#define RX_AREA 0x20000ULL
#define RX_SLOT 0x4000
#define TX_AREA 0x120000ULL
#define TX_SLOT 0x10000
#define QMAX 64
#define MAX_STEPS 512
#define MAX_HOSTS 8
#define MAX_PAIRS 64
#define LISTEN_PORT 1024		/* the host program guest connections reach (`<uds>_1024`) */
#define GUEST_BYTE 0x47			/* every byte of payload the guest sends */
#define HOST_BYTE 0x48			/* every byte host programs send */
#define FD_SCAN 128

#define CHECK(cond)                                                                             \
	do {                                                                                    \
		if (!(cond)) {                                                                  \
			fprintf(stderr, "fuzz_vsock.c:%d: invariant broken: %s\n", __LINE__, #cond); \
			abort();                                                                \
		}                                                                               \
	} while (0)

/* The driver's view of one queue. */
struct drv_queue {
	uint16_t num, avail_idx, used_seen;
	uint8_t busy[QMAX];		/* descriptor is part of a chain the device has not given back */
	uint8_t offered[QMAX];		/* a chain with this head is out */
	uint8_t chain[QMAX][4];		/* the descriptors of the chain with this head */
	uint8_t chain_len[QMAX];
	uint32_t room[QMAX];		/* its device-writable bytes */
};

/* The credit the guest granted a connection (local port is the host side's), and what it got on it. */
struct pair {
	uint32_t local, peer, buf_alloc, fwd_cnt, received;
};

/* A tx packet queued but not yet notified: how it changes `pairs` once the device reads it. */
struct sent {
	uint32_t local, peer, buf_alloc, fwd_cnt;
	uint16_t op;
};

struct host {
	int fd;
	int in_line;			/* the device's "OK <port>\n" is still to come */
};

static struct {
	struct guest_mem mem;
	char uds[96], listen_path[112];
	/* per input */
	struct virtio_mmio t;
	struct virtio_vsock vs;
	struct drv_queue q[VSOCK_QUEUES];
	uint8_t qbits[VSOCK_QUEUES];
	struct pair pairs[MAX_PAIRS];
	unsigned nr_pairs;
	struct sent sent[QMAX];
	unsigned nr_sent;
	struct host hosts[MAX_HOSTS];
	int listen_fd;
	int chaos;			/* raw ring writes happened: what the rings hold is no longer the driver's */
} f;

struct input {
	const uint8_t *p;
	size_t left;
};

static uint8_t in8(struct input *in)
{
	if (!in->left)
		return 0;
	in->left--;
	return *in->p++;
}

static uint16_t in16(struct input *in)
{
	uint16_t lo = in8(in);

	return (uint16_t)(lo | in8(in) << 8);
}

static uint32_t in32(struct input *in)
{
	uint32_t lo = in16(in);

	return lo | (uint32_t)in16(in) << 16;
}

static uint8_t *gp(uint64_t gpa, uint64_t len)
{
	uint8_t *p = guest_mem_ptr(&f.mem, gpa, len);

	CHECK(p);
	return p;
}

static void w32(uint64_t off, uint32_t v)
{
	virtio_mmio_access(&f.t, off, (uint8_t *)&v, 4, 1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	uint8_t *area = mmap(NULL, RAM + 2 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	(void)argc;
	(void)argv;
	CHECK(area != MAP_FAILED);
	CHECK(mprotect(area + 4096, RAM, PROT_READ | PROT_WRITE) == 0);
	f.mem.fd = -1;
	f.mem.host = area + 4096;
	f.mem.size = f.mem.low_size = RAM;
	/* Removed after each input (a crash leaves two socket files, which the next run with this pid replaces). */
	snprintf(f.uds, sizeof(f.uds), "/tmp/smol-fuzz-vsock-%d.sock", (int)getpid());
	snprintf(f.listen_path, sizeof(f.listen_path), "%s_%u", f.uds, LISTEN_PORT);
	return 0;
}

/* The driver's side of setting the device up: features, then the three queues at their fixed places. */
static void driver_setup(void)
{
	uint32_t status = VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER;

	memset(gp(0, RING(VSOCK_QUEUES)), 0, RING(VSOCK_QUEUES));
	memset(f.q, 0, sizeof(f.q));
	f.nr_pairs = f.nr_sent = 0;
	f.chaos = 0;
	w32(VIRTIO_MMIO_STATUS, status);
	w32(VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	w32(VIRTIO_MMIO_DRIVER_FEATURES, 1);	/* VIRTIO_F_VERSION_1 */
	w32(VIRTIO_MMIO_STATUS, status |= VIRTIO_STATUS_FEATURES_OK);
	for (int qi = 0; qi < VSOCK_QUEUES; qi++) {
		f.q[qi].num = (uint16_t)(1u << (f.qbits[qi] % 7));
		w32(VIRTIO_MMIO_QUEUE_SEL, (uint32_t)qi);
		w32(VIRTIO_MMIO_QUEUE_NUM, f.q[qi].num);
		w32(VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)RING(qi));
		w32(VIRTIO_MMIO_QUEUE_DRIVER_LOW, (uint32_t)RING(qi) + 0x1000);
		w32(VIRTIO_MMIO_QUEUE_DEVICE_LOW, (uint32_t)RING(qi) + 0x2000);
		w32(VIRTIO_MMIO_QUEUE_READY, 1);
	}
	w32(VIRTIO_MMIO_STATUS, status | VIRTIO_STATUS_DRIVER_OK);
}

static int serving(void)
{
	return (f.t.status & VIRTIO_STATUS_DRIVER_OK) && !(f.t.status & VIRTIO_STATUS_NEEDS_RESET);
}

static struct pair *pair_of(uint32_t local, uint32_t peer)
{
	for (unsigned i = 0; i < f.nr_pairs; i++)
		if (f.pairs[i].local == local && f.pairs[i].peer == peer)
			return &f.pairs[i];
	if (f.nr_pairs == MAX_PAIRS)
		return NULL;
	f.pairs[f.nr_pairs] = (struct pair){ .local = local, .peer = peer };
	return &f.pairs[f.nr_pairs++];
}

static void notify(uint32_t qi)
{
	/* The device reads the queued tx packets now (it does nothing while not serving or broken). */
	if (qi == VSOCK_TX_QUEUE && serving() && !f.t.q[qi].broken) {
		for (unsigned i = 0; i < f.nr_sent; i++) {
			struct sent *s = &f.sent[i];
			struct pair *p = pair_of(s->local, s->peer);

			if (!p)
				continue;
			p->buf_alloc = s->buf_alloc;
			p->fwd_cnt = s->fwd_cnt;
			if (s->op == VSOCK_OP_REQUEST)
				p->received = 0;	/* a new connection, or none */
		}
		f.nr_sent = 0;
	}
	w32(VIRTIO_MMIO_QUEUE_NOTIFY, qi);
}

/* Takes `n` free descriptors of queue qi; 0 when there are not enough. */
static int take_descs(struct drv_queue *q, uint8_t *ids, int n)
{
	int got = 0;

	for (int i = 0; i < q->num && got < n; i++)
		if (!q->busy[i])
			ids[got++] = (uint8_t)i;
	if (got < n)
		return 0;
	for (int i = 0; i < n; i++)
		q->busy[ids[i]] = 1;
	return 1;
}

static void put_desc(int qi, uint8_t id, uint64_t addr, uint32_t len, uint16_t flags, uint8_t next)
{
	uint8_t *d = gp(RING(qi) + 16ULL * id, 16);
	uint16_t nx = next;

	memcpy(d, &addr, 8);
	memcpy(d + 8, &len, 4);
	memcpy(d + 12, &flags, 2);
	memcpy(d + 14, &nx, 2);
}

/* Puts the chain `ids` (already described) on the avail ring. */
static void offer(int qi, const uint8_t *ids, int n, uint32_t room)
{
	struct drv_queue *q = &f.q[qi];
	uint8_t *avail = gp(RING(qi) + 0x1000, 4 + 2 * QMAX);
	uint16_t head = ids[0];

	q->offered[head] = 1;
	memcpy(q->chain[head], ids, (size_t)n);
	q->chain_len[head] = (uint8_t)n;
	q->room[head] = room;
	memcpy(avail + 4 + 2 * (q->avail_idx % q->num), &head, 2);
	q->avail_idx++;
	__atomic_store_n((uint16_t *)(void *)(avail + 2), q->avail_idx, __ATOMIC_RELEASE);
}

static uint32_t guest_port(uint8_t sel, struct input *in)
{
	static const uint32_t ports[] = { 52, 53, 2000 };

	return sel % 4 < 3 ? ports[sel % 4] : in32(in);
}

static uint32_t host_port(uint8_t sel, struct input *in)
{
	switch (sel % 4) {
	case 0:
		return LISTEN_PORT;
	case 1:
		return VSOCK_HOST_PORT_BASE + (sel >> 2) % 4;	/* host connections get these, in order */
	case 2:
		return LISTEN_PORT + 1;	/* nothing listens */
	}
	return in32(in);
}

/* Copies `len` bytes into the chain's readable stream at `off`, or fills it with `byte` when src is NULL. */
static void stream_put(const uint64_t *addr, const uint32_t *lens, int n, uint32_t off, const void *src, uint8_t byte,
		       uint32_t len)
{
	for (int i = 0; i < n && len; i++) {
		uint32_t k;

		if (off >= lens[i]) {
			off -= lens[i];
			continue;
		}
		k = lens[i] - off < len ? lens[i] - off : len;
		if (src) {
			memcpy(gp(addr[i] + off, k), src, k);
			src = (const uint8_t *)src + k;
		} else {
			memset(gp(addr[i] + off, k), byte, k);
		}
		len -= k;
		off = 0;
	}
}

static void cmd_tx(struct input *in)
{
	struct drv_queue *q = &f.q[VSOCK_TX_QUEUE];
	uint8_t shape = in8(in), opb = in8(in), src_sel = in8(in), dst_sel = in8(in);
	struct vsock_hdr h = { .src_cid = CID, .dst_cid = VSOCK_HOST_CID, .type = VSOCK_TYPE_STREAM };
	uint32_t pay, total, lens[4], left;
	uint64_t addr[4];
	uint8_t ids[4], split1, split2;
	int nread = 1 + (shape & TX_DESCS) % 3, n = nread + !!(shape & TX_WRITABLE);
	struct pair *p;

	h.op = (opb & 0x7f) <= 7 ? opb & 0x7f : (uint16_t)(0x100 | opb);
	h.src_port = guest_port(src_sel, in);
	h.dst_port = host_port(dst_sel, in);
	h.flags = in8(in);
	h.buf_alloc = in32(in);
	h.fwd_cnt = in32(in);
	pay = in16(in) % (TX_SLOT - VSOCK_HDR_LEN + 1);
	split1 = in8(in);
	split2 = in8(in);
	h.len = pay + (opb & 0x80 ? in32(in) : 0);	/* more than the chain holds */
	if (shape & TX_HONEST_FWD && (p = pair_of(h.dst_port, h.src_port)))
		h.fwd_cnt = p->received;
	if ((shape & (TX_BAD_SRC_CID | TX_BAD_DST_CID)) == (TX_BAD_SRC_CID | TX_BAD_DST_CID))
		h.type = 2;	/* SEQPACKET: not offered */
	else if (shape & TX_BAD_SRC_CID)
		h.src_cid = h.buf_alloc & 1 ? VSOCK_HOST_CID : (uint64_t)h.fwd_cnt << 32 | CID;
	else if (shape & TX_BAD_DST_CID)
		h.dst_cid = h.buf_alloc & 1 ? CID : 1;
	total = shape & TX_SHORT ? split1 % VSOCK_HDR_LEN : VSOCK_HDR_LEN + pay;
	if (!take_descs(q, ids, n))
		return;
	/* The readable stream split into nread descriptors at the two split points (a header may be split too). */
	left = total;
	for (int i = 0; i < nread; i++) {
		uint32_t want = i == nread - 1 ? left : (i == 0 ? split1 : (uint32_t)split2 * 64);

		lens[i] = want < left ? want : left;
		left -= lens[i];
		addr[i] = TX_AREA + (uint64_t)ids[i] * TX_SLOT;
	}
	stream_put(addr, lens, nread, 0, &h, 0, total < VSOCK_HDR_LEN ? total : VSOCK_HDR_LEN);
	if (total > VSOCK_HDR_LEN)
		stream_put(addr, lens, nread, VSOCK_HDR_LEN, NULL, GUEST_BYTE, total - VSOCK_HDR_LEN);
	for (int i = 0; i < nread; i++)
		put_desc(VSOCK_TX_QUEUE, ids[i], addr[i], lens[i], i + 1 < n ? VIRTQ_DESC_F_NEXT : 0,
			 i + 1 < n ? ids[i + 1] : 0);
	if (n > nread)
		put_desc(VSOCK_TX_QUEUE, ids[nread], TX_AREA + (uint64_t)ids[nread] * TX_SLOT, split2, VIRTQ_DESC_F_WRITE,
			 0);
	offer(VSOCK_TX_QUEUE, ids, n, n > nread ? split2 : 0);
	/* What the device will take from this header once it reads it (vsock_tx's checks). */
	if (total >= VSOCK_HDR_LEN && h.src_cid == CID && h.dst_cid == VSOCK_HOST_CID && h.type == VSOCK_TYPE_STREAM &&
	    f.nr_sent < QMAX)
		f.sent[f.nr_sent++] = (struct sent){ .local = h.dst_port, .peer = h.src_port, .buf_alloc = h.buf_alloc,
						     .fwd_cnt = h.fwd_cnt, .op = h.op };
	if (!(shape & TX_NO_NOTIFY))
		notify(VSOCK_TX_QUEUE);
}

/* Device-writable buffers for the rx (slots of RX_SLOT) or event (EV_SLOT) queue. */
static void post_buffer(int qi, uint32_t len, uint8_t shape)
{
	struct drv_queue *q = &f.q[qi];
	uint64_t area = qi == VSOCK_RX_QUEUE ? RX_AREA : EV_AREA, slot = qi == VSOCK_RX_QUEUE ? RX_SLOT : EV_SLOT;
	int n = shape & BUF_TWO ? 2 : 1;
	uint32_t lens[2] = { n == 2 ? len / 2 : len, len - len / 2 }, room = 0;
	uint8_t ids[2];

	if (!take_descs(q, ids, n))
		return;
	for (int i = 0; i < n; i++) {
		uint16_t flags = i == 0 && shape & BUF_READONLY ? 0 : VIRTQ_DESC_F_WRITE;

		if (flags)
			room += lens[i];
		put_desc(qi, ids[i], area + ids[i] * slot, lens[i], (uint16_t)(flags | (i + 1 < n ? VIRTQ_DESC_F_NEXT : 0)),
			 i + 1 < n ? ids[i + 1] : 0);
	}
	offer(qi, ids, n, room);
}

/* Reads the device-writable bytes [off, off + len) of the chain with head `head` (as the driver described it). */
static void chain_get(int qi, uint16_t head, uint32_t off, void *dst, uint32_t len)
{
	struct drv_queue *q = &f.q[qi];

	for (int i = 0; i < q->chain_len[head] && len; i++) {
		const uint8_t *d = gp(RING(qi) + 16ULL * q->chain[head][i], 16);
		uint64_t addr;
		uint32_t dlen, k;
		uint16_t flags;

		memcpy(&addr, d, 8);
		memcpy(&dlen, d + 8, 4);
		memcpy(&flags, d + 12, 2);
		if (!(flags & VIRTQ_DESC_F_WRITE))
			continue;
		if (off >= dlen) {
			off -= dlen;
			continue;
		}
		k = dlen - off < len ? dlen - off : len;
		memcpy(dst, gp(addr + off, k), k);
		dst = (uint8_t *)dst + k;
		len -= k;
		off = 0;
	}
	CHECK(len == 0);
}

/* A packet the device put in an rx buffer: well-formed, within credit, carrying only what host programs sent. */
static void check_rx(uint16_t head, uint32_t used_len)
{
	static uint8_t data[RX_SLOT * 2];
	struct vsock_hdr h;
	struct pair *p;

	CHECK(used_len >= VSOCK_HDR_LEN);
	chain_get(VSOCK_RX_QUEUE, head, 0, &h, sizeof(h));
	CHECK(h.src_cid == VSOCK_HOST_CID && h.dst_cid == CID && h.type == VSOCK_TYPE_STREAM);
	CHECK(used_len == VSOCK_HDR_LEN + h.len);
	CHECK(h.op >= VSOCK_OP_REQUEST && h.op <= VSOCK_OP_CREDIT_UPDATE);
	CHECK(h.op == VSOCK_OP_RW ? h.len > 0 : h.len == 0);
	p = pair_of(h.src_port, h.dst_port);
	if (!p)
		return;
	if (h.op == VSOCK_OP_REQUEST)
		p->received = 0;
	if (h.op != VSOCK_OP_RW)
		return;
	/* In flight after this packet: what the guest got minus what it said it consumed, within what it allowed. */
	CHECK((uint32_t)(p->received + h.len - p->fwd_cnt) <= p->buf_alloc);
	p->received += h.len;
	chain_get(VSOCK_RX_QUEUE, head, VSOCK_HDR_LEN, data, h.len);
	for (uint32_t i = 0; i < h.len; i++)
		CHECK(data[i] == HOST_BYTE);
}

/* What the device gave back on each queue since the last look, checked against what the driver offered. */
static void collect_used(int needed_reset_before, const uint16_t *used_before)
{
	for (int qi = 0; qi < VSOCK_QUEUES; qi++) {
		struct drv_queue *q = &f.q[qi];
		struct virtq *dq = &f.t.q[qi];
		const uint8_t *used = gp(RING(qi) + 0x2000, 4 + 8 * QMAX);
		uint16_t idx;

		memcpy(&idx, used + 2, 2);
		CHECK(idx == dq->used_idx);
		/* Each chain taken is answered once, but the one that broke the queue. */
		CHECK((uint16_t)(dq->last_avail - dq->used_idx) <= (dq->broken ? 1 : 0));
		if (dq->broken)
			CHECK(f.t.status & VIRTIO_STATUS_NEEDS_RESET);
		if (needed_reset_before)
			CHECK(dq->used_idx == used_before[qi]);	/* a device that gave up stays quiet */
		if (!f.chaos)	/* never more than offered */
			CHECK((uint16_t)(q->avail_idx - dq->last_avail) <= q->num);
		for (; q->used_seen != idx; q->used_seen++) {
			uint32_t id, len;

			memcpy(&id, used + 4 + 8 * (q->used_seen % q->num), 4);
			memcpy(&len, used + 8 + 8 * (q->used_seen % q->num), 4);
			if (f.chaos) {	/* the rings are not the driver's: only give the descriptors back */
				if (id < q->num && q->offered[id]) {
					q->offered[id] = 0;
					for (int i = 0; i < q->chain_len[id]; i++)
						q->busy[q->chain[id][i]] = 0;
				}
				continue;
			}
			CHECK(id < q->num && q->offered[id]);
			CHECK(len <= q->room[id]);
			if (qi == VSOCK_RX_QUEUE)
				check_rx((uint16_t)id, len);
			if (qi == VSOCK_EVENT_QUEUE) {
				uint32_t ev;

				CHECK(len == sizeof(ev));
				chain_get(qi, (uint16_t)id, 0, &ev, sizeof(ev));
				CHECK(ev == VSOCK_EVENT_TRANSPORT_RESET);
			}
			q->offered[id] = 0;
			for (int i = 0; i < q->chain_len[id]; i++)
				q->busy[q->chain[id][i]] = 0;
		}
	}
}

/* The multiplexer thread's loop body (mux_thread), without waiting: host sockets' events, then delivery. */
static void mux_poll(void)
{
	struct epoll_event ev[64];
	int n;

	for (int round = 0; round < 8 && (n = epoll_wait(f.vs.epoll_fd, ev, 64, 0)) > 0; round++) {
		pthread_mutex_lock(&f.t.lock);
		for (int i = 0; i < n; i++) {
			struct vsock_conn *c;

			if (ev[i].data.u64 == TAG_LISTEN)
				accept_all(&f.vs);
			else if (ev[i].data.u64 != TAG_STOP && (c = conn_by_id(&f.vs, ev[i].data.u64)))
				host_event(&f.vs, c, ev[i].events);
		}
		deliver_locked(&f.vs);
		pthread_mutex_unlock(&f.t.lock);
	}
}

static void host_add(int fd, int in_line)
{
	for (int i = 0; i < MAX_HOSTS; i++)
		if (f.hosts[i].fd < 0) {
			f.hosts[i] = (struct host){ .fd = fd, .in_line = in_line };
			return;
		}
	close(fd);
}

static void host_connect(uint32_t port, uint8_t line)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	char text[48];
	int len;

	CHECK(fd >= 0);
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", f.uds);
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		close(fd);
		return;
	}
	switch (line % 5) {
	case 0:
		len = snprintf(text, sizeof(text), "CONNECT %u\n", port);
		break;
	case 1:
		len = snprintf(text, sizeof(text), "CONNECT %u", port);	/* no end of line yet */
		break;
	case 2:
		len = snprintf(text, sizeof(text), "CONNECT %u junk\n", port);
		break;
	case 3:
		len = snprintf(text, sizeof(text), "CONNECT 99999999999999999999\n");
		break;
	default:
		len = snprintf(text, sizeof(text), "%.*s", (int)(line % 40), "CONNECT CONNECT CONNECT CONNECT CONNECT ");
	}
	if (len > 0)
		send(fd, text, (size_t)len, MSG_NOSIGNAL);	/* the device may have closed it already: fine */
	host_add(fd, 1);
}

/* Drains a host connection, checking that it got only "OK <port>\n" (host-initiated) and what the guest sent. */
static void host_read(struct host *h)
{
	static uint8_t buf[65536];
	ssize_t n;

	while (h->fd >= 0 && (n = recv(h->fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		for (ssize_t i = 0; i < n; i++) {
			if (h->in_line) {
				h->in_line = buf[i] != '\n';
				continue;
			}
			if (!f.chaos)
				CHECK(buf[i] == GUEST_BYTE);
		}
}

static void host_write(struct host *h, uint32_t len)
{
	static uint8_t buf[65536];

	if (h->fd < 0)
		return;
	memset(buf, HOST_BYTE, len);
	send(h->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);	/* full or closed: fine */
}

/* Guest connections to LISTEN_PORT reach this host program. */
static void accept_guest_conns(void)
{
	int fd;

	while ((fd = accept4(f.listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0)
		host_add(fd, 0);
}

static void listen_guest_conns(void)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };

	f.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	CHECK(f.listen_fd >= 0);
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", f.listen_path);
	unlink(f.listen_path);
	CHECK(bind(f.listen_fd, (struct sockaddr *)&addr, sizeof(addr)) == 0 && listen(f.listen_fd, 16) == 0);
}

static void cmd_chaos(struct input *in)
{
	uint8_t qi = in8(in) % VSOCK_QUEUES, what = in8(in), raw[16];
	uint16_t v = in16(in);
	uint8_t *ring = gp(RING(qi), 0x3000);

	for (int i = 0; i < 16; i++)
		raw[i] = in8(in);
	f.chaos = 1;
	switch (what % 3) {
	case 0:	/* the avail index, anywhere */
		memcpy(ring + 0x1002, &v, 2);
		break;
	case 1:	/* an avail ring entry: any head */
		memcpy(ring + 0x1004 + 2 * (v % QMAX), raw, 2);
		break;
	default:	/* a descriptor: any address, length, flags, next */
		memcpy(ring + 16 * (v % QMAX), raw, 16);
	}
	notify(qi);
}

static void step(struct input *in)
{
	uint8_t cmd = in8(in) % CMD_COUNT, a;
	struct host *h;

	switch (cmd) {
	case CMD_TX:
		cmd_tx(in);
		break;
	case CMD_RX: {
		int count = 1 + in8(in) % 8;
		uint32_t len = in16(in) % (RX_SLOT + 1);
		uint8_t shape = in8(in);

		for (int i = 0; i < count; i++)
			post_buffer(VSOCK_RX_QUEUE, len, shape);
		if (!(shape & BUF_NO_NOTIFY))
			notify(VSOCK_RX_QUEUE);
		break;
	}
	case CMD_EVENT: {
		uint32_t len = in8(in);
		uint8_t shape = in8(in);

		post_buffer(VSOCK_EVENT_QUEUE, len % 9, shape);	/* an event is 4 bytes */
		if (!(shape & BUF_NO_NOTIFY))
			notify(VSOCK_EVENT_QUEUE);
		break;
	}
	case CMD_NOTIFY:
		notify(in8(in) % 5);
		break;
	case CMD_HOST_CONNECT: {
		uint32_t port = in32(in);

		host_connect(port, in8(in));
		break;
	}
	case CMD_HOST_WRITE:
		h = &f.hosts[in8(in) % MAX_HOSTS];
		host_write(h, in16(in));
		break;
	case CMD_HOST_READ:
		host_read(&f.hosts[in8(in) % MAX_HOSTS]);
		break;
	case CMD_HOST_CLOSE:
		h = &f.hosts[in8(in) % MAX_HOSTS];
		a = in8(in);
		if (h->fd >= 0 && a % 2) {
			shutdown(h->fd, SHUT_WR);
		} else if (h->fd >= 0) {
			close(h->fd);
			h->fd = -1;
		}
		break;
	case CMD_TRANSPORT_RESET:
		virtio_vsock_transport_reset(&f.vs);
		break;
	case CMD_STATUS:
		a = in8(in);
		w32(VIRTIO_MMIO_STATUS, a);
		if (!a)
			driver_setup();
		break;
	case CMD_CHAOS:
		cmd_chaos(in);
		break;
	case CMD_CONFIG: {
		uint8_t buf[8], off = in8(in);

		virtio_mmio_access(&f.t, VIRTIO_MMIO_CONFIG + off, buf, 1 + in8(in) % 8, 0);
		break;
	}
	}
}

/* Which descriptors are open; after an input, any not open before it is one it leaked. */
static void fds_open(uint8_t *open)
{
	for (int fd = 0; fd < FD_SCAN; fd++)
		open[fd] = fcntl(fd, F_GETFD) >= 0;
}

static void check_fds(const uint8_t *before)
{
	uint8_t after[FD_SCAN];

	fds_open(after);
	for (int fd = 0; fd < FD_SCAN; fd++) {
		if (after[fd] && !before[fd])
			fprintf(stderr, "fuzz_vsock: file descriptor %d was left open\n", fd);
		CHECK(!after[fd] || before[fd]);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	struct vm_error err = { 0 };
	uint16_t used_before[VSOCK_QUEUES];
	uint8_t fds[FD_SCAN];
	uint32_t first_port;

	if (size < VSOCK_IN_HEAD)
		return 0;
	fds_open(fds);
	for (int qi = 0; qi < VSOCK_QUEUES; qi++)
		f.qbits[qi] = in8(&in);
	first_port = in32(&in);
	for (int i = 0; i < MAX_HOSTS; i++)
		f.hosts[i].fd = -1;
	if (virtio_vsock_init(&f.vs, CID, f.uds, &err) < 0) {
		fprintf(stderr, "fuzz_vsock: %s\n", err.msg);
		abort();
	}
	virtio_mmio_init(&f.t, &virtio_vsock_ops, &f.vs, &f.mem);
	f.vs.t = &f.t;	/* what virtio_vsock_start does, but for the thread: mux_poll stands in for it */
	listen_guest_conns();
	driver_setup();
	host_connect(first_port, 0);	/* every input exercises the host side at least once */
	mux_poll();

	for (int n = 0; n < MAX_STEPS && in.left; n++) {
		int needed_reset = !!(f.t.status & VIRTIO_STATUS_NEEDS_RESET);
		const uint8_t *cmd = in.p;

		for (int qi = 0; qi < VSOCK_QUEUES; qi++)
			used_before[qi] = f.t.q[qi].used_idx;
		step(&in);
		if (*cmd % CMD_COUNT == CMD_STATUS && (in.p == cmd + 1 || !cmd[1]))	/* a reset starts over */
			needed_reset = 0;
		mux_poll();
		accept_guest_conns();
		collect_used(needed_reset, used_before);
	}
	for (int i = 0; i < MAX_HOSTS; i++) {
		host_read(&f.hosts[i]);
		if (f.hosts[i].fd >= 0)
			close(f.hosts[i].fd);
	}
	close(f.listen_fd);
	unlink(f.listen_path);
	virtio_vsock_exit(&f.vs);
	virtio_mmio_exit(&f.t);
	check_fds(fds);
	return 0;
}
