/* The per-packet network policy (vmm/net_policy.c, docs/network.md): what a guest's frames may reach. */
#include "test.h"

#include "error.h"
#include "net_frames.h"
#include "net_policy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static uint32_t ip4(unsigned a, unsigned b, unsigned c, unsigned d)
{
	return (uint32_t)a << 24 | b << 16 | c << 8 | d;
}

static struct net_policy *policy_new(void)
{
	struct net_policy *p = malloc(sizeof(*p));

	net_policy_init(p);
	return p;
}

/* Judges a TCP segment from the guest to dst:dport with the given flags. */
static enum net_verdict tcp4(struct net_policy *p, uint32_t dst, uint16_t sport, uint16_t dport, uint8_t flags)
{
	uint8_t f[128], l4[20], reply[NET_POLICY_REPLY_MAX];
	size_t reply_len;

	nf_tcp(l4, sport, dport, flags);
	return net_policy_guest_frame(p, f, nf_ip4(f, dst, NF_TCP, 0, l4, 20), reply, &reply_len);
}

static enum net_verdict syn4(struct net_policy *p, uint32_t dst, uint16_t dport)
{
	return tcp4(p, dst, 40000, dport, 0x02);
}

static enum net_verdict syn6(struct net_policy *p, const char *dst, uint16_t dport)
{
	uint8_t f[128], l4[20], a[16], reply[NET_POLICY_REPLY_MAX];
	size_t reply_len;

	inet_pton(AF_INET6, dst, a);
	nf_tcp(l4, 40000, dport, 0x02);
	return net_policy_guest_frame(p, f, nf_ip6(f, a, NF_TCP, l4, 20), reply, &reply_len);
}

/* A DNS query from the guest for name; the answer, when the policy writes one, lands in reply. */
static enum net_verdict query(struct net_policy *p, const char *name, uint16_t qtype, uint8_t *reply,
			      size_t *reply_len)
{
	uint8_t f[600], dns[300], l4[400];
	size_t n = nf_dns(dns, 0x4242, name, qtype, NULL);
	size_t l = nf_udp(l4, 33333, 53, dns, n);

	return net_policy_guest_frame(p, f, nf_ip4(f, 0x0a000203, NF_UDP, 0, l4, l), reply, reply_len);
}

static const struct net_event *last_event(const struct net_policy *p)
{
	static struct net_event e;

	return net_policy_events(p, p->events_seq - 1, &e, 1) == 1 ? &e : NULL;
}

static void check_reply_checksums(const uint8_t *r, size_t len)
{
	const uint8_t *ip = r + 14;
	size_t ihl = 20, udp_len = nf_get16(ip + 20 + 4);

	CHECK_EQ_INT(nf_fold(nf_sum(0, ip, ihl)), 0);
	CHECK_EQ_INT(14 + 20 + udp_len, len);
	CHECK_EQ_INT(nf_l4_sum(ip, 0, NF_UDP, ip + 20, udp_len), 0);
}

TEST(without_lists_public_addresses_are_open_and_private_ones_refused)
{
	struct net_policy *p = policy_new();
	const struct net_event *e;

	CHECK_EQ_INT(syn4(p, ip4(203, 0, 113, 9), 443), NET_PASS);
	CHECK_EQ_INT(syn6(p, "2001:db8::1", 80), NET_PASS);
	CHECK_EQ_INT(syn4(p, ip4(10, 1, 2, 3), 22), NET_DROP);
	e = last_event(p);
	REQUIRE(e);
	CHECK_EQ_INT(e->rule, NET_RULE_PRIVATE);
	CHECK_EQ_INT(e->proto, 6);
	CHECK_EQ_INT(e->port, 22);
	char text[64];

	net_addr_format(&e->dst, text, sizeof(text));
	CHECK_STR_CONTAINS(text, "10.1.2.3");
	CHECK_EQ_INT(syn4(p, ip4(172, 20, 0, 1), 80), NET_DROP);
	CHECK_EQ_INT(syn4(p, ip4(192, 168, 1, 1), 80), NET_DROP);
	CHECK_EQ_INT(syn4(p, ip4(100, 64, 0, 1), 80), NET_DROP);
	CHECK_EQ_INT(p->refused[NET_RULE_PRIVATE], 4);
	CHECK_EQ_INT(syn4(p, ip4(169, 254, 169, 254), 80), NET_DROP);
	CHECK_EQ_INT(last_event(p)->rule, NET_RULE_LINK_LOCAL);
	CHECK_EQ_INT(syn6(p, "fe80::1", 80), NET_DROP);
	CHECK_EQ_INT(last_event(p)->rule, NET_RULE_LINK_LOCAL);
	CHECK_EQ_INT(syn6(p, "fd00::1", 80), NET_DROP);
	CHECK_EQ_INT(last_event(p)->rule, NET_RULE_PRIVATE);
	CHECK_EQ_INT(syn6(p, "::ffff:10.0.0.1", 80), NET_DROP);
	CHECK_EQ_INT(last_event(p)->rule, NET_RULE_PRIVATE);
	CHECK_EQ_INT(syn4(p, ip4(127, 0, 0, 1), 80), NET_DROP);
	CHECK_EQ_INT(last_event(p)->rule, NET_RULE_HOST);
	CHECK_EQ_INT(p->refused_total, 9);
	free(p);
}

TEST(private_range_passes_only_when_a_cidr_names_it)
{
	struct net_policy *p = policy_new();
	struct vm_error err = { 0 };

	CHECK_OK(net_policy_allow_cidr(p, "0.0.0.0/0", &err), err.msg);
	CHECK_EQ_INT(syn4(p, ip4(198, 51, 100, 1), 80), NET_PASS);
	CHECK_EQ_INT(syn4(p, ip4(10, 9, 9, 9), 80), NET_DROP);	/* 0/0 is not specific enough for 10/8 */
	CHECK_EQ_INT(syn4(p, ip4(169, 254, 169, 254), 80), NET_DROP);
	CHECK_OK(net_policy_allow_cidr(p, "10.9.0.0/16", &err), err.msg);
	CHECK_EQ_INT(syn4(p, ip4(10, 9, 9, 9), 80), NET_PASS);
	CHECK_EQ_INT(syn4(p, ip4(10, 8, 9, 9), 80), NET_DROP);
	free(p);
}

TEST(with_an_allow_list_only_listed_destinations_pass)
{
	struct net_policy *p = policy_new();
	struct vm_error err = { 0 };

	CHECK_OK(net_policy_allow_cidr(p, "203.0.113.0/24", &err), err.msg);
	CHECK_EQ_INT(syn4(p, ip4(203, 0, 113, 200), 443), NET_PASS);
	CHECK_EQ_INT(syn4(p, ip4(203, 0, 114, 1), 443), NET_DROP);
	CHECK_EQ_INT(last_event(p)->rule, NET_RULE_NOT_ALLOWED);
	CHECK_EQ_INT(syn6(p, "2001:db8::1", 443), NET_DROP);
	free(p);
}

TEST(the_hosts_own_addresses_are_refused)
{
	struct net_policy *p = policy_new();
	struct net_addr a = { .family = 4, .bytes = { 198, 51, 100, 50 } };
	struct vm_error err = { 0 };

	CHECK_OK(net_policy_host_address(p, &a), "");
	CHECK_EQ_INT(syn4(p, ip4(198, 51, 100, 50), 22), NET_DROP);
	CHECK_EQ_INT(last_event(p)->rule, NET_RULE_HOST);
	CHECK_OK(net_policy_allow_cidr(p, "198.51.100.0/24", &err), err.msg);
	CHECK_EQ_INT(syn4(p, ip4(198, 51, 100, 50), 22), NET_DROP);	/* a /24 does not name the host */
	CHECK_OK(net_policy_allow_cidr(p, "198.51.100.50/32", &err), err.msg);
	CHECK_EQ_INT(syn4(p, ip4(198, 51, 100, 50), 22), NET_PASS);
	free(p);
}

TEST(a_name_not_allowed_gets_nxdomain_and_an_event)
{
	struct net_policy *p = policy_new();
	struct vm_error err = { 0 };
	uint8_t reply[NET_POLICY_REPLY_MAX];
	size_t len = 0;

	CHECK_OK(net_policy_allow_host(p, "example.org", &err), err.msg);
	CHECK_EQ_INT(query(p, "blocked.example.net", 1, reply, &len), NET_REPLY);
	REQUIRE(len > 14 + 20 + 8 + 12);
	const uint8_t *dns = reply + 14 + 20 + 8;

	CHECK_EQ_INT(nf_get16(dns), 0x4242);
	CHECK_EQ_INT(dns[2] & 0x80, 0x80);
	CHECK_EQ_INT(dns[3] & 0xf, 3);	/* NXDOMAIN */
	CHECK_EQ_INT(nf_get16(dns + 6), 0);
	CHECK_EQ_INT(memcmp(reply, nf_guest_mac, 6), 0);
	CHECK_EQ_INT(reply[14 + 15], 3);	/* from 10.0.2.3 */
	CHECK_EQ_INT(nf_get16(reply + 14 + 20 + 2), 33333);
	check_reply_checksums(reply, len);
	CHECK_EQ_INT(last_event(p)->rule, NET_RULE_DNS_NAME);
	CHECK_STR_CONTAINS(last_event(p)->name, "blocked.example.net");
	/* The name and its subdomains go to the stack's resolver. */
	CHECK_EQ_INT(query(p, "example.org", 1, reply, &len), NET_PASS);
	CHECK_EQ_INT(query(p, "Pkgs.Example.ORG", 1, reply, &len), NET_PASS);
	CHECK_EQ_INT(query(p, "notexample.org", 1, reply, &len), NET_REPLY);
	free(p);
}

TEST(a_pattern_allows_subdomains_only)
{
	struct net_policy *p = policy_new();
	struct vm_error err = { 0 };
	uint8_t reply[NET_POLICY_REPLY_MAX];
	size_t len;

	CHECK_OK(net_policy_allow_host(p, "*.example.com", &err), err.msg);
	CHECK_EQ_INT(query(p, "a.example.com", 1, reply, &len), NET_PASS);
	CHECK_EQ_INT(query(p, "example.com", 1, reply, &len), NET_REPLY);
	free(p);
}

TEST(addresses_of_an_allowed_name_pass_on_its_port_only)
{
	struct net_policy *p = policy_new();
	struct vm_error err = { 0 };
	uint8_t f[600];
	static const uint8_t a[4] = { 198, 51, 100, 7 }, b[4] = { 198, 51, 100, 8 };

	CHECK_OK(net_policy_allow_host(p, "api.example.net:443", &err), err.msg);
	CHECK_EQ_INT(syn4(p, ip4(198, 51, 100, 7), 443), NET_DROP);	/* not learned yet */
	CHECK_EQ_INT(net_policy_stack_frame(p, f, nf_dns_answer_frame(f, 33333, "api.example.net", a)), NET_PASS);
	CHECK_EQ_INT(syn4(p, ip4(198, 51, 100, 7), 443), NET_PASS);
	CHECK_EQ_INT(syn4(p, ip4(198, 51, 100, 7), 80), NET_DROP);
	CHECK_EQ_INT(last_event(p)->rule, NET_RULE_NOT_ALLOWED);
	/* An answer for a name not allowed never reaches the guest, nor teaches an address. */
	CHECK_EQ_INT(net_policy_stack_frame(p, f, nf_dns_answer_frame(f, 33333, "evil.example.org", b)), NET_DROP);
	CHECK_EQ_INT(syn4(p, ip4(198, 51, 100, 8), 443), NET_DROP);
	free(p);
}

TEST(a_learned_name_never_unlocks_a_private_address)
{
	struct net_policy *p = policy_new();
	struct vm_error err = { 0 };
	uint8_t f[600];
	static const uint8_t meta[4] = { 169, 254, 169, 254 };

	CHECK_OK(net_policy_allow_host(p, "rebind.example.org", &err), err.msg);
	CHECK_EQ_INT(net_policy_stack_frame(p, f, nf_dns_answer_frame(f, 1, "rebind.example.org", meta)), NET_PASS);
	CHECK_EQ_INT(syn4(p, ip4(169, 254, 169, 254), 80), NET_DROP);
	CHECK_EQ_INT(last_event(p)->rule, NET_RULE_LINK_LOCAL);
	free(p);
}

TEST(host_smol_internal_resolves_and_connects_only_when_named)
{
	struct net_policy *p = policy_new();
	struct vm_error err = { 0 };
	uint8_t reply[NET_POLICY_REPLY_MAX];
	size_t len;

	CHECK_EQ_INT(query(p, "host.smol.internal", 1, reply, &len), NET_REPLY);
	CHECK_EQ_INT(reply[14 + 20 + 8 + 3] & 0xf, 3);
	CHECK_EQ_INT(syn4(p, 0x0a000202, 8080), NET_DROP);
	CHECK_EQ_INT(last_event(p)->rule, NET_RULE_HOST);

	CHECK_OK(net_policy_allow_host(p, "host.smol.internal:8080", &err), err.msg);
	CHECK_EQ_INT(query(p, "host.smol.internal", 1, reply, &len), NET_REPLY);
	const uint8_t *dns = reply + 14 + 20 + 8;

	CHECK_EQ_INT(dns[3] & 0xf, 0);
	CHECK_EQ_INT(nf_get16(dns + 6), 1);
	CHECK_EQ_INT(memcmp(reply + len - 4, "\x0a\x00\x02\x02", 4), 0);
	check_reply_checksums(reply, len);
	/* AAAA: no record, so the guest uses the IPv4 answer */
	CHECK_EQ_INT(query(p, "host.smol.internal", 28, reply, &len), NET_REPLY);
	CHECK_EQ_INT(nf_get16(reply + 14 + 20 + 8 + 6), 0);
	CHECK_EQ_INT(syn4(p, 0x0a000202, 8080), NET_PASS);
	CHECK_EQ_INT(syn4(p, 0x0a000202, 8081), NET_DROP);
	CHECK_EQ_INT(last_event(p)->rule, NET_RULE_HOST);
	/* other names of ours never go to the host's resolver */
	CHECK_EQ_INT(query(p, "other.smol.internal", 1, reply, &len), NET_REPLY);
	CHECK_EQ_INT(reply[14 + 20 + 8 + 3] & 0xf, 3);
	free(p);
}

TEST(replies_of_a_forwarded_port_pass_to_the_gateway)
{
	struct net_policy *p = policy_new();

	CHECK_OK(net_policy_forward(p, 80), "");
	CHECK_EQ_INT(tcp4(p, 0x0a000202, 80, 50000, 0x12), NET_PASS);	/* SYN-ACK */
	CHECK_EQ_INT(tcp4(p, 0x0a000202, 80, 50000, 0x10), NET_PASS);
	CHECK_EQ_INT(tcp4(p, 0x0a000202, 80, 50000, 0x02), NET_DROP);	/* the guest opening one from it */
	CHECK_EQ_INT(tcp4(p, 0x0a000202, 81, 50000, 0x12), NET_DROP);
	free(p);
}

TEST(fragments_carry_their_header_first_and_later_ones_need_a_portless_rule)
{
	struct net_policy *p = policy_new();
	struct vm_error err = { 0 };
	uint8_t f[128], l4[20], reply[NET_POLICY_REPLY_MAX];
	size_t len;

	nf_tcp(l4, 1, 443, 0x02);
	/* a first fragment that stops inside the TCP header */
	CHECK_EQ_INT(net_policy_guest_frame(p, f, nf_ip4(f, ip4(203, 0, 113, 1), NF_TCP, 0x2000, l4, 8), reply, &len),
		     NET_DROP);
	CHECK_EQ_INT(last_event(p)->rule, NET_RULE_FRAGMENT);
	/* a later fragment: open without lists */
	CHECK_EQ_INT(net_policy_guest_frame(p, f, nf_ip4(f, ip4(203, 0, 113, 1), NF_TCP, 0x0003, l4, 8), reply, &len),
		     NET_PASS);
	CHECK_EQ_INT(net_policy_guest_frame(p, f, nf_ip4(f, ip4(10, 0, 0, 1), NF_UDP, 0x0003, l4, 8), reply, &len),
		     NET_DROP);
	CHECK_EQ_INT(last_event(p)->rule, NET_RULE_PRIVATE);

	uint8_t ans[600];
	static const uint8_t a[4] = { 198, 51, 100, 7 };

	CHECK_OK(net_policy_allow_host(p, "api.example.net:443", &err), err.msg);
	net_policy_stack_frame(p, ans, nf_dns_answer_frame(ans, 1, "api.example.net", a));
	CHECK_EQ_INT(net_policy_guest_frame(p, f, nf_ip4(f, ip4(198, 51, 100, 7), NF_TCP, 0x0003, l4, 8), reply, &len),
		     NET_DROP);
	CHECK_EQ_INT(last_event(p)->rule, NET_RULE_FRAGMENT);
	CHECK_EQ_INT(net_policy_guest_frame(p, f, nf_ip4(f, ip4(198, 51, 100, 7), NF_TCP, 0x2000, l4, 20), reply, &len),
		     NET_PASS);
	free(p);
}

TEST(malformed_and_unknown_frames_are_refused)
{
	struct net_policy *p = policy_new();
	uint8_t f[128], l4[20], reply[NET_POLICY_REPLY_MAX];
	size_t len, n;

	CHECK_EQ_INT(net_policy_guest_frame(p, f, 10, reply, &len), NET_DROP);
	CHECK_EQ_INT(last_event(p)->rule, NET_RULE_MALFORMED);
	nf_tcp(l4, 1, 80, 2);
	n = nf_ip4(f, ip4(203, 0, 113, 1), NF_TCP, 0, l4, 20);
	CHECK_EQ_INT(net_policy_guest_frame(p, f, n - 1, reply, &len), NET_DROP);	/* IP length past the frame */
	f[14] = 0x44;	/* IHL 16 bytes */
	CHECK_EQ_INT(net_policy_guest_frame(p, f, n, reply, &len), NET_DROP);
	n = nf_ip4(f, ip4(203, 0, 113, 1), 47, 0, l4, 20);	/* GRE */
	CHECK_EQ_INT(net_policy_guest_frame(p, f, n, reply, &len), NET_DROP);
	CHECK_EQ_INT(last_event(p)->rule, NET_RULE_PROTOCOL);
	nf_eth(f, 0x88cc);	/* LLDP */
	CHECK_EQ_INT(net_policy_guest_frame(p, f, 60, reply, &len), NET_DROP);
	CHECK_EQ_INT(last_event(p)->rule, NET_RULE_PROTOCOL);
	nf_eth(f, 0x0806);	/* ARP passes */
	CHECK_EQ_INT(net_policy_guest_frame(p, f, 42, reply, &len), NET_PASS);
	free(p);
}

TEST(ipv6_dns_to_the_stack_is_filtered_too)
{
	struct net_policy *p = policy_new();
	struct vm_error err = { 0 };
	uint8_t f[600], dns[300], l4[400], reply[NET_POLICY_REPLY_MAX], dst[16] = { 0xfe, 0xc0, [15] = 3 };
	size_t len, n, l;

	CHECK_OK(net_policy_allow_host(p, "example.org", &err), err.msg);
	n = nf_dns(dns, 9, "other.example.net", 28, NULL);
	l = nf_udp(l4, 4444, 53, dns, n);
	CHECK_EQ_INT(net_policy_guest_frame(p, f, nf_ip6(f, dst, NF_UDP, l4, l), reply, &len), NET_REPLY);
	REQUIRE(len > 14 + 40 + 8);
	CHECK_EQ_INT(nf_get16(reply + 12), 0x86dd);
	CHECK_EQ_INT(reply[14 + 40 + 8 + 3] & 0xf, 3);
	CHECK_EQ_INT(nf_l4_sum(reply + 14, 1, NF_UDP, reply + 14 + 40, len - 14 - 40), 0);
	free(p);
}

TEST(events_keep_the_last_refusals_in_order)
{
	struct net_policy *p = policy_new();
	struct net_event ev[NET_POLICY_EVENTS + 8];

	for (unsigned i = 0; i < 100; i++)
		syn4(p, ip4(10, 0, 0, 1), (uint16_t)(1000 + i));
	CHECK_EQ_INT(p->refused_total, 100);
	unsigned n = net_policy_events(p, 0, ev, NET_POLICY_EVENTS + 8);

	CHECK_EQ_INT(n, NET_POLICY_EVENTS);
	CHECK_EQ_INT(ev[0].seq, 100 - NET_POLICY_EVENTS + 1);
	CHECK_EQ_INT(ev[0].port, 1000 + 100 - NET_POLICY_EVENTS);
	CHECK_EQ_INT(ev[n - 1].seq, 100);
	CHECK_EQ_INT(net_policy_events(p, 98, ev, 10), 2);
	CHECK_EQ_INT(net_policy_events(p, 100, ev, 10), 0);
	free(p);
}

TEST(bad_allow_entries_name_what_is_wrong)
{
	struct net_policy *p = policy_new();
	struct vm_error err = { 0 };
	static const char *const hosts[] = { "exa mple.org", "foo:0", "foo:70000", "*.", "", "a..b", "-a.org",
					     "foo:", "foo:8x" };
	static const char *const cidrs[] = { "10.0.0.1/8", "10.0.0.0/33", "nonsense", "10.0.0.0/", "::/129",
					     "1.2.3.4/-1" };

	for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
		CHECK_EQ_INT(net_policy_allow_host(p, hosts[i], &err), -EINVAL);
		CHECK_STR_CONTAINS(err.msg, "allow_hosts entry");
	}
	for (size_t i = 0; i < sizeof(cidrs) / sizeof(cidrs[0]); i++) {
		CHECK_EQ_INT(net_policy_allow_cidr(p, cidrs[i], &err), -EINVAL);
		CHECK_STR_CONTAINS(err.msg, cidrs[i]);
	}
	CHECK_EQ_INT(net_policy_allow_cidr(p, "10.0.0.1/8", &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "bits set past the /8");
	CHECK_EQ_INT(p->n_hosts + p->n_cidrs, 0);
	CHECK_EQ_INT(p->allow_list, 0);
	CHECK_OK(net_policy_allow_host(p, "Example.ORG.", &err), err.msg);
	CHECK_STR_CONTAINS(p->hosts[0].name, "example.org");
	free(p);
}
