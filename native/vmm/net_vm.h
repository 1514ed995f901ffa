/*
 * A VM's network as its host sees it (docs/network.md, "Seen from the host"): the forwards as bound, the
 * refusals, the frame counters. virtio_net_vm.c has it; the binding reads it for `smol port` and the refusal events.
 */
#ifndef SMOL_NET_VM_H
#define SMOL_NET_VM_H

#include "net_slirp.h"

struct vm;
struct vm_error;

struct vm_network {
	struct net_slirp_stats stats;
	struct net_forward forwards[NET_SLIRP_MAX_FORWARDS];
	unsigned nr_forwards;
	struct net_event events[NET_POLICY_EVENTS];	/* the refusals newer than `events_after`, oldest first */
	unsigned nr_events;
};

/* Fills out; -ENODEV (with a message) when the VM has no network device. */
int vm_network(struct vm *vm, uint64_t events_after, struct vm_network *out, struct vm_error *err);

#endif
