/*
 * The input format of the virtio-vsock fuzzer (fuzz_vsock.c), shared with its seed writer (vsock_seeds.c).
 *
 * The input is a script of what a guest driver and host programs do. It starts with VSOCK_IN_HEAD bytes: the sizes
 * of the rx, tx and event queues (1 << (byte % 7): 1 to 64 entries) and the port of the one host connection every
 * input begins with (le32). Then commands follow, each an opcode byte (taken modulo CMD_COUNT) and its arguments;
 * an input that ends early reads as zeros. Little-endian throughout.
 */
#ifndef SMOL_FUZZ_VSOCK_INPUT_H
#define SMOL_FUZZ_VSOCK_INPUT_H

#define VSOCK_IN_HEAD 7

enum vsock_cmd {
	/*
	 * A packet on the tx queue: shape u8 (TX_*), op u8 (0 to 7 as is, above that a bogus op), src port u8 and
	 * dst port u8 (selectors, fuzz_vsock.c's guest_port and host_port), flags u8, buf_alloc le32, fwd_cnt le32,
	 * payload length le16, two split points u8 (where the chain's descriptors end), and with TX_LEN_LARGER a le32
	 * added to the header's len.
	 */
	CMD_TX,
	CMD_RX,		/* rx buffers: count u8 (1 to 8), length le16, shape u8 (BUF_*) */
	CMD_EVENT,	/* one event buffer: length u8, shape u8 (BUF_*) */
	CMD_NOTIFY,	/* notify queue u8 (3 and up are not queues) */
	CMD_HOST_CONNECT,	/* a host program connects to the VM's socket: port le32, line u8 (0 a good CONNECT) */
	CMD_HOST_WRITE,	/* host connection u8 writes le16 bytes */
	CMD_HOST_READ,	/* host connection u8 reads what it has */
	CMD_HOST_CLOSE,	/* host connection u8: close (how u8 even) or shut its write side (odd) */
	CMD_TRANSPORT_RESET,	/* virtio_vsock_transport_reset, as after a restore or fork */
	CMD_STATUS,	/* write status u8; 0 resets the device and the driver sets it up again */
	CMD_CHAOS,	/* queue u8, what u8, then le16 and 16 bytes: raw writes to a ring (checks of content stop) */
	CMD_CONFIG,	/* read config space: offset u8, length u8 */
	CMD_COUNT,
};

/* CMD_TX shape bits */
#define TX_DESCS 3		/* readable descriptors: 1 + (shape & 3) % 3 */
#define TX_WRITABLE 4		/* a writable descriptor at the end of the chain */
#define TX_NO_NOTIFY 8		/* queue it; a later notify sends it */
#define TX_BAD_SRC_CID 0x10
#define TX_BAD_DST_CID 0x20	/* both: a wrong type instead */
#define TX_HONEST_FWD 0x40	/* fwd_cnt is what the guest really received on that connection */
#define TX_SHORT 0x80		/* the chain is shorter than a header */
#define TX_LEN_LARGER 0x100	/* not a shape bit: set when the op byte has bit 7 (len = payload + le32) */

/* CMD_RX and CMD_EVENT shape bits */
#define BUF_READONLY 1		/* the (first) descriptor is not device-writable */
#define BUF_TWO 2		/* two descriptors, split at the middle */
#define BUF_NO_NOTIFY 4

#endif
