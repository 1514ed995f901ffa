/*
 * Writes the network policy fuzzer's seed corpus into the directory given (format: net_policy_input.h): TCP SYNs to
 * public, private, link-local and host addresses over IPv4 and IPv6, DNS queries for allowed and refused names and
 * for host.smol.internal, DNS answers that teach addresses, fragments, and replies of a forwarded port.
 */
#include <stdio.h>
#include <string.h>

#include "net_frames.h"
#include "net_policy_input.h"

#define SEED_MAX 8192

struct seed {
	uint8_t b[SEED_MAX];
	size_t len;
};

static void frame(struct seed *s, uint8_t dir, const uint8_t *f, size_t n)
{
	if (s->len + 3 + n > SEED_MAX)
		return;
	s->b[s->len++] = dir;
	s->b[s->len++] = (uint8_t)n;
	s->b[s->len++] = (uint8_t)(n >> 8);
	memcpy(s->b + s->len, f, n);
	s->len += n;
}

static void syn4(struct seed *s, uint32_t dst, uint16_t sport, uint16_t dport, uint8_t flags, uint16_t frag)
{
	uint8_t f[128], l4[20];

	nf_tcp(l4, sport, dport, flags);
	frame(s, NPI_FROM_GUEST, f, nf_ip4(f, dst, NF_TCP, frag, l4, 20));
}

static void syn6(struct seed *s, const uint8_t dst[16], uint16_t dport)
{
	uint8_t f[128], l4[20];

	nf_tcp(l4, 40000, dport, 2);
	frame(s, NPI_FROM_GUEST, f, nf_ip6(f, dst, NF_TCP, l4, 20));
}

static void query(struct seed *s, const char *name, uint16_t qtype, int v6)
{
	uint8_t f[600], dns[300], l4[400], dst6[16] = { 0xfe, 0xc0, [15] = 3 };
	size_t n = nf_dns(dns, 1, name, qtype, NULL), l = nf_udp(l4, 5000, 53, dns, n);

	frame(s, NPI_FROM_GUEST, f, v6 ? nf_ip6(f, dst6, NF_UDP, l4, l) : nf_ip4(f, 0x0a000203, NF_UDP, 0, l4, l));
}

static int save(const char *dir, const char *name, const struct seed *s)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(s->b, s->len, 1, f) != 1) {
		fprintf(stderr, "net_policy_seeds: cannot write %s\n", path);
		if (f)
			fclose(f);
		return 1;
	}
	return fclose(f) != 0;
}

int main(int argc, char **argv)
{
	static const uint8_t pub6[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 1 }, ll6[16] = { 0xfe, 0x80, [15] = 1 };
	static const uint8_t a[4] = { 198, 51, 100, 7 };
	struct seed s;
	uint8_t f[600];
	int bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: net_policy_seeds DIR\n");
		return 2;
	}
	s = (struct seed){ .b = { 0 }, .len = 1 };
	syn4(&s, 0xcb007101, 40000, 443, 2, 0);
	syn4(&s, 0x0a010203, 40000, 22, 2, 0);
	syn4(&s, 0xa9fea9fe, 40000, 80, 2, 0);
	syn4(&s, 0x7f000001, 40000, 80, 2, 0);
	syn6(&s, pub6, 443);
	syn6(&s, ll6, 80);
	bad |= save(argv[1], "open", &s);

	s = (struct seed){ .b = { NPI_ALLOW_LISTS | NPI_HOST }, .len = 1 };
	query(&s, "api.example.net", 1, 0);
	frame(&s, NPI_FROM_STACK, f, nf_dns_answer_frame(f, 5000, "api.example.net", a));
	syn4(&s, 0xc6336407, 40000, 443, 2, 0);
	syn4(&s, 0xc6336407, 40000, 80, 2, 0);
	query(&s, "blocked.example.org.evil", 1, 0);
	query(&s, "host.smol.internal", 1, 0);
	query(&s, "host.smol.internal", 28, 1);
	query(&s, "x.example.com", 28, 1);
	syn4(&s, 0x0a000202, 40000, 8080, 2, 0);
	syn4(&s, 0x0a000202, 40000, 9090, 2, 0);
	bad |= save(argv[1], "allow-lists", &s);

	s = (struct seed){ .b = { NPI_FORWARD | NPI_HOST_ADDR | NPI_ALLOW_LISTS }, .len = 1 };
	syn4(&s, 0x0a000202, 80, 50000, 0x12, 0);
	syn4(&s, 0x0a000202, 80, 50000, 0x02, 0);
	syn4(&s, 0xcb007101, 40000, 443, 2, 0x2000);
	syn4(&s, 0xcb007101, 40000, 443, 2, 0x0004);
	syn4(&s, 0xc6336432, 40000, 22, 2, 0);
	bad |= save(argv[1], "forwards-fragments", &s);
	return bad;
}
