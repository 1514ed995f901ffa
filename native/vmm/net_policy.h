/*
 * The network policy (docs/network.md): every Ethernet frame a guest sends is judged here before the user-mode stack
 * (net_slirp.c) sees it, and every DNS answer the stack sends back is read here before the guest sees it. KVM-free
 * and allocation-free, so the unit tests and the fuzzer drive it with plain bytes.
 *
 * The guest's network is libslirp's: the guest 10.0.2.15/24, the gateway 10.0.2.2 (the host's loopback, which the
 * guest calls host.smol.internal), DNS at 10.0.2.3; for IPv6 the prefix fec0::/64 with fec0::2 and fec0::3.
 *
 * What passes:
 *  - ARP, DHCP, and IPv6 neighbour discovery (they never leave the stack);
 *  - DNS (UDP port 53 to 10.0.2.3 or fec0::3) for names the policy allows: with `allow_hosts` or `allow_cidrs` set,
 *    a query for a name no `allow_hosts` entry matches is answered NXDOMAIN here and never forwarded; the A and AAAA
 *    records of answers to allowed names are learned as that entry's addresses. host.smol.internal is answered here
 *    (A 10.0.2.2) when an entry names it, NXDOMAIN otherwise;
 *  - TCP, UDP and ICMP to a destination the rules allow. With neither list set, public addresses are open; with
 *    either, only addresses an `allow_cidrs` entry covers or a name's learned addresses (on the entry's port when it
 *    names one). Link-local (169.254/16, fe80::/10: cloud metadata), private ranges (10/8, 172.16/12, 192.168/16,
 *    100.64/10, fc00::/7), loopback, reserved and the host's own addresses are refused unless an `allow_cidrs` entry
 *    at least as specific as the refused range covers the address; a learned name never unlocks them (DNS
 *    rebinding). The gateway is reachable only as host.smol.internal, only when `allow_hosts` names it, and replies
 *    of the guest's servers behind `ports` forwards pass to it;
 *  - IP fragments: the first must carry the whole transport header and is judged like a packet; a later fragment
 *    passes only to an address some rule allows without a port.
 * Everything else is refused. A refusal is counted per rule and kept as an event (destination, protocol, port,
 * rule, and the name for DNS) in a ring of the last NET_POLICY_EVENTS.
 */
#ifndef SMOL_NET_POLICY_H
#define SMOL_NET_POLICY_H

#include <stddef.h>
#include <stdint.h>

struct vm_error;

#define NET_POLICY_MAX_HOSTS 64		/* allow_hosts entries */
#define NET_POLICY_MAX_CIDRS 64		/* allow_cidrs entries */
#define NET_POLICY_MAX_FORWARDS 64	/* guest ports behind `ports` forwards */
#define NET_POLICY_MAX_HOST_ADDRS 32	/* the host's own addresses */
#define NET_POLICY_MAX_LEARNED 1024	/* addresses learned from DNS answers; the oldest goes first */
#define NET_POLICY_EVENTS 64		/* refusal events kept */
#define NET_POLICY_NAME_MAX 253		/* a DNS name in text form */
#define NET_POLICY_REPLY_MAX 1514	/* a reply frame the policy writes (a DNS answer) */

/* The virtual network, as libslirp is configured with it (net_slirp.c). */
#define NET_GUEST_IP4 0x0a00020fu	/* 10.0.2.15 */
#define NET_GATEWAY_IP4 0x0a000202u	/* 10.0.2.2 */
#define NET_DNS_IP4 0x0a000203u		/* 10.0.2.3 */
#define NET_NETWORK_IP4 0x0a000200u	/* 10.0.2.0/24 */
#define NET_NETMASK_IP4 0xffffff00u
#define NET_HOST_NAME "host.smol.internal"

/* Why a packet was refused; net_rule_name gives the word events and logs carry. */
enum net_rule {
	NET_RULE_MALFORMED,	/* a frame or header that does not parse */
	NET_RULE_PROTOCOL,	/* an EtherType or IP protocol the policy does not pass */
	NET_RULE_LINK_LOCAL,	/* 169.254/16, fe80::/10 */
	NET_RULE_PRIVATE,	/* 10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7, the rest of 10.0.2/24 */
	NET_RULE_HOST,		/* the host itself: loopback, its own addresses, the gateway without host.smol.internal */
	NET_RULE_RESERVED,	/* 0/8, 240/4, broadcast, multicast (other than what the stack answers) */
	NET_RULE_NOT_ALLOWED,	/* a public address (or port) that no allow_cidrs or allow_hosts entry lets through */
	NET_RULE_DNS_NAME,	/* a DNS query or answer for a name allow_hosts does not list */
	NET_RULE_FRAGMENT,	/* a first fragment without its transport header, or a later one to a port-only rule */
	NET_RULE_COUNT
};

const char *net_rule_name(enum net_rule rule);

struct net_addr {
	uint8_t family;		/* 4 or 6 */
	uint8_t bytes[16];	/* IPv4 in the first 4, network order */
};

struct net_cidr {
	struct net_addr addr;
	uint8_t prefix;
};

struct net_host_rule {
	char name[NET_POLICY_NAME_MAX + 1];	/* lower case, without a trailing dot or the "*." of a pattern */
	uint8_t subdomains_only;		/* "*.example.com": example.com's subdomains, not example.com */
	uint16_t port;				/* 0: every port */
};

struct net_event {
	uint64_t seq;		/* 1, 2, ... in the order refused */
	struct net_addr dst;	/* family 0 when the frame had no IP destination */
	uint16_t port;		/* destination port (TCP, UDP), 0 otherwise */
	uint8_t proto;		/* IP protocol number (6 TCP, 17 UDP, 1 ICMP, 58 ICMPv6), 0 when none */
	uint8_t rule;		/* enum net_rule */
	char name[NET_POLICY_NAME_MAX + 1];	/* the DNS name, for NET_RULE_DNS_NAME */
};

struct net_learned {
	struct net_addr addr;
	uint16_t host;		/* index into hosts */
};

struct net_policy {
	struct net_host_rule hosts[NET_POLICY_MAX_HOSTS];
	unsigned n_hosts;
	struct net_cidr cidrs[NET_POLICY_MAX_CIDRS];
	unsigned n_cidrs;
	uint16_t forwards[NET_POLICY_MAX_FORWARDS];	/* guest ports behind `ports` */
	unsigned n_forwards;
	struct net_addr host_addrs[NET_POLICY_MAX_HOST_ADDRS];
	unsigned n_host_addrs;
	struct net_learned learned[NET_POLICY_MAX_LEARNED];
	unsigned n_learned, learned_next;	/* a ring once full */
	uint8_t allow_list;	/* allow_hosts or allow_cidrs was given (host.smol.internal alone counts) */
	uint8_t host_allowed;	/* some allow_hosts entry names host.smol.internal */

	uint64_t refused[NET_RULE_COUNT];	/* refusals counted per rule */
	uint64_t refused_total;
	struct net_event events[NET_POLICY_EVENTS];	/* a ring: the last NET_POLICY_EVENTS refusals */
	uint64_t events_seq;	/* seq of the newest event (0: none yet) */
};

/* An empty policy: no lists, so public addresses are open and everything else is refused. */
void net_policy_init(struct net_policy *p);

/*
 * Adds an allow_hosts entry: "example.org" (and its subdomains), "*.example.com" (subdomains only), either with
 * ":PORT". Returns 0, or -EINVAL with a message naming the entry and what is wrong (-E2BIG when the list is full).
 */
int net_policy_allow_host(struct net_policy *p, const char *entry, struct vm_error *err);

/* Adds an allow_cidrs entry: "203.0.113.0/24", "2001:db8::/32", or a lone address. Same errors. */
int net_policy_allow_cidr(struct net_policy *p, const char *entry, struct vm_error *err);

/* Parses a CIDR (as above) without adding it; 0 or -EINVAL with a message. */
int net_cidr_parse(const char *text, struct net_cidr *out, struct vm_error *err);

/* A guest port behind a `ports` forward: the guest's replies from it to the gateway pass. 0 or -E2BIG. */
int net_policy_forward(struct net_policy *p, uint16_t guest_port);

/* One of the host's own addresses (net_slirp.c adds every interface's). 0 or -E2BIG. */
int net_policy_host_address(struct net_policy *p, const struct net_addr *addr);

enum net_verdict {
	NET_PASS,	/* hand the frame on */
	NET_DROP,	/* drop it (a refusal was counted, unless it was noise such as multicast) */
	NET_REPLY,	/* drop it and send the guest the frame written to `reply` instead (a DNS answer) */
};

/*
 * Judges a frame the guest sent. For NET_REPLY the answer frame is written to reply (NET_POLICY_REPLY_MAX bytes)
 * and its length to *reply_len.
 */
enum net_verdict net_policy_guest_frame(struct net_policy *p, const uint8_t *frame, size_t len, uint8_t *reply,
					size_t *reply_len);

/*
 * Reads a frame the stack sends the guest: DNS answers for names not allowed are dropped (NET_DROP), those for
 * allowed names teach the policy their addresses. Everything else passes.
 */
enum net_verdict net_policy_stack_frame(struct net_policy *p, const uint8_t *frame, size_t len);

/* Copies the events newer than `after` (oldest first, at most max) into out; returns how many. */
unsigned net_policy_events(const struct net_policy *p, uint64_t after, struct net_event *out, unsigned max);

/* "10.0.0.1", "2001:db8::1": into buf (at least 46 bytes). */
void net_addr_format(const struct net_addr *a, char *buf, size_t size);

#endif
