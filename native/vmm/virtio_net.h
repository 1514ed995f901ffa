/*
 * virtio-net (virtio 1.2, 5.1) over the libslirp backend (net_slirp.h; docs/network.md): a receive and a transmit
 * queue, a MAC address, link status, no control queue. KVM-free like the other devices' protocol code, so the unit
 * tests drive it through its registers.
 *
 * Offloads: none offered. Without VIRTIO_NET_F_CSUM the guest computes every checksum itself, as libslirp wants
 * (it checks them and has no partial-checksum path); without VIRTIO_NET_F_GUEST_CSUM the guest checks what
 * libslirp sends, which always carries full checksums; without TSO/UFO and MRG_RXBUF every frame fits one buffer
 * of an MTU of 1500 (libslirp segments to its MTU itself). The header is VERSION_1's 12 bytes.
 *
 * Transmit: each chain is a header and one frame; the frame goes to the backend's transmit queue, or, when that is
 * full, is dropped and counted (the guest's TCP retransmits), so a guest that floods frames is bounded there.
 * Receive: the backend's frames go into the receive queue's buffers, one frame per buffer, while the guest offers
 * buffers; the rest wait in the backend's bounded queue.
 */
#ifndef SMOL_VIRTIO_NET_H
#define SMOL_VIRTIO_NET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "virtio.h"

struct le_reader;
struct le_writer;

#define VIRTIO_ID_NET 1
#define VIRTIO_NET_RX 0
#define VIRTIO_NET_TX 1
#define VIRTIO_NET_F_MAC 5
#define VIRTIO_NET_F_STATUS 16
#define VIRTIO_NET_S_LINK_UP 1
#define VIRTIO_NET_HDR_LEN 12		/* virtio_net_hdr with num_buffers (VERSION_1) */
#define VIRTIO_NET_CONFIG_LEN 8		/* mac[6], status */
#define VIRTIO_NET_FRAME_MAX 1514	/* MTU 1500 and the Ethernet header */

/* The other end of the wire (net_slirp.c in a VM): send returns 0 or -EAGAIN (full); recv a length or -EAGAIN. */
struct virtio_net_backend {
	int (*send)(void *opaque, const void *frame, size_t len);
	ssize_t (*recv)(void *opaque, void *buf, size_t size);
	void *opaque;
};

struct virtio_net {
	uint8_t mac[6];
	const struct virtio_net_backend *backend;	/* NULL: frames go nowhere (counted as dropped) */
	uint64_t tx_frames, tx_dropped, rx_frames, bad_frames;
	struct virtq_chain chain;
	uint8_t buf[VIRTIO_NET_HDR_LEN + VIRTIO_NET_FRAME_MAX + 64];
};

extern const struct virtio_dev_ops virtio_net_ops;

/* A fresh locally administered unicast MAC (52:54:xx:xx:xx:xx style, from getrandom). */
void virtio_net_random_mac(uint8_t mac[6]);

/*
 * Its state: the virtio device's, then the MAC. The backend is a host resource, never saved: a restore or a fork
 * starts a fresh one (docs/network.md, "Snapshots").
 */
#define VIRTIO_NET_STATE_LEN (VIRTIO_DEV_STATE_LEN + 6)
struct virtio_net_state {
	struct virtio_dev_state dev;
	uint8_t mac[6];
};

void virtio_net_state_encode(const struct virtio_net_state *s, struct le_writer *w);
/* Reads untrusted bytes: what is wrong, or NULL. */
const char *virtio_net_state_decode(const uint8_t *data, size_t len, struct virtio_net_state *s);

#endif
