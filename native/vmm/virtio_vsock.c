/*
 * virtio-vsock and its host-side Unix-socket multiplexer (virtio_vsock.h has the contract).
 *
 * Two threads touch the device, both under the transport's lock: the device thread runs queue_work when the guest
 * notifies a queue (packets the guest sent, new rx or event buffers), and the multiplexer thread here waits on the
 * listener and the host-side sockets. Every host socket is non-blocking and registered EPOLLONESHOT, re-armed only
 * for what the connection can use next: a connection with no guest credit or no rx buffer is not polled for input
 * until one arrives, so nothing spins and nothing is read that cannot be delivered.
 */
#define _GNU_SOURCE
#include "error.h"
#include "guest_mem.h"
#include "le_codec.h"
#include "virtio.h"
#include "virtio_vsock.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define TAG_LISTEN 0
#define TAG_STOP 1
#define HANDSHAKE_MAX 32	/* "CONNECT 4294967295\n" fits */
#define READ_CHUNK 65536

enum conn_state {
	CONN_HANDSHAKE,		/* host connected; waiting for its CONNECT line */
	CONN_REQUESTED,		/* REQUEST sent to the guest; waiting for RESPONSE or RST */
	CONN_ESTABLISHED,
};

struct vsock_conn {
	struct vsock_conn *next;
	uint64_t id;
	int fd;
	enum conn_state state;
	uint32_t local_port;	/* the host side's port */
	uint32_t peer_port;	/* the guest's port */
	uint32_t peer_buf_alloc, peer_fwd_cnt;	/* the guest's credit, from its last header */
	uint32_t rx_cnt;	/* bytes sent to the guest */
	uint32_t fwd_cnt;	/* bytes of the guest's forwarded to the host socket */
	uint32_t fwd_cnt_told;	/* fwd_cnt as the guest last heard it */
	uint8_t *out;		/* what the guest sent that the host socket has not taken yet */
	uint32_t out_len;
	int readable;		/* the host socket may have data: read it when credit and an rx buffer allow */
	int host_eof;		/* the host side sends no more (the guest was sent SHUTDOWN) */
	int shut_write;		/* the guest will send no more: shut the host socket's write side once out drains */
	char line[HANDSHAKE_MAX];	/* the CONNECT line so far */
	unsigned line_len;
};

struct vsock_ctl {
	uint32_t local_port, peer_port;
	uint16_t op;
	uint32_t flags;
};

/* SMOL_VSOCK_TRACE=1: every packet and decision on stderr (debugging only). */
static int vsock_trace = -1;
#define TRACE(...) do { if (vsock_trace < 0) vsock_trace = getenv("SMOL_VSOCK_TRACE") != NULL; \
	if (vsock_trace) { fprintf(stderr, "vsock: " __VA_ARGS__); fputc('\n', stderr); } } while (0)

static struct vsock_conn *conn_find(struct virtio_vsock *vs, uint32_t local_port, uint32_t peer_port)
{
	for (struct vsock_conn *c = vs->conns; c; c = c->next)
		if (c->local_port == local_port && c->peer_port == peer_port && c->state != CONN_HANDSHAKE)
			return c;
	return NULL;
}

static struct vsock_conn *conn_by_id(struct virtio_vsock *vs, uint64_t id)
{
	for (struct vsock_conn *c = vs->conns; c; c = c->next)
		if (c->id == id)
			return c;
	return NULL;
}

/*
 * Re-arms the host socket for what the connection can use next (see the top of the file). With nothing to wait
 * for it stays disarmed: armed, a hung-up socket would report EPOLLHUP over and over while its data waits for
 * credit.
 */
static void conn_arm(struct virtio_vsock *vs, struct vsock_conn *c)
{
	struct epoll_event ev = { .events = EPOLLONESHOT, .data.u64 = c->id };

	if (!c->readable && !c->host_eof && c->state != CONN_REQUESTED)
		ev.events |= EPOLLIN;
	if (c->out_len)
		ev.events |= EPOLLOUT;
	if (ev.events != EPOLLONESHOT)
		epoll_ctl(vs->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev);
}

static void conn_free(struct virtio_vsock *vs, struct vsock_conn *c)
{
	for (struct vsock_conn **p = &vs->conns; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	epoll_ctl(vs->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c->out);
	free(c);
	vs->nr_conns--;
}

static struct vsock_conn *conn_new(struct virtio_vsock *vs, int fd, enum conn_state state)
{
	struct vsock_conn *c;
	struct epoll_event ev = { .events = EPOLLONESHOT, .data.u64 = vs->next_id };

	if (vs->nr_conns >= VSOCK_MAX_CONNS || !(c = calloc(1, sizeof(*c))))
		return NULL;
	c->id = vs->next_id++;
	c->fd = fd;
	c->state = state;
	if (epoll_ctl(vs->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		free(c);
		return NULL;
	}
	c->next = vs->conns;
	vs->conns = c;
	vs->nr_conns++;
	return c;
}

static uint32_t host_port_alloc(struct virtio_vsock *vs)
{
	for (;;) {
		uint32_t port = vs->next_host_port++;
		int used = 0;

		if (vs->next_host_port < VSOCK_HOST_PORT_BASE)
			vs->next_host_port = VSOCK_HOST_PORT_BASE;
		for (struct vsock_conn *c = vs->conns; c && !used; c = c->next)
			used = c->local_port == port && c->state != CONN_HANDSHAKE;
		if (!used)
			return port;
	}
}

/* Queues a control packet for the guest; the oldest are kept when the ring is full (it is sized for the worst). */
static void ctl_push(struct virtio_vsock *vs, uint32_t local_port, uint32_t peer_port, uint16_t op, uint32_t flags)
{
	TRACE("ctl_push op %u %u->%u len %u", op, local_port, peer_port, vs->ctl_len);
	if (vs->ctl_len == vs->ctl_cap)
		return;
	vs->ctl[(vs->ctl_head + vs->ctl_len++) % vs->ctl_cap] =
		(struct vsock_ctl){ .local_port = local_port, .peer_port = peer_port, .op = op, .flags = flags };
}

static void conn_reset(struct virtio_vsock *vs, struct vsock_conn *c)
{
	ctl_push(vs, c->local_port, c->peer_port, VSOCK_OP_RST, 0);
	conn_free(vs, c);
}

static int queue_has_buffer(const struct virtq *q, struct guest_mem *mem)
{
	const uint8_t *avail;

	if (!q->ready || q->broken || !q->num || !(avail = guest_mem_ptr(mem, q->avail, 4)))
		return 0;
	return __atomic_load_n((const uint16_t *)(const void *)(avail + 2), __ATOMIC_ACQUIRE) != q->last_avail;
}

static int device_live(const struct virtio_mmio *t)
{
	return (t->status & VIRTIO_STATUS_DRIVER_OK) && !(t->status & VIRTIO_STATUS_NEEDS_RESET);
}

static uint32_t peer_credit(const struct vsock_conn *c)
{
	uint32_t in_flight = c->rx_cnt - c->peer_fwd_cnt;

	return in_flight >= c->peer_buf_alloc ? 0 : c->peer_buf_alloc - in_flight;
}

/* Fills one rx chain with a header and `len` bytes of `data`; -1 when the queue broke or the chain is too small. */
static int rx_put(struct virtio_vsock *vs, struct virtq_chain *ch, const struct vsock_hdr *h, const void *data,
		  uint32_t len)
{
	struct virtio_mmio *t = vs->t;

	if (virtq_chain_write(ch, t->mem, 0, h, sizeof(*h)) != sizeof(*h) ||
	    virtq_chain_write(ch, t->mem, sizeof(*h), data, len) != len)
		return -1;
	return virtq_push(&t->q[VSOCK_RX_QUEUE], t->mem, ch->head, (uint32_t)sizeof(*h) + len);
}

static struct vsock_hdr header(const struct virtio_vsock *vs, const struct vsock_conn *c, uint32_t local_port,
			       uint32_t peer_port, uint16_t op, uint32_t flags, uint32_t len)
{
	return (struct vsock_hdr){
		.src_cid = VSOCK_HOST_CID,
		.dst_cid = vs->guest_cid,
		.src_port = local_port,
		.dst_port = peer_port,
		.len = len,
		.type = VSOCK_TYPE_STREAM,
		.op = op,
		.flags = flags,
		.buf_alloc = c ? VSOCK_BUF_ALLOC : 0,
		.fwd_cnt = c ? c->fwd_cnt : 0,
	};
}

/*
 * What connection `c`'s host socket has for the guest: 1 data (or its end) is there, 0 nothing yet (the socket is
 * re-armed), -1 the socket failed (the connection was reset).
 */
static int host_has_data(struct virtio_vsock *vs, struct vsock_conn *c)
{
	char byte;
	ssize_t n = recv(c->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);

	if (n >= 0)
		return 1;
	if (errno == EAGAIN || errno == EINTR) {
		c->readable = 0;
		conn_arm(vs, c);
		return 0;
	}
	conn_reset(vs, c);
	return -1;
}

/* Sends `ch` (an rx chain already taken) what waits on `c`'s host socket: data, or SHUTDOWN at its end. */
static int rx_data(struct virtio_vsock *vs, struct vsock_conn *c, struct virtq_chain *ch)
{
	static __thread uint8_t buf[READ_CHUNK];
	uint64_t room = ch->in_len > VSOCK_HDR_LEN ? ch->in_len - VSOCK_HDR_LEN : 0;
	uint32_t want = peer_credit(c);
	struct vsock_hdr h;
	ssize_t n;

	if (want > room)
		want = (uint32_t)room;
	if (want > sizeof(buf))
		want = sizeof(buf);
	n = want ? recv(c->fd, buf, want, MSG_DONTWAIT) : -1;
	if (n > 0) {
		h = header(vs, c, c->local_port, c->peer_port, VSOCK_OP_RW, 0, (uint32_t)n);
		c->rx_cnt += (uint32_t)n;
	} else if (n == 0) {	/* the host side sends no more; it may still read */
		c->readable = 0;
		c->host_eof = 1;
		h = header(vs, c, c->local_port, c->peer_port, VSOCK_OP_SHUTDOWN, VSOCK_SHUTDOWN_SEND, 0);
	} else {		/* a chain with no room for data, or the peek lied: an empty credit update */
		h = header(vs, c, c->local_port, c->peer_port, VSOCK_OP_CREDIT_UPDATE, 0, 0);
	}
	c->fwd_cnt_told = c->fwd_cnt;
	return rx_put(vs, ch, &h, buf, n > 0 ? (uint32_t)n : 0);
}

/* One control packet for the guest, into an rx chain already taken. */
static int rx_control(struct virtio_vsock *vs, struct virtq_chain *ch)
{
	struct vsock_ctl *k = &vs->ctl[vs->ctl_head];
	struct vsock_conn *c = conn_find(vs, k->local_port, k->peer_port);
	struct vsock_hdr h = header(vs, c, k->local_port, k->peer_port, k->op, k->flags, 0);

	vs->ctl_head = (vs->ctl_head + 1) % vs->ctl_cap;
	vs->ctl_len--;
	if (c)
		c->fwd_cnt_told = c->fwd_cnt;
	return rx_put(vs, ch, &h, NULL, 0);
}

/* One round over the connections: data for each that has some, credit and an rx buffer. -1 the queue broke. */
static int rx_round(struct virtio_vsock *vs, int *delivered)
{
	struct virtio_mmio *t = vs->t;
	struct virtq *rxq = &t->q[VSOCK_RX_QUEUE];
	struct virtq_chain *ch = &(struct virtq_chain){ 0 };
	const char *why = NULL;
	int sent = 0;

	for (struct vsock_conn *c = vs->conns, *next; c; c = next) {
		next = c->next;
		if (c->state != CONN_ESTABLISHED || !c->readable || !peer_credit(c))
			continue;
		if (!queue_has_buffer(rxq, t->mem))
			break;
		if (host_has_data(vs, c) <= 0)	/* nothing after all (re-armed), or reset */
			continue;
		if (virtq_pop(rxq, t->mem, ch, &why) <= 0 || rx_data(vs, c, ch) < 0)
			return -1;
		*delivered = sent = 1;
	}
	return sent;
}

/*
 * Gives the guest what waits for it: the TRANSPORT_RESET event, control packets, then data from host sockets, as
 * far as buffers and credit go. Raises the interrupt once if anything was delivered. Lock held.
 */
static void deliver_locked(struct virtio_vsock *vs)
{
	struct virtio_mmio *t = vs->t;
	struct virtq *rxq, *evq, *bad;
	struct virtq_chain *ch = &(struct virtq_chain){ 0 };
	const char *why = NULL;
	int delivered = 0, broke = 0, sent;

	if (!t || !device_live(t)) {
		TRACE("deliver: device not live (status %#x)", t ? t->status : 0);
		return;
	}
	rxq = &t->q[VSOCK_RX_QUEUE];
	evq = &t->q[VSOCK_EVENT_QUEUE];
	TRACE("deliver: reset %d evq %d ctl %u rxq %d (ready %d broken %d last_avail %u)", vs->reset_event,
	      queue_has_buffer(evq, t->mem), vs->ctl_len, queue_has_buffer(rxq, t->mem), rxq->ready, rxq->broken,
	      rxq->last_avail);
	if (vs->reset_event && queue_has_buffer(evq, t->mem)) {
		uint32_t id = VSOCK_EVENT_TRANSPORT_RESET;

		vs->reset_event = 0;
		vs->reset_unacked = 1;
		broke = virtq_pop(evq, t->mem, ch, &why) <= 0 ||
			virtq_chain_write(ch, t->mem, 0, &id, sizeof(id)) != sizeof(id) ||
			virtq_push(evq, t->mem, ch->head, sizeof(id)) < 0;
		delivered = 1;
	}
	bad = broke ? evq : rxq;	/* the queue whose chain broke a rule: nothing goes to rx after a broken evq */
	/*
	 * Nothing goes to the guest until it has handled the reset (it refills and kicks the event queue after
	 * resetting its sockets): a connection requested before that would be reset with the old ones, and the host
	 * would never hear of it.
	 */
	if (!vs->reset_event && !vs->reset_unacked)
		do {
			while (!broke && vs->ctl_len && queue_has_buffer(rxq, t->mem)) {
				broke = virtq_pop(rxq, t->mem, ch, &why) <= 0 || rx_control(vs, ch) < 0;
				delivered = 1;
			}
			sent = broke ? 0 : rx_round(vs, &delivered);
			broke |= sent < 0;
		} while (sent > 0 || (!broke && vs->ctl_len && queue_has_buffer(rxq, t->mem)));
	if (broke) {		/* a ring outside guest RAM, or a chain too small for a header or an event */
		bad->broken = 1;
		t->status |= VIRTIO_STATUS_NEEDS_RESET;
		t->int_status |= VIRTIO_INT_CONFIG;
		delivered = 1;
	}
	if (delivered) {
		t->int_status |= VIRTIO_INT_USED;
		if (t->raise_irq)
			t->raise_irq(t->irq_opaque);
	}
}

/* Writes what waits in `c->out` to the host socket. -1 when the host side is gone. */
static int flush_out(struct vsock_conn *c)
{
	while (c->out_len) {
		ssize_t n = send(c->fd, c->out, c->out_len, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0)
			return -1;
		memmove(c->out, c->out + n, c->out_len - (uint32_t)n);
		c->out_len -= (uint32_t)n;
		c->fwd_cnt += (uint32_t)n;
	}
	if (c->shut_write)
		shutdown(c->fd, SHUT_WR);
	return 0;
}

/* After bytes were forwarded: tell the guest its credit grew when it has used a good part of what it had. */
static void maybe_credit_update(struct virtio_vsock *vs, struct vsock_conn *c)
{
	if (c->fwd_cnt - c->fwd_cnt_told >= VSOCK_BUF_ALLOC / 4) {
		c->fwd_cnt_told = c->fwd_cnt;
		ctl_push(vs, c->local_port, c->peer_port, VSOCK_OP_CREDIT_UPDATE, 0);
	}
}

/* A guest connect(2) to the host: connect to `<uds_path>_<port>` and answer RESPONSE, or RST if nothing listens. */
static void guest_connect(struct virtio_vsock *vs, const struct vsock_hdr *h)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct vsock_conn *c;
	int fd;

	if ((size_t)snprintf(addr.sun_path, sizeof(addr.sun_path), "%s_%u", vs->uds_path, h->dst_port) >=
	    sizeof(addr.sun_path))
		goto refuse;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto refuse;
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || !(c = conn_new(vs, fd, CONN_ESTABLISHED))) {
		close(fd);
		goto refuse;
	}
	c->local_port = h->dst_port;
	c->peer_port = h->src_port;
	c->peer_buf_alloc = h->buf_alloc;
	c->peer_fwd_cnt = h->fwd_cnt;
	ctl_push(vs, c->local_port, c->peer_port, VSOCK_OP_RESPONSE, 0);
	conn_arm(vs, c);
	return;
refuse:
	ctl_push(vs, h->dst_port, h->src_port, VSOCK_OP_RST, 0);
}

/* One packet the guest sent (header checked for CIDs and type); `ch` holds its payload after the header. */
static void guest_packet(struct virtio_vsock *vs, const struct vsock_hdr *h, const struct virtq_chain *ch)
{
	struct vsock_conn *c = conn_find(vs, h->dst_port, h->src_port);
	struct virtio_mmio *t = vs->t;

	TRACE("guest packet op %u %u->%u len %u conn %d", h->op, h->src_port, h->dst_port, h->len, c ? (int)c->state : -1);
	if (h->op == VSOCK_OP_REQUEST) {
		if (c)
			conn_reset(vs, c);
		else
			guest_connect(vs, h);
		return;
	}
	if (!c) {
		if (h->op != VSOCK_OP_RST)	/* an unknown connection: tell the guest it is gone */
			ctl_push(vs, h->dst_port, h->src_port, VSOCK_OP_RST, 0);
		return;
	}
	c->peer_buf_alloc = h->buf_alloc;
	c->peer_fwd_cnt = h->fwd_cnt;
	switch (h->op) {
	case VSOCK_OP_RESPONSE: {
		char ok[HANDSHAKE_MAX];
		int n = snprintf(ok, sizeof(ok), "OK %u\n", c->local_port);

		if (c->state != CONN_REQUESTED || send(c->fd, ok, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) != n) {
			conn_reset(vs, c);
			return;
		}
		c->state = CONN_ESTABLISHED;
		break;
	}
	case VSOCK_OP_RW: {
		uint32_t len = h->len;

		if (c->state != CONN_ESTABLISHED || c->shut_write || len > ch->out_len - VSOCK_HDR_LEN ||
		    c->out_len + len > VSOCK_BUF_ALLOC) {	/* more than its credit: the guest broke the protocol */
			vs->bad_packets++;
			conn_reset(vs, c);
			return;
		}
		if (!c->out && !(c->out = malloc(VSOCK_BUF_ALLOC))) {
			conn_reset(vs, c);
			return;
		}
		virtq_chain_read(ch, t->mem, VSOCK_HDR_LEN, c->out + c->out_len, len);
		c->out_len += len;
		if (flush_out(c) < 0) {
			conn_reset(vs, c);
			return;
		}
		maybe_credit_update(vs, c);
		break;
	}
	case VSOCK_OP_SHUTDOWN:
		if ((h->flags & (VSOCK_SHUTDOWN_RCV | VSOCK_SHUTDOWN_SEND)) ==
		    (VSOCK_SHUTDOWN_RCV | VSOCK_SHUTDOWN_SEND)) {
			flush_out(c);	/* best effort: the guest closed its end */
			conn_reset(vs, c);
			return;
		}
		if (h->flags & VSOCK_SHUTDOWN_SEND) {
			c->shut_write = 1;
			if (!c->out_len)
				shutdown(c->fd, SHUT_WR);
		}
		break;
	case VSOCK_OP_RST:
		conn_free(vs, c);
		return;
	case VSOCK_OP_CREDIT_UPDATE:
		break;
	case VSOCK_OP_CREDIT_REQUEST:
		c->fwd_cnt_told = c->fwd_cnt;
		ctl_push(vs, c->local_port, c->peer_port, VSOCK_OP_CREDIT_UPDATE, 0);
		break;
	default:
		vs->bad_packets++;
		conn_reset(vs, c);
		return;
	}
	conn_arm(vs, c);
}

static int vsock_tx(struct virtio_vsock *vs, const char **why)
{
	struct virtio_mmio *t = vs->t;
	struct virtq *q = &t->q[VSOCK_TX_QUEUE];
	struct virtq_chain *ch = &(struct virtq_chain){ 0 };
	int ret, done = 0;

	while ((ret = virtq_pop(q, t->mem, ch, why)) > 0) {
		struct vsock_hdr h = { 0 };

		if (ch->out_len < VSOCK_HDR_LEN || virtq_chain_read(ch, t->mem, 0, &h, sizeof(h)) != sizeof(h) ||
		    h.src_cid != vs->guest_cid || h.dst_cid != VSOCK_HOST_CID || h.type != VSOCK_TYPE_STREAM) {
			TRACE("dropped: src cid %llu dst cid %llu type %u", (unsigned long long)h.src_cid,
			      (unsigned long long)h.dst_cid, h.type);
			vs->bad_packets++;
		}	/* not a packet for us: dropped, as a NIC drops a bad frame */
		else
			guest_packet(vs, &h, ch);
		if (virtq_push(q, t->mem, ch->head, 0) < 0) {
			*why = "the used ring is not in guest RAM";
			return -1;
		}
		done = 1;
	}
	return ret < 0 ? -1 : done;
}

static int vsock_queue_work(struct virtio_mmio *t, int q, const char **why)
{
	struct virtio_vsock *vs = t->dev;
	int ret = 0;

	if (q == VSOCK_TX_QUEUE)
		ret = vsock_tx(vs, why);
	if (q == VSOCK_EVENT_QUEUE && !vs->reset_event)
		vs->reset_unacked = 0;	/* the guest handled the TRANSPORT_RESET and gave its buffer back */
	if (ret >= 0)
		deliver_locked(vs);	/* new rx or event buffers, or answers to what the guest sent */
	return ret;
}

static uint64_t vsock_features(void *dev)
{
	(void)dev;
	return 0;
}

static void vsock_config_read(void *dev, uint32_t off, uint8_t *data, uint32_t len)
{
	struct virtio_vsock *vs = dev;
	uint8_t config[8];

	memcpy(config, &vs->guest_cid, 8);	/* le64 guest_cid */
	memcpy(data, config + off, len);
}

static void drop_all(struct virtio_vsock *vs)
{
	while (vs->conns)
		conn_free(vs, vs->conns);
	vs->ctl_head = vs->ctl_len = 0;
}

static void vsock_reset(void *dev)
{
	struct virtio_vsock *vs = dev;

	drop_all(vs);	/* the driver reset the device: its connections are gone */
	vs->reset_event = vs->reset_unacked = 0;
}

const struct virtio_dev_ops virtio_vsock_ops = {
	.name = "virtio-vsock",
	.device_id = VIRTIO_ID_VSOCK,
	.nr_queues = VSOCK_QUEUES,
	.config_len = 8,
	.features = vsock_features,
	.config_read = vsock_config_read,
	.queue_work = vsock_queue_work,
	.reset = vsock_reset,
};

/*
 * A new host connection: its `CONNECT <port>` line, read a byte at a time so that nothing after the newline (the
 * start of the stream) is taken. A line that is not one closes the connection.
 */
static void host_handshake(struct virtio_vsock *vs, struct vsock_conn *c)
{
	char *end;
	unsigned long port;

	for (;;) {
		char byte;
		ssize_t n = recv(c->fd, &byte, 1, MSG_DONTWAIT);

		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			conn_arm(vs, c);
			return;
		}
		if (n <= 0 || c->line_len == HANDSHAKE_MAX - 1) {
			conn_free(vs, c);
			return;
		}
		if (byte == '\n')
			break;
		c->line[c->line_len++] = byte;
	}
	c->line[c->line_len] = 0;
	if (strncmp(c->line, "CONNECT ", 8) || c->line[8] < '0' || c->line[8] > '9' ||
	    (port = strtoul(c->line + 8, &end, 10)) > UINT32_MAX || *end) {
		conn_free(vs, c);
		return;
	}
	c->peer_port = (uint32_t)port;
	c->local_port = host_port_alloc(vs);
	TRACE("host CONNECT %lu as %u", port, c->local_port);
	c->state = CONN_REQUESTED;
	c->peer_buf_alloc = 0;	/* no credit until the guest's RESPONSE says how much */
	ctl_push(vs, c->local_port, c->peer_port, VSOCK_OP_REQUEST, 0);
	conn_arm(vs, c);
}

static void host_event(struct virtio_vsock *vs, struct vsock_conn *c, uint32_t events)
{
	if (c->state == CONN_HANDSHAKE) {
		host_handshake(vs, c);
		return;
	}
	if ((events & EPOLLOUT) && flush_out(c) < 0) {
		conn_reset(vs, c);
		return;
	}
	if (events & EPOLLOUT)
		maybe_credit_update(vs, c);
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
		c->readable = 1;	/* read (or see the end) when the guest can take it */
	conn_arm(vs, c);
}

static void accept_all(struct virtio_vsock *vs)
{
	for (;;) {
		int fd = accept4(vs->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct vsock_conn *c;

		if (fd < 0)
			return;
		c = conn_new(vs, fd, CONN_HANDSHAKE);
		if (!c) {
			close(fd);	/* too many connections */
			continue;
		}
		conn_arm(vs, c);
	}
}

static void *mux_thread(void *arg)
{
	struct virtio_vsock *vs = arg;

	for (;;) {
		struct epoll_event ev[64];
		int n = epoll_wait(vs->epoll_fd, ev, 64, -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return NULL;
		pthread_mutex_lock(&vs->t->lock);
		for (int i = 0; i < n; i++) {
			struct vsock_conn *c;

			if (ev[i].data.u64 == TAG_STOP) {
				pthread_mutex_unlock(&vs->t->lock);
				return NULL;
			}
			if (ev[i].data.u64 == TAG_LISTEN)
				accept_all(vs);
			else if ((c = conn_by_id(vs, ev[i].data.u64)))
				host_event(vs, c, ev[i].events);
		}
		deliver_locked(vs);
		pthread_mutex_unlock(&vs->t->lock);
	}
}

int virtio_vsock_init(struct virtio_vsock *vs, uint64_t cid, const char *uds_path, struct vm_error *err)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct epoll_event ev = { .events = EPOLLIN };

	*vs = (struct virtio_vsock){ .guest_cid = cid, .listen_fd = -1, .epoll_fd = -1, .stop_fd = -1,
				     .next_id = 2, .next_host_port = VSOCK_HOST_PORT_BASE };
	if (cid < 3 || cid > UINT32_MAX)
		return vm_error_set(err, EINVAL, "vsock guest CID %llu is reserved or too large (3 to 4294967295)",
				    (unsigned long long)cid);
	/* `_<port>` is appended for guest-initiated connections: leave room for the longest. */
	if (strlen(uds_path) + 12 >= sizeof(addr.sun_path))
		return vm_error_set(err, ENAMETOOLONG, "vsock socket path %s is too long (at most %zu bytes)", uds_path,
				    sizeof(addr.sun_path) - 13);
	strcpy(vs->uds_path, uds_path);
	strcpy(addr.sun_path, uds_path);
	vs->ctl_cap = 4 * VSOCK_MAX_CONNS;
	vs->ctl = calloc(vs->ctl_cap, sizeof(*vs->ctl));
	vs->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	vs->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	vs->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (!vs->ctl || vs->epoll_fd < 0 || vs->stop_fd < 0 || vs->listen_fd < 0) {
		int code = errno ? errno : ENOMEM;

		virtio_vsock_exit(vs);
		return vm_error_set(err, code, "cannot set up the vsock device: %s", strerror(code));
	}
	unlink(uds_path);	/* a socket file left by a VM that is gone */
	if (bind(vs->listen_fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(vs->listen_fd, 128) < 0) {
		int code = errno;

		virtio_vsock_exit(vs);
		return vm_error_set(err, code, "cannot listen on vsock socket %s: %s", uds_path, strerror(code));
	}
	ev.data.u64 = TAG_LISTEN;
	epoll_ctl(vs->epoll_fd, EPOLL_CTL_ADD, vs->listen_fd, &ev);
	ev.data.u64 = TAG_STOP;
	epoll_ctl(vs->epoll_fd, EPOLL_CTL_ADD, vs->stop_fd, &ev);
	return 0;
}

int virtio_vsock_start(struct virtio_vsock *vs, struct virtio_mmio *t, struct vm_error *err)
{
	int ret;

	vs->t = t;
	ret = pthread_create(&vs->thread, NULL, mux_thread, vs);
	if (ret)
		return vm_error_set(err, ret, "cannot start the vsock thread: %s", strerror(ret));
	vs->thread_started = 1;
	return 0;
}

void virtio_vsock_exit(struct virtio_vsock *vs)
{
	uint64_t one = 1;

	if (vs->thread_started) {
		if (write(vs->stop_fd, &one, sizeof(one)) != sizeof(one))
			pthread_cancel(vs->thread);
		pthread_join(vs->thread, NULL);
		vs->thread_started = 0;
	}
	while (vs->conns)
		conn_free(vs, vs->conns);
	if (vs->listen_fd >= 0) {
		close(vs->listen_fd);
		unlink(vs->uds_path);
	}
	if (vs->stop_fd >= 0)
		close(vs->stop_fd);
	if (vs->epoll_fd >= 0)
		close(vs->epoll_fd);
	free(vs->ctl);
	vs->ctl = NULL;
	vs->listen_fd = vs->stop_fd = vs->epoll_fd = -1;
}

void virtio_vsock_transport_reset(struct virtio_vsock *vs)
{
	pthread_mutex_lock(&vs->t->lock);
	drop_all(vs);
	vs->reset_event = 1;
	deliver_locked(vs);
	pthread_mutex_unlock(&vs->t->lock);
}

/* ---- state (docs/snapshots.md, "virtio devices") ---- */

void virtio_vsock_state_encode(const struct virtio_vsock_state *s, struct le_writer *w)
{
	virtio_dev_state_encode(&s->dev, w);
	le_put_u64(w, s->guest_cid);
}

const char *virtio_vsock_state_decode(const uint8_t *data, size_t len, struct virtio_vsock_state *s)
{
	struct le_reader r;

	le_reader_init(&r, data, len);
	virtio_dev_state_decode(&r, &s->dev);
	s->guest_cid = le_get_u64(&r);
	if (s->guest_cid < 3 || s->guest_cid > UINT32_MAX)
		le_fail(&r, "the guest's CID is out of range (3 to 2^32 - 1)");
	return le_finish(&r);
}
