/*
 * The network backend (docs/network.md): one libslirp stack per VM on a thread of its own, with the policy
 * (net_policy.h) in front of it. A device hands it the frames the guest sends (net_slirp_send) and takes the frames
 * for the guest (net_slirp_recv) when rx_fd (an eventfd) says some wait. Both queues are bounded: a full transmit
 * queue refuses (-EAGAIN, the device leaves the frame in its ring), a full receive queue drops the stack's frame
 * (TCP retransmits, as libslirp expects). New connections past NET_SLIRP_MAX_SOCKETS host sockets are refused.
 *
 * `ports` forwards listen on 127.0.0.1 only: a forward with host port 0 gets a free one (net_slirp_forwards says
 * which); a host port in use fails the start with a message naming the port and, where /proc tells, who holds it.
 * No root is needed: libslirp uses ordinary sockets (and ICMP datagram sockets, where the host allows them, for
 * ping).
 */
#ifndef SMOL_NET_SLIRP_H
#define SMOL_NET_SLIRP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "net_policy.h"

struct vm_error;
struct net_slirp;

#define NET_SLIRP_QUEUE 256		/* frames in each direction */
#define NET_SLIRP_FRAME_MAX 1536	/* an Ethernet frame of a 1500-byte MTU, with room */
#define NET_SLIRP_MAX_SOCKETS 512	/* host sockets the stack may hold (connections, UDP flows, listeners) */
#define NET_SLIRP_MAX_FORWARDS 64

struct net_forward {
	uint16_t host_port;	/* on 127.0.0.1; 0: a free one, chosen at start */
	uint16_t guest_port;
};

struct net_slirp_config {
	const struct net_policy *policy;	/* copied; its counters start from there */
	struct net_forward forwards[NET_SLIRP_MAX_FORWARDS];
	unsigned n_forwards;
	/* Optional: called on the backend's thread, with its lock held, whenever frames for the guest start waiting (as
	 * rx_fd is written); it must not call back into the backend (vdev_kick only writes an eventfd). */
	void (*rx_ready)(void *opaque);
	void *rx_opaque;
};

struct net_slirp_stats {
	uint64_t tx_frames, rx_frames;		/* handed to the stack, handed to the guest */
	uint64_t tx_refused;			/* frames the policy refused (events: net_slirp_events) */
	uint64_t rx_dropped;			/* frames for the guest dropped on a full receive queue */
	uint64_t conns_refused;			/* new connections refused at NET_SLIRP_MAX_SOCKETS */
	uint64_t refused[NET_RULE_COUNT];	/* the policy's counters */
	unsigned sockets;			/* host sockets the stack holds now */
};

/*
 * The network's host resource (docs/network.md, "Host resource"): a text file the engine writes for each VM, one
 * setting a line, `#` starting a comment:
 *	allow_host pypi.org          an allow_hosts entry (net_policy_allow_host)
 *	allow_cidr 203.0.113.0/24    an allow_cidrs entry
 *	forward 8080 80              a `ports` forward: host port (0: a free one), guest port
 * Fills cfg (its policy pointing at `policy`). Returns 0, or -errno with a message naming the file and line.
 */
int net_slirp_config_parse(const char *text, const char *name, struct net_slirp_config *cfg,
			   struct net_policy *policy, struct vm_error *err);
int net_slirp_config_load(const char *path, struct net_slirp_config *cfg, struct net_policy *policy,
			  struct vm_error *err);

/* net_slirp_send and net_slirp_recv in the shape of virtio-net's backend (virtio_net.h), opaque the net_slirp. */
int net_slirp_backend_send(void *ns, const void *frame, size_t len);
ssize_t net_slirp_backend_recv(void *ns, void *buf, size_t size);

/* Starts the stack and its thread. Returns 0, or -errno with a message (a forward's port in use names it). */
int net_slirp_start(struct net_slirp **out, const struct net_slirp_config *cfg, struct vm_error *err);

/* Stops the thread and frees everything; every host socket of the stack closes (connections reset). */
void net_slirp_stop(struct net_slirp *ns);

/* Queues a frame from the guest. 0, -EAGAIN when the transmit queue is full, -EMSGSIZE when len is too long. */
int net_slirp_send(struct net_slirp *ns, const void *frame, size_t len);

/*
 * Takes the next frame for the guest into buf (NET_SLIRP_FRAME_MAX bytes); returns its length, or -EAGAIN when
 * none waits. Reading rx_fd's counter is the caller's business (it is written whenever the queue turns non-empty).
 */
ssize_t net_slirp_recv(struct net_slirp *ns, void *buf, size_t size);

/* The eventfd that becomes readable when frames for the guest wait. */
int net_slirp_rx_fd(const struct net_slirp *ns);

/* The forwards with their host ports as bound (a lone guest port's chosen one); returns how many. */
unsigned net_slirp_forwards(const struct net_slirp *ns, struct net_forward *out, unsigned max);

/* Refusal events newer than `after`, oldest first (net_policy_events). */
unsigned net_slirp_events(struct net_slirp *ns, uint64_t after, struct net_event *out, unsigned max);

void net_slirp_stats(struct net_slirp *ns, struct net_slirp_stats *out);

/*
 * Who holds TCP port `port` on 127.0.0.1 (or any address), from /proc/net/tcp{,6} and /proc/<pid>/fd: writes
 * "pid 123 (python3)" into buf and returns 0, or -ENOENT when it cannot tell.
 */
int net_port_holder(uint16_t port, char *buf, size_t size);

#endif
