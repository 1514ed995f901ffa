/*
 * Builders of the Ethernet frames a guest sends (IPv4 and IPv6; TCP, UDP, DNS queries) and of the DNS answers the
 * stack sends back, for the network tests and the policy fuzzer's seeds. Each writes into buf and returns the
 * frame's length. Checksums are filled in, so libslirp accepts the frames too.
 */
#ifndef SMOL_NET_FRAMES_H
#define SMOL_NET_FRAMES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define NF_TCP 6
#define NF_UDP 17

static const uint8_t nf_guest_mac[6] = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 };
static const uint8_t nf_slirp_mac[6] = { 0x52, 0x55, 0x0a, 0x00, 0x02, 0x02 };

static inline void nf_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline uint16_t nf_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t nf_sum(uint32_t sum, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		sum += nf_get16(p + i);
	if (n & 1)
		sum += (uint32_t)p[n - 1] << 8;
	return sum;
}

static inline uint16_t nf_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* The transport checksum over the pseudo-header of the IP header at ip (v4 or v6) and the l4 bytes. */
static inline uint16_t nf_l4_sum(const uint8_t *ip, int v6, uint8_t proto, const uint8_t *l4, size_t l4_len)
{
	uint32_t sum = v6 ? nf_sum(0, ip + 8, 32) : nf_sum(0, ip + 12, 8);

	sum += proto + (uint32_t)l4_len;
	return nf_fold(nf_sum(sum, l4, l4_len));
}

static inline size_t nf_eth(uint8_t *buf, uint16_t ethertype)
{
	memcpy(buf, nf_slirp_mac, 6);
	memcpy(buf + 6, nf_guest_mac, 6);
	nf_put16(buf + 12, ethertype);
	return 14;
}

/*
 * An IPv4 packet from 10.0.2.15 to dst (host order) carrying l4 (l4_len bytes); frag_field is the IP header's
 * flags and fragment offset word. The transport checksum, when l4 has room for one, is computed for TCP and UDP.
 */
static inline size_t nf_ip4(uint8_t *buf, uint32_t dst, uint8_t proto, uint16_t frag_field, const uint8_t *l4,
			    size_t l4_len)
{
	size_t off = nf_eth(buf, 0x0800);
	uint8_t *ip = buf + off;

	memset(ip, 0, 20);
	ip[0] = 0x45;
	nf_put16(ip + 2, (uint16_t)(20 + l4_len));
	nf_put16(ip + 4, 0x1234);
	nf_put16(ip + 6, frag_field);
	ip[8] = 64;
	ip[9] = proto;
	ip[12] = 10, ip[13] = 0, ip[14] = 2, ip[15] = 15;
	ip[16] = (uint8_t)(dst >> 24), ip[17] = (uint8_t)(dst >> 16), ip[18] = (uint8_t)(dst >> 8), ip[19] = (uint8_t)dst;
	nf_put16(ip + 10, nf_fold(nf_sum(0, ip, 20)));
	memcpy(ip + 20, l4, l4_len);
	if (frag_field == 0 && proto == NF_TCP && l4_len >= 20)
		nf_put16(ip + 20 + 16, nf_l4_sum(ip, 0, proto, ip + 20, l4_len));
	if (frag_field == 0 && proto == NF_UDP && l4_len >= 8) {
		uint16_t c = nf_l4_sum(ip, 0, proto, ip + 20, l4_len);

		nf_put16(ip + 20 + 6, c ? c : 0xffff);
	}
	return off + 20 + l4_len;
}

/* An IPv6 packet from fec0::15 to dst (16 bytes) carrying l4 with next header proto. */
static inline size_t nf_ip6(uint8_t *buf, const uint8_t dst[16], uint8_t proto, const uint8_t *l4, size_t l4_len)
{
	size_t off = nf_eth(buf, 0x86dd);
	uint8_t *ip = buf + off;

	memset(ip, 0, 40);
	ip[0] = 0x60;
	nf_put16(ip + 4, (uint16_t)l4_len);
	ip[6] = proto;
	ip[7] = 64;
	ip[8] = 0xfe, ip[9] = 0xc0, ip[23] = 0x15;
	memcpy(ip + 24, dst, 16);
	memcpy(ip + 40, l4, l4_len);
	if (proto == NF_TCP && l4_len >= 20)
		nf_put16(ip + 40 + 16, nf_l4_sum(ip, 1, proto, ip + 40, l4_len));
	if (proto == NF_UDP && l4_len >= 8)
		nf_put16(ip + 40 + 6, nf_l4_sum(ip, 1, proto, ip + 40, l4_len));
	return off + 40 + l4_len;
}

/* A TCP header (no options, no payload) with the given flags (0x02 SYN, 0x12 SYN-ACK, ...). */
static inline size_t nf_tcp(uint8_t *l4, uint16_t sport, uint16_t dport, uint8_t flags)
{
	memset(l4, 0, 20);
	nf_put16(l4, sport);
	nf_put16(l4 + 2, dport);
	l4[4] = 0x11, l4[5] = 0x22, l4[6] = 0x33, l4[7] = 0x44;	/* sequence number */
	l4[12] = 5 << 4;
	l4[13] = flags;
	nf_put16(l4 + 14, 65535);
	return 20;
}

/* A UDP header and payload. */
static inline size_t nf_udp(uint8_t *l4, uint16_t sport, uint16_t dport, const uint8_t *data, size_t n)
{
	nf_put16(l4, sport);
	nf_put16(l4 + 2, dport);
	nf_put16(l4 + 4, (uint16_t)(8 + n));
	nf_put16(l4 + 6, 0);
	memcpy(l4 + 8, data, n);
	return 8 + n;
}

/* "a.example.org" in DNS wire form; returns its length. */
static inline size_t nf_dns_name(uint8_t *out, const char *name)
{
	size_t n = 0;

	while (*name) {
		const char *dot = strchr(name, '.');
		size_t l = dot ? (size_t)(dot - name) : strlen(name);

		out[n++] = (uint8_t)l;
		memcpy(out + n, name, l);
		n += l;
		name += l + (dot ? 1 : 0);
	}
	out[n++] = 0;
	return n;
}

/* A DNS message: a query for name (type qtype), or when answer is non-NULL a response with one A record. */
static inline size_t nf_dns(uint8_t *out, uint16_t id, const char *name, uint16_t qtype, const uint8_t *answer_a4)
{
	size_t n = 12;

	memset(out, 0, 12);
	nf_put16(out, id);
	out[2] = answer_a4 ? 0x81 : 0x01;	/* QR for an answer; RD */
	out[3] = answer_a4 ? 0x80 : 0;
	nf_put16(out + 4, 1);
	nf_put16(out + 6, answer_a4 ? 1 : 0);
	n += nf_dns_name(out + n, name);
	nf_put16(out + n, qtype);
	nf_put16(out + n + 2, 1);
	n += 4;
	if (answer_a4) {
		nf_put16(out + n, 0xc00c);
		nf_put16(out + n + 2, 1);
		nf_put16(out + n + 4, 1);
		out[n + 6] = 0, out[n + 7] = 0, out[n + 8] = 0, out[n + 9] = 30;
		nf_put16(out + n + 10, 4);
		memcpy(out + n + 12, answer_a4, 4);
		n += 16;
	}
	return n;
}

/* The stack's DNS answer frame: from 10.0.2.3:53 to the guest's port. */
static inline size_t nf_dns_answer_frame(uint8_t *buf, uint16_t guest_port, const char *name, const uint8_t a4[4])
{
	uint8_t dns[512], l4[600];
	size_t n = nf_dns(dns, 7, name, 1, a4);
	size_t l = nf_udp(l4, 53, guest_port, dns, n);
	size_t len = nf_ip4(buf, 0x0a00020f, NF_UDP, 0, l4, l);

	/* turn it around: from 10.0.2.3 to 10.0.2.15, MACs swapped */
	memcpy(buf, nf_guest_mac, 6);
	memcpy(buf + 6, nf_slirp_mac, 6);
	buf[14 + 12] = 10, buf[14 + 13] = 0, buf[14 + 14] = 2, buf[14 + 15] = 3;
	return len;
}

#endif
