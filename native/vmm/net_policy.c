/*
 * The per-packet network policy (net_policy.h, docs/network.md). Every length and offset here comes from the guest
 * (or from the outside, for DNS answers) and is checked before it is read.
 */
#define _GNU_SOURCE
#include "net_policy.h"

#include "error.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ETH_HLEN 14
#define ETHERTYPE_IP4 0x0800
#define ETHERTYPE_ARP 0x0806
#define ETHERTYPE_IP6 0x86dd
#define PROTO_ICMP 1
#define PROTO_TCP 6
#define PROTO_UDP 17
#define PROTO_ICMP6 58
#define IP6_HOPOPTS 0
#define IP6_FRAGMENT 44
#define IP6_DSTOPTS 60
#define TCP_ACK 0x10
#define TCP_RST 0x04
#define TCP_SYN 0x02
#define DNS_PORT 53
#define DHCP_SERVER_PORT 67
#define DNS_RCODE_NXDOMAIN 3
#define DNS_TYPE_A 1
#define DNS_TYPE_AAAA 28
#define DNS_MAX_LABELS 128	/* a name of 253 characters has at most 127 labels */
#define DNS_MAX_POINTERS 16	/* compression pointers followed in one name */

static const char *const rule_names[NET_RULE_COUNT] = {
	[NET_RULE_MALFORMED] = "malformed",
	[NET_RULE_PROTOCOL] = "protocol",
	[NET_RULE_LINK_LOCAL] = "link-local",
	[NET_RULE_PRIVATE] = "private",
	[NET_RULE_HOST] = "host",
	[NET_RULE_RESERVED] = "reserved",
	[NET_RULE_NOT_ALLOWED] = "not-allowed",
	[NET_RULE_DNS_NAME] = "dns-name",
	[NET_RULE_FRAGMENT] = "fragment",
};

const char *net_rule_name(enum net_rule rule)
{
	return (unsigned)rule < NET_RULE_COUNT ? rule_names[rule] : "unknown";
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void net_policy_init(struct net_policy *p)
{
	memset(p, 0, sizeof(*p));
}

/* ---- configuration ---- */

static int hostname_check(const char *name, size_t len)
{
	size_t label = 0;

	if (len == 0 || len > NET_POLICY_NAME_MAX)
		return 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];

		if (c == '.') {
			if (label == 0)
				return 0;
			label = 0;
		} else if (isalnum(c) || c == '-' || c == '_') {
			if (++label > 63 || (c == '-' && label == 1))
				return 0;
		} else {
			return 0;
		}
	}
	return label > 0;
}

int net_policy_allow_host(struct net_policy *p, const char *entry, struct vm_error *err)
{
	struct net_host_rule r = { 0 };
	const char *name = entry, *colon = strrchr(entry, ':');
	size_t len;

	if (p->n_hosts >= NET_POLICY_MAX_HOSTS)
		return vm_error_set(err, E2BIG, "allow_hosts: more than %d entries", NET_POLICY_MAX_HOSTS);
	if (colon) {
		char *end;
		long port;

		errno = 0;
		port = strtol(colon + 1, &end, 10);
		if (!colon[1] || *end || errno || port < 1 || port > 65535 || !isdigit((unsigned char)colon[1]))
			return vm_error_set(err, EINVAL, "allow_hosts entry \"%s\": the port after ':' must be 1 to 65535",
					    entry);
		r.port = (uint16_t)port;
	}
	len = colon ? (size_t)(colon - entry) : strlen(entry);
	if (len >= 2 && name[0] == '*' && name[1] == '.') {
		r.subdomains_only = 1;
		name += 2;
		len -= 2;
	}
	if (len && name[len - 1] == '.')
		len--;
	if (!hostname_check(name, len))
		return vm_error_set(err, EINVAL,
				    "allow_hosts entry \"%s\": expected a host name (\"example.org\"), a pattern "
				    "(\"*.example.org\"), either with \":PORT\"", entry);
	for (size_t i = 0; i < len; i++)
		r.name[i] = (char)tolower((unsigned char)name[i]);
	p->hosts[p->n_hosts++] = r;
	p->allow_list = 1;
	if (!r.subdomains_only && strcmp(r.name, NET_HOST_NAME) == 0)
		p->host_allowed = 1;
	return 0;
}

int net_cidr_parse(const char *text, struct net_cidr *out, struct vm_error *err)
{
	char addr[64];
	const char *slash = strchr(text, '/');
	size_t len = slash ? (size_t)(slash - text) : strlen(text);
	struct net_cidr c = { 0 };
	unsigned max;

	if (len == 0 || len >= sizeof(addr))
		goto bad;
	memcpy(addr, text, len);
	addr[len] = 0;
	if (inet_pton(AF_INET, addr, c.addr.bytes) == 1) {
		c.addr.family = 4;
		max = 32;
	} else if (inet_pton(AF_INET6, addr, c.addr.bytes) == 1) {
		c.addr.family = 6;
		max = 128;
	} else {
		goto bad;
	}
	c.prefix = (uint8_t)max;
	if (slash) {
		char *end;
		long n;

		errno = 0;
		n = strtol(slash + 1, &end, 10);
		if (!isdigit((unsigned char)slash[1]) || *end || errno || n < 0 || n > (long)max)
			return vm_error_set(err, EINVAL, "allow_cidrs entry \"%s\": the prefix length must be 0 to %u",
					    text, max);
		c.prefix = (uint8_t)n;
	}
	/* Bits past the prefix must be zero: "10.0.0.1/8" is more likely a typo than a wish. */
	for (unsigned bit = c.prefix; bit < max; bit++) {
		if (c.addr.bytes[bit / 8] & (0x80 >> (bit % 8)))
			return vm_error_set(err, EINVAL,
					    "allow_cidrs entry \"%s\": the address has bits set past the /%u prefix",
					    text, c.prefix);
	}
	*out = c;
	return 0;
bad:
	return vm_error_set(err, EINVAL,
			    "allow_cidrs entry \"%s\": expected an IPv4 or IPv6 address with an optional /PREFIX "
			    "(\"203.0.113.0/24\")", text);
}

int net_policy_allow_cidr(struct net_policy *p, const char *entry, struct vm_error *err)
{
	struct net_cidr c;
	int r;

	if (p->n_cidrs >= NET_POLICY_MAX_CIDRS)
		return vm_error_set(err, E2BIG, "allow_cidrs: more than %d entries", NET_POLICY_MAX_CIDRS);
	r = net_cidr_parse(entry, &c, err);
	if (r < 0)
		return r;
	p->cidrs[p->n_cidrs++] = c;
	p->allow_list = 1;
	return 0;
}

int net_policy_forward(struct net_policy *p, uint16_t guest_port)
{
	for (unsigned i = 0; i < p->n_forwards; i++)
		if (p->forwards[i] == guest_port)
			return 0;
	if (p->n_forwards >= NET_POLICY_MAX_FORWARDS)
		return -E2BIG;
	p->forwards[p->n_forwards++] = guest_port;
	return 0;
}

int net_policy_host_address(struct net_policy *p, const struct net_addr *addr)
{
	if (p->n_host_addrs >= NET_POLICY_MAX_HOST_ADDRS)
		return -E2BIG;
	p->host_addrs[p->n_host_addrs++] = *addr;
	return 0;
}

void net_addr_format(const struct net_addr *a, char *buf, size_t size)
{
	if (a->family != 4 && a->family != 6) {
		snprintf(buf, size, "-");
		return;
	}
	if (!inet_ntop(a->family == 4 ? AF_INET : AF_INET6, a->bytes, buf, (socklen_t)size))
		snprintf(buf, size, "?");
}

/* ---- addresses ---- */

static int prefix_match(const uint8_t *a, const uint8_t *b, unsigned prefix)
{
	unsigned full = prefix / 8, rest = prefix % 8;

	if (memcmp(a, b, full))
		return 0;
	return rest == 0 || ((a[full] ^ b[full]) & (0xff00 >> rest) & 0xff) == 0;
}

static int addr_equal(const struct net_addr *a, const struct net_addr *b)
{
	return a->family == b->family && memcmp(a->bytes, b->bytes, a->family == 4 ? 4 : 16) == 0;
}

/* An allow_cidrs entry covers a at least as specifically as `min_prefix` (0: any entry). */
static int cidr_covers(const struct net_policy *p, const struct net_addr *a, unsigned min_prefix)
{
	for (unsigned i = 0; i < p->n_cidrs; i++) {
		const struct net_cidr *c = &p->cidrs[i];

		if (c->addr.family == a->family && c->prefix >= min_prefix &&
		    prefix_match(c->addr.bytes, a->bytes, c->prefix))
			return 1;
	}
	return 0;
}

struct range {
	uint8_t family, prefix, rule;
	uint8_t bytes[16];
};

/* Ranges refused unless an allow_cidrs entry at least as specific covers the address. */
static const struct range special[] = {
	{ 4, 8, NET_RULE_RESERVED, { 0 } },			/* 0.0.0.0/8 */
	{ 4, 8, NET_RULE_PRIVATE, { 10 } },
	{ 4, 10, NET_RULE_PRIVATE, { 100, 64 } },
	{ 4, 8, NET_RULE_HOST, { 127 } },
	{ 4, 16, NET_RULE_LINK_LOCAL, { 169, 254 } },
	{ 4, 12, NET_RULE_PRIVATE, { 172, 16 } },
	{ 4, 16, NET_RULE_PRIVATE, { 192, 168 } },
	{ 4, 4, NET_RULE_RESERVED, { 224 } },			/* multicast, and 240/4 below */
	{ 4, 4, NET_RULE_RESERVED, { 240 } },
	{ 6, 128, NET_RULE_RESERVED, { 0 } },			/* :: */
	{ 6, 128, NET_RULE_HOST, { [15] = 1 } },		/* ::1 */
	{ 6, 7, NET_RULE_PRIVATE, { 0xfc } },
	{ 6, 10, NET_RULE_LINK_LOCAL, { 0xfe, 0x80 } },
	{ 6, 10, NET_RULE_PRIVATE, { 0xfe, 0xc0 } },		/* site-local, slirp's own fec0::/64 among it */
	{ 6, 8, NET_RULE_RESERVED, { 0xff } },			/* multicast */
};

static const struct range *special_range(const struct net_addr *a)
{
	for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++)
		if (special[i].family == a->family && prefix_match(special[i].bytes, a->bytes, special[i].prefix))
			return &special[i];
	return NULL;
}

/* An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is judged as the IPv4 address. */
static struct net_addr unmap(const struct net_addr *a)
{
	static const uint8_t mapped[12] = { [10] = 0xff, [11] = 0xff };
	struct net_addr v4 = { .family = 4 };

	if (a->family != 6 || memcmp(a->bytes, mapped, 12))
		return *a;
	memcpy(v4.bytes, a->bytes + 12, 4);
	return v4;
}

static int is_ip4(const struct net_addr *a, uint32_t ip)
{
	return a->family == 4 && get32(a->bytes) == ip;
}

/* fec0::N, slirp's IPv6 host (2) and DNS (3). */
static int is_slirp6(const struct net_addr *a, uint8_t n)
{
	static const uint8_t prefix[15] = { 0xfe, 0xc0 };

	return a->family == 6 && memcmp(a->bytes, prefix, 15) == 0 && a->bytes[15] == n;
}

static int name_matches(const struct net_host_rule *r, const char *name)
{
	size_t n = strlen(name), rn = strlen(r->name);

	if (n == rn)
		return !r->subdomains_only && strcmp(name, r->name) == 0;
	return n > rn && name[n - rn - 1] == '.' && strcmp(name + n - rn, r->name) == 0;
}

static int name_allowed(const struct net_policy *p, const char *name)
{
	for (unsigned i = 0; i < p->n_hosts; i++)
		if (name_matches(&p->hosts[i], name))
			return 1;
	return 0;
}

/*
 * Whether a destination address and port pass. port < 0: a later fragment, which passes only where no rule needs
 * a port. Returns -1 to pass, else the rule that refuses.
 */
static int judge_address(const struct net_policy *p, const struct net_addr *dst_in, int port, uint8_t proto)
{
	struct net_addr dst = unmap(dst_in);
	const struct range *r;

	for (unsigned i = 0; i < p->n_host_addrs; i++)
		if (addr_equal(&p->host_addrs[i], &dst))
			return cidr_covers(p, &dst, dst.family == 4 ? 32 : 128) ? -1 : NET_RULE_HOST;
	r = special_range(&dst);
	if (r)
		return cidr_covers(p, &dst, r->prefix) ? -1 : r->rule;
	if (!p->allow_list || cidr_covers(p, &dst, 0))
		return -1;
	for (unsigned i = 0; i < p->n_learned; i++) {
		const struct net_learned *l = &p->learned[i];
		uint16_t want = p->hosts[l->host].port;

		if (!addr_equal(&l->addr, &dst))
			continue;
		if (want == 0)
			return -1;
		if (port < 0)
			continue;
		if ((proto == PROTO_TCP || proto == PROTO_UDP) && want == port)
			return -1;
	}
	return NET_RULE_NOT_ALLOWED;
}

/* host.smol.internal (the gateway) on this port. */
static int host_port_allowed(const struct net_policy *p, int port, uint8_t proto)
{
	for (unsigned i = 0; i < p->n_hosts; i++) {
		const struct net_host_rule *r = &p->hosts[i];

		if (r->subdomains_only || strcmp(r->name, NET_HOST_NAME))
			continue;
		if (r->port == 0 || ((proto == PROTO_TCP || proto == PROTO_UDP) && port == r->port))
			return 1;
	}
	return 0;
}

static int is_forward(const struct net_policy *p, uint16_t port)
{
	for (unsigned i = 0; i < p->n_forwards; i++)
		if (p->forwards[i] == port)
			return 1;
	return 0;
}

/* ---- refusals ---- */

static enum net_verdict refuse(struct net_policy *p, enum net_rule rule, const struct net_addr *dst, int port,
			       uint8_t proto, const char *name)
{
	struct net_event *e = &p->events[p->events_seq % NET_POLICY_EVENTS];

	p->refused[rule]++;
	p->refused_total++;
	memset(e, 0, sizeof(*e));
	e->seq = ++p->events_seq;
	if (dst)
		e->dst = *dst;
	e->port = port > 0 ? (uint16_t)port : 0;
	e->proto = proto;
	e->rule = (uint8_t)rule;
	if (name)
		snprintf(e->name, sizeof(e->name), "%s", name);
	return NET_DROP;
}

unsigned net_policy_events(const struct net_policy *p, uint64_t after, struct net_event *out, unsigned max)
{
	uint64_t first = p->events_seq > NET_POLICY_EVENTS ? p->events_seq - NET_POLICY_EVENTS + 1 : 1;
	unsigned n = 0;

	if (after + 1 > first)
		first = after + 1;
	for (uint64_t seq = first; seq <= p->events_seq && n < max; seq++)
		out[n++] = p->events[(seq - 1) % NET_POLICY_EVENTS];
	return n;
}

/* ---- DNS ---- */

/*
 * Reads the name at msg[*off] into text form (lower case, no trailing dot), following compression pointers when
 * `pointers` allows; *off ends past the name as it sits at *off. Returns 0, or -1 for a name that is malformed, loops
 * or is too long.
 */
static int dns_name(const uint8_t *msg, size_t len, size_t *off, int pointers, char name[NET_POLICY_NAME_MAX + 1])
{
	size_t at = *off, out = 0, end = 0;
	int jumps = 0, labels = 0;

	for (;;) {
		if (at >= len)
			return -1;
		uint8_t l = msg[at];

		if (l == 0) {
			if (!end)
				end = at + 1;
			break;
		}
		if ((l & 0xc0) == 0xc0) {
			if (!pointers || at + 1 >= len || ++jumps > DNS_MAX_POINTERS)
				return -1;
			if (!end)
				end = at + 2;
			at = (size_t)((l & 0x3f) << 8 | msg[at + 1]);
			continue;
		}
		if ((l & 0xc0) || at + 1 + l > len || ++labels > DNS_MAX_LABELS)
			return -1;
		if (out + (out ? 1 : 0) + l > NET_POLICY_NAME_MAX)
			return -1;
		if (out)
			name[out++] = '.';
		for (unsigned i = 0; i < l; i++) {
			unsigned char c = msg[at + 1 + i];

			/* A name with a dot or NUL inside a label would read as another name; refuse it. */
			if (c == '.' || c == 0)
				return -1;
			name[out++] = (char)tolower(c);
		}
		at += 1 + l;
	}
	name[out] = 0;
	*off = end;
	return 0;
}

/* The frame's layers, as parse() finds them. */
struct packet {
	const uint8_t *eth;
	size_t len;
	uint16_t ethertype;
	struct net_addr src, dst;
	size_t ip_off, l4_off, l4_len;	/* l4_len: the transport bytes in this frame (the IP payload) */
	uint8_t proto;
	int fragment;		/* 0: whole; 1: first fragment; 2: a later one */
	uint16_t sport, dport;
	uint8_t tcp_flags;
	uint8_t icmp_type;
};

static uint32_t sum_bytes(uint32_t sum, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		sum += get16(p + i);
	if (n & 1)
		sum += (uint32_t)p[n - 1] << 8;
	return sum;
}

static uint16_t sum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/*
 * Writes the answer to the guest's DNS query q (qlen bytes starting at its header, one question ending at
 * q_end) into reply: the query's frame turned around, with rcode and, when a4 is non-NULL, one A record.
 */
static size_t dns_answer(const struct packet *k, const uint8_t *q, size_t q_end, int rcode, const uint8_t *a4,
			 uint8_t *reply)
{
	size_t ip_len = k->ethertype == ETHERTYPE_IP4 ? 20 : 40;
	size_t dns_len = q_end + (a4 ? 16 : 0);
	size_t udp_len = 8 + dns_len, total = ETH_HLEN + ip_len + udp_len;
	uint8_t *ip = reply + ETH_HLEN, *udp = ip + ip_len, *dns = udp + 8;

	if (total > NET_POLICY_REPLY_MAX)
		return 0;
	memcpy(reply, k->eth + 6, 6);	/* to the guest's MAC, from the one it addressed */
	memcpy(reply + 6, k->eth, 6);
	put16(reply + 12, k->ethertype);
	if (k->ethertype == ETHERTYPE_IP4) {
		memset(ip, 0, 20);
		ip[0] = 0x45;
		put16(ip + 2, (uint16_t)(ip_len + udp_len));
		ip[8] = 64;
		ip[9] = PROTO_UDP;
		memcpy(ip + 12, k->dst.bytes, 4);
		memcpy(ip + 16, k->src.bytes, 4);
		put16(ip + 10, sum_fold(sum_bytes(0, ip, 20)));
	} else {
		memset(ip, 0, 40);
		ip[0] = 0x60;
		put16(ip + 4, (uint16_t)udp_len);
		ip[6] = PROTO_UDP;
		ip[7] = 64;
		memcpy(ip + 8, k->dst.bytes, 16);
		memcpy(ip + 24, k->src.bytes, 16);
	}
	put16(udp, k->dport);
	put16(udp + 2, k->sport);
	put16(udp + 4, (uint16_t)udp_len);
	put16(udp + 6, 0);
	memcpy(dns, q, q_end);
	dns[2] = (uint8_t)(0x80 | (q[2] & 0x79));	/* QR, the query's opcode and RD */
	dns[3] = (uint8_t)(0x80 | rcode);		/* RA */
	put16(dns + 6, a4 ? 1 : 0);
	put16(dns + 8, 0);
	put16(dns + 10, 0);
	if (a4) {
		uint8_t *rr = dns + q_end;

		put16(rr, 0xc00c);	/* the question's name */
		put16(rr + 2, DNS_TYPE_A);
		put16(rr + 4, 1);
		rr[6] = 0, rr[7] = 0, rr[8] = 0, rr[9] = 60;	/* TTL 60 s */
		put16(rr + 10, 4);
		memcpy(rr + 12, a4, 4);
	}
	/* UDP checksum: optional for IPv4, required for IPv6; computed for both. */
	uint32_t sum = 0;

	if (k->ethertype == ETHERTYPE_IP4) {
		sum = sum_bytes(sum, ip + 12, 8);
	} else {
		sum = sum_bytes(sum, ip + 8, 32);
	}
	sum += PROTO_UDP + (uint32_t)udp_len;
	sum = sum_bytes(sum, udp, udp_len);
	uint16_t c = sum_fold(sum);

	put16(udp + 6, c ? c : 0xffff);
	return total;
}

/* A query from the guest to the stack's DNS. */
static enum net_verdict dns_query(struct net_policy *p, const struct packet *k, uint8_t *reply, size_t *reply_len)
{
	const uint8_t *q = k->eth + k->l4_off + 8;
	size_t qlen = k->l4_len - 8, off = 12;
	char name[NET_POLICY_NAME_MAX + 1];
	static const uint8_t gateway[4] = { 10, 0, 2, 2 };

	if (k->fragment || qlen < 12 || get16(q + 4) != 1 || (q[2] & 0x80))
		return refuse(p, NET_RULE_MALFORMED, &k->dst, k->dport, k->proto, NULL);
	if (dns_name(q, qlen, &off, 0, name) < 0 || off + 4 > qlen)
		return refuse(p, NET_RULE_MALFORMED, &k->dst, k->dport, k->proto, NULL);
	uint16_t qtype = get16(q + off);
	size_t q_end = off + 4;
	size_t n = strlen(name), sn = strlen("smol.internal");
	int ours = strcmp(name, "smol.internal") == 0 ||
		   (n > sn && name[n - sn - 1] == '.' && strcmp(name + n - sn, "smol.internal") == 0);

	if (ours) {
		/* Names under smol.internal are ours: never forwarded to the host's resolver. */
		if (p->host_allowed && strcmp(name, NET_HOST_NAME) == 0) {
			*reply_len = dns_answer(k, q, q_end, 0, qtype == DNS_TYPE_A ? gateway : NULL, reply);
			return *reply_len ? NET_REPLY : NET_DROP;
		}
		refuse(p, NET_RULE_DNS_NAME, &k->dst, k->dport, k->proto, name);
	} else if (p->allow_list && !name_allowed(p, name)) {
		refuse(p, NET_RULE_DNS_NAME, &k->dst, k->dport, k->proto, name);
	} else {
		return NET_PASS;
	}
	*reply_len = dns_answer(k, q, q_end, DNS_RCODE_NXDOMAIN, NULL, reply);
	return *reply_len ? NET_REPLY : NET_DROP;
}

static void learn(struct net_policy *p, const struct net_addr *a, unsigned host)
{
	for (unsigned i = 0; i < p->n_learned; i++)
		if (p->learned[i].host == host && addr_equal(&p->learned[i].addr, a))
			return;
	struct net_learned *slot = &p->learned[p->learned_next];

	slot->addr = *a;
	slot->host = (uint16_t)host;
	p->learned_next = (p->learned_next + 1) % NET_POLICY_MAX_LEARNED;
	if (p->n_learned < NET_POLICY_MAX_LEARNED)
		p->n_learned++;
}

/* An answer from the stack's DNS to the guest. */
static enum net_verdict dns_response(struct net_policy *p, const struct packet *k)
{
	const uint8_t *m = k->eth + k->l4_off + 8;
	size_t len = k->l4_len - 8, off = 12;
	char name[NET_POLICY_NAME_MAX + 1], owner[NET_POLICY_NAME_MAX + 1];
	unsigned answers;

	if (!p->allow_list)
		return NET_PASS;
	if (k->fragment || len < 12 || get16(m + 4) != 1 || dns_name(m, len, &off, 1, name) < 0 || off + 4 > len)
		return refuse(p, NET_RULE_MALFORMED, &k->src, k->sport, k->proto, NULL);
	off += 4;
	if (!name_allowed(p, name))
		return refuse(p, NET_RULE_DNS_NAME, &k->src, k->sport, k->proto, name);
	answers = get16(m + 6);
	for (unsigned i = 0; i < answers; i++) {
		if (dns_name(m, len, &off, 1, owner) < 0 || off + 10 > len)
			return refuse(p, NET_RULE_MALFORMED, &k->src, k->sport, k->proto, name);
		uint16_t type = get16(m + off), rdlen = get16(m + off + 8);

		off += 10;
		if (off + rdlen > len)
			return refuse(p, NET_RULE_MALFORMED, &k->src, k->sport, k->proto, name);
		if ((type == DNS_TYPE_A && rdlen == 4) || (type == DNS_TYPE_AAAA && rdlen == 16)) {
			struct net_addr a = { .family = type == DNS_TYPE_A ? 4 : 6 };

			memcpy(a.bytes, m + off, rdlen);
			/* The records of a CNAME chain belong to the question: the entries that allow its name. */
			for (unsigned h = 0; h < p->n_hosts; h++)
				if (name_matches(&p->hosts[h], name))
					learn(p, &a, h);
		}
		off += rdlen;
	}
	return NET_PASS;
}

/* ---- frames ---- */

/* Fills k from the frame; returns -1 to pass it unparsed (ARP), or the rule that refuses it, or -2 when parsed. */
static int parse(const uint8_t *f, size_t len, struct packet *k)
{
	memset(k, 0, sizeof(*k));
	k->eth = f;
	k->len = len;
	if (len < ETH_HLEN)
		return NET_RULE_MALFORMED;
	k->ethertype = get16(f + 12);
	k->ip_off = ETH_HLEN;
	if (k->ethertype == ETHERTYPE_ARP)
		return -1;
	if (k->ethertype == ETHERTYPE_IP4) {
		const uint8_t *ip = f + ETH_HLEN;
		size_t ihl, total;
		uint16_t frag;

		if (len < ETH_HLEN + 20 || (ip[0] >> 4) != 4)
			return NET_RULE_MALFORMED;
		ihl = (size_t)(ip[0] & 0xf) * 4;
		total = get16(ip + 2);
		if (ihl < 20 || total < ihl || ETH_HLEN + total > len)
			return NET_RULE_MALFORMED;
		k->proto = ip[9];
		k->src.family = k->dst.family = 4;
		memcpy(k->src.bytes, ip + 12, 4);
		memcpy(k->dst.bytes, ip + 16, 4);
		frag = get16(ip + 6);
		if (frag & 0x1fff)
			k->fragment = 2;
		else if (frag & 0x2000)
			k->fragment = 1;
		k->l4_off = ETH_HLEN + ihl;
		k->l4_len = total - ihl;
	} else if (k->ethertype == ETHERTYPE_IP6) {
		const uint8_t *ip = f + ETH_HLEN;
		size_t off, end;
		uint8_t next;
		int hops = 0;

		if (len < ETH_HLEN + 40 || (ip[0] >> 4) != 6)
			return NET_RULE_MALFORMED;
		end = ETH_HLEN + 40 + get16(ip + 4);
		if (end > len)
			return NET_RULE_MALFORMED;
		k->src.family = k->dst.family = 6;
		memcpy(k->src.bytes, ip + 8, 16);
		memcpy(k->dst.bytes, ip + 24, 16);
		next = ip[6];
		off = ETH_HLEN + 40;
		/* Hop-by-hop and destination options are skipped, a fragment header read; any other extension
		 * (routing headers among them) is refused. */
		while (next == IP6_HOPOPTS || next == IP6_DSTOPTS || next == IP6_FRAGMENT) {
			if (++hops > 8 || off + 8 > end)
				return NET_RULE_MALFORMED;
			if (next == IP6_FRAGMENT) {
				uint16_t fo = get16(f + off + 2);

				k->fragment = (fo & 0xfff8) ? 2 : (fo & 1) ? 1 : 0;
				next = f[off];
				off += 8;
			} else {
				size_t hl = ((size_t)f[off + 1] + 1) * 8;

				if (off + hl > end)
					return NET_RULE_MALFORMED;
				next = f[off];
				off += hl;
			}
		}
		k->proto = next;
		k->l4_off = off;
		k->l4_len = end - off;
	} else {
		return NET_RULE_PROTOCOL;
	}
	if (k->proto != PROTO_TCP && k->proto != PROTO_UDP &&
	    k->proto != (k->ethertype == ETHERTYPE_IP4 ? PROTO_ICMP : PROTO_ICMP6))
		return NET_RULE_PROTOCOL;
	if (k->fragment == 2)
		return -2;
	const uint8_t *l4 = f + k->l4_off;

	if (k->proto == PROTO_TCP) {
		if (k->l4_len < 20)
			return k->fragment ? NET_RULE_FRAGMENT : NET_RULE_MALFORMED;
		k->tcp_flags = l4[13];
	} else if (k->proto == PROTO_UDP) {
		if (k->l4_len < 8)
			return k->fragment ? NET_RULE_FRAGMENT : NET_RULE_MALFORMED;
	} else {
		if (k->l4_len < 4)
			return k->fragment ? NET_RULE_FRAGMENT : NET_RULE_MALFORMED;
		k->icmp_type = l4[0];
		return -2;
	}
	k->sport = get16(l4);
	k->dport = get16(l4 + 2);
	return -2;
}

enum net_verdict net_policy_guest_frame(struct net_policy *p, const uint8_t *frame, size_t len, uint8_t *reply,
					size_t *reply_len)
{
	struct packet k;
	int r = parse(frame, len, &k);
	int port = k.fragment == 2 ? -1 : k.dport;

	*reply_len = 0;
	if (r == -1)
		return NET_PASS;
	if (r >= 0)
		return refuse(p, (enum net_rule)r, k.dst.family ? &k.dst : NULL, k.dport, k.proto, NULL);

	/* What the stack itself answers. */
	if (k.proto == PROTO_ICMP6 && k.fragment == 0 && k.icmp_type >= 133 && k.icmp_type <= 137)
		return NET_PASS;	/* router and neighbour discovery */
	if (k.proto == PROTO_UDP && k.dport == DHCP_SERVER_PORT && k.fragment == 0 &&
	    (is_ip4(&k.dst, 0xffffffffu) || is_ip4(&k.dst, NET_GATEWAY_IP4)))
		return NET_PASS;
	if ((k.dst.family == 4 && (k.dst.bytes[0] & 0xf0) == 224) || (k.dst.family == 6 && k.dst.bytes[0] == 0xff) ||
	    is_ip4(&k.dst, 0xffffffffu) || is_ip4(&k.dst, NET_NETWORK_IP4 | 0xff))
		return NET_DROP;	/* multicast and broadcast noise (IGMP, MLD, mDNS): nothing leaves, nothing counted */
	if (is_ip4(&k.dst, NET_DNS_IP4) || is_slirp6(&k.dst, 3)) {
		if (k.proto == PROTO_UDP && k.dport == DNS_PORT)
			return dns_query(p, &k, reply, reply_len);
		if (k.proto == PROTO_TCP && k.dport == DNS_PORT && !p->allow_list)
			return NET_PASS;	/* DNS over TCP bypasses the name filter, so only without lists */
		return refuse(p, NET_RULE_PRIVATE, &k.dst, port, k.proto, NULL);
	}
	if (is_ip4(&k.dst, NET_GATEWAY_IP4) || is_slirp6(&k.dst, 2)) {
		/* A reply from the guest's server behind a `ports` forward: slirp connects from the gateway. */
		if (k.proto == PROTO_TCP && k.fragment == 0 && is_forward(p, k.sport) &&
		    (k.tcp_flags & (TCP_ACK | TCP_RST)) && !((k.tcp_flags & TCP_SYN) && !(k.tcp_flags & TCP_ACK)))
			return NET_PASS;
		/* A later fragment carries no port: it passes only where an entry allows every port. */
		if (p->host_allowed && host_port_allowed(p, k.fragment == 2 ? 0 : port, k.fragment == 2 ? 0 : k.proto))
			return NET_PASS;
		return refuse(p, NET_RULE_HOST, &k.dst, port, k.proto, NULL);
	}
	if (k.dst.family == 4 && (get32(k.dst.bytes) & NET_NETMASK_IP4) == NET_NETWORK_IP4)
		return refuse(p, NET_RULE_PRIVATE, &k.dst, port, k.proto, NULL);
	r = judge_address(p, &k.dst, port, k.proto);
	if (r < 0)
		return NET_PASS;
	if (k.fragment == 2 && r == NET_RULE_NOT_ALLOWED)
		r = NET_RULE_FRAGMENT;
	return refuse(p, (enum net_rule)r, &k.dst, port, k.proto, NULL);
}

enum net_verdict net_policy_stack_frame(struct net_policy *p, const uint8_t *frame, size_t len)
{
	struct packet k;

	if (parse(frame, len, &k) != -2)
		return NET_PASS;
	if (k.proto == PROTO_UDP && k.sport == DNS_PORT && (is_ip4(&k.src, NET_DNS_IP4) || is_slirp6(&k.src, 3)))
		return dns_response(p, &k);
	return NET_PASS;
}
