/*
 * virtio-vsock (virtio 1.2, 5.10) with a host-side Unix-socket multiplexer, as Firecracker documents it
 * (docs/vmm.md, "vsock"):
 *
 *  - host to guest: connect to the VM's socket `uds_path` and send `CONNECT <port>\n`; once the guest accepts,
 *    the device answers `OK <host port>\n` and the connection carries the stream both ways;
 *  - guest to host: a guest connect(2) to CID 2, port P reaches whatever listens on `<uds_path>_<P>`.
 *
 * Flow control is the protocol's own credit: the device gives each connection VSOCK_BUF_ALLOC bytes of buffer for
 * what the guest sends and never sends the guest more than the guest's credit allows, so a stalled reader on either
 * side stalls only its own connection and nothing grows without bound. After a restore or fork the connections of
 * the VM that was captured are gone: the device sends the guest a TRANSPORT_RESET event and the guest drops them.
 *
 * Everything the guest writes is untrusted: headers are checked (CIDs, type, lengths, credit); a connection whose
 * packets break the rules is reset, never trusted.
 */
#ifndef SMOL_VIRTIO_VSOCK_H
#define SMOL_VIRTIO_VSOCK_H

#include <pthread.h>
#include <stdint.h>
#include <sys/un.h>

#include "virtio.h"

struct le_writer;

struct virtio_mmio;
struct vm_error;

#define VIRTIO_ID_VSOCK 19
#define VSOCK_HOST_CID 2
#define VSOCK_RX_QUEUE 0
#define VSOCK_TX_QUEUE 1
#define VSOCK_EVENT_QUEUE 2
#define VSOCK_QUEUES 3

#define VSOCK_TYPE_STREAM 1
#define VSOCK_OP_REQUEST 1
#define VSOCK_OP_RESPONSE 2
#define VSOCK_OP_RST 3
#define VSOCK_OP_SHUTDOWN 4
#define VSOCK_OP_RW 5
#define VSOCK_OP_CREDIT_UPDATE 6
#define VSOCK_OP_CREDIT_REQUEST 7
#define VSOCK_SHUTDOWN_RCV 1
#define VSOCK_SHUTDOWN_SEND 2
#define VSOCK_EVENT_TRANSPORT_RESET 0

#define VSOCK_HDR_LEN 44
#define VSOCK_BUF_ALLOC (256u * 1024)	/* per connection: what the guest may send before we forward it */
#define VSOCK_MAX_CONNS 1024
#define VSOCK_HOST_PORT_BASE (1u << 30)	/* ports the device gives host-initiated connections */

struct vsock_hdr {
	uint64_t src_cid, dst_cid;
	uint32_t src_port, dst_port, len;
	uint16_t type, op;
	uint32_t flags, buf_alloc, fwd_cnt;
} __attribute__((packed));

_Static_assert(sizeof(struct vsock_hdr) == VSOCK_HDR_LEN, "the vsock header is 44 bytes");

struct vsock_conn;
struct vsock_ctl;

struct virtio_vsock {
	uint64_t guest_cid;
	char uds_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct virtio_mmio *t;		/* set by virtio_vsock_start; its lock guards everything below */
	int listen_fd, epoll_fd, stop_fd;
	pthread_t thread;
	int thread_started;
	struct vsock_conn *conns;
	unsigned nr_conns;
	uint64_t next_id;		/* epoll tag of the next connection (0 and 1 are the listener and stop_fd) */
	uint32_t next_host_port;
	struct vsock_ctl *ctl;		/* control packets waiting for an rx buffer, a ring */
	unsigned ctl_head, ctl_len, ctl_cap;
	int reset_event;		/* a TRANSPORT_RESET event waits for an event-queue buffer */
	int reset_unacked;		/* the guest has not yet handed its event buffer back: rx waits (below) */
	uint64_t bad_packets;		/* packets from the guest that broke a rule (the connection was reset) */
};

/*
 * Prepares the device for guest `cid` (3 or more) and listens on `uds_path` (a stale socket file there is
 * replaced). -1 with `err` set when the path is too long or the socket cannot be made.
 */
int virtio_vsock_init(struct virtio_vsock *vs, uint64_t cid, const char *uds_path, struct vm_error *err);
/* Starts the multiplexer thread; `t` is the transport the device is attached to. */
int virtio_vsock_start(struct virtio_vsock *vs, struct virtio_mmio *t, struct vm_error *err);
/* Stops the thread, closes every connection and the listener, and removes the socket file. */
void virtio_vsock_exit(struct virtio_vsock *vs);
/*
 * After a restore or fork: connections of the captured VM do not exist here, so the guest is told to drop its own
 * with a TRANSPORT_RESET event (sent as soon as it has posted an event buffer). Takes the transport's lock.
 */
void virtio_vsock_transport_reset(struct virtio_vsock *vs);

extern const struct virtio_dev_ops virtio_vsock_ops;

/*
 * Its state: the device's and the guest's CID (3 to 2^32 - 1). Connections are not state: a restored or forked VM
 * tells the guest they were reset. Decoding checks untrusted bytes and returns what is wrong, or NULL.
 */
struct virtio_vsock_state {
	struct virtio_dev_state dev;
	uint64_t guest_cid;
};

#define VIRTIO_VSOCK_STATE_LEN (VIRTIO_DEV_STATE_LEN + 8)
void virtio_vsock_state_encode(const struct virtio_vsock_state *s, struct le_writer *w);
const char *virtio_vsock_state_decode(const uint8_t *data, size_t len, struct virtio_vsock_state *s);

#endif
