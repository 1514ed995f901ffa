/*
 * The libslirp backend (vmm/net_slirp.c, docs/network.md) driven with real frames, no VM: ARP, a TCP SYN to a port
 * this test listens on over loopback (the SYN-ACK comes back), a `ports` forward from a host connection into the
 * "guest", refusals that open no host socket, a host port in use, the receive queue's bound. Every packet stays on
 * loopback.
 */
#include "test.h"

#include "error.h"
#include "net_frames.h"
#include "net_policy.h"
#include "net_slirp.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int listen_loopback(uint16_t *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 8) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &alen) < 0)
		return -1;
	*port = ntohs(a.sin_port);
	return fd;
}

static int readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits up to ms for a frame for the guest that match() accepts; the frame lands in buf. Others are skipped. */
static ssize_t wait_frame(struct net_slirp *ns, uint8_t *buf, int ms, int (*match)(const uint8_t *, size_t, void *),
			  void *arg)
{
	long end = now_ms() + ms;

	while (now_ms() < end) {
		ssize_t n = net_slirp_recv(ns, buf, NET_SLIRP_FRAME_MAX);

		if (n == -EAGAIN) {
			uint64_t v;

			if (readable(net_slirp_rx_fd(ns), 50) && read(net_slirp_rx_fd(ns), &v, sizeof(v)) < 0) {
				/* another wake-up will come */
			}
			continue;
		}
		if (n > 0 && match(buf, (size_t)n, arg))
			return n;
	}
	return -ETIMEDOUT;
}

static size_t arp_request(uint8_t *f, uint32_t target)
{
	static const uint8_t bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	uint8_t *a = f + 14;

	memcpy(f, bcast, 6);
	memcpy(f + 6, nf_guest_mac, 6);
	nf_put16(f + 12, 0x0806);
	memset(a, 0, 28);
	nf_put16(a, 1);
	nf_put16(a + 2, 0x0800);
	a[4] = 6, a[5] = 4;
	nf_put16(a + 6, 1);
	memcpy(a + 8, nf_guest_mac, 6);
	a[14] = 10, a[15] = 0, a[16] = 2, a[17] = 15;
	a[24] = (uint8_t)(target >> 24), a[25] = (uint8_t)(target >> 16), a[26] = (uint8_t)(target >> 8);
	a[27] = (uint8_t)target;
	return 42;
}

static int is_arp_reply(const uint8_t *f, size_t n, void *arg)
{
	(void)arg;
	return n >= 42 && nf_get16(f + 12) == 0x0806 && nf_get16(f + 14 + 6) == 2 && f[14 + 14] == 10 &&
	       f[14 + 17] == 2;
}

struct tcp_want {
	uint16_t sport, dport;
	uint8_t flags;
	uint32_t seq;	/* out: the segment's sequence number */
};

static int is_tcp(const uint8_t *f, size_t n, void *arg)
{
	struct tcp_want *w = arg;
	const uint8_t *ip = f + 14, *t;

	if (n < 54 || nf_get16(f + 12) != 0x0800 || ip[9] != 6)
		return 0;
	t = ip + (ip[0] & 0xf) * 4;
	if (nf_get16(t) != w->sport || nf_get16(t + 2) != w->dport || (t[13] & 0x3f) != w->flags)
		return 0;
	w->seq = (uint32_t)t[4] << 24 | (uint32_t)t[5] << 16 | (uint32_t)t[6] << 8 | t[7];
	return 1;
}

static int is_dns_answer(const uint8_t *f, size_t n, void *arg)
{
	(void)arg;
	return n > 14 + 20 + 8 + 12 && nf_get16(f + 12) == 0x0800 && f[14 + 9] == 17 && nf_get16(f + 14 + 20) == 53;
}

static int fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

static struct net_slirp *start(struct net_policy *p, const struct net_forward *fw, unsigned n_fw)
{
	struct net_slirp_config cfg = { .policy = p, .n_forwards = n_fw };
	struct vm_error err = { 0 };
	struct net_slirp *ns = NULL;

	if (n_fw)
		memcpy(cfg.forwards, fw, n_fw * sizeof(*fw));
	if (net_slirp_start(&ns, &cfg, &err) < 0)
		test_fail(__FILE__, __LINE__, "net_slirp_start: %s", err.msg);
	return ns;
}

static void send_syn(struct net_slirp *ns, uint32_t dst, uint16_t sport, uint16_t dport)
{
	uint8_t f[128], l4[20];

	nf_tcp(l4, sport, dport, 0x02);
	CHECK_EQ_INT(net_slirp_send(ns, f, nf_ip4(f, dst, NF_TCP, 0, l4, 20)), 0);
}

/* Waits until the backend has judged `frames` frames (passed or refused). */
static void settle(struct net_slirp *ns, uint64_t frames)
{
	struct net_slirp_stats s;
	long end = now_ms() + 5000;

	do {
		net_slirp_stats(ns, &s);
		if (s.tx_frames + s.tx_refused + s.conns_refused >= frames)
			return;
		usleep(2000);
	} while (now_ms() < end);
	test_fail(__FILE__, __LINE__, "the backend judged %llu of %llu frames in 5 s",
		  (unsigned long long)(s.tx_frames + s.tx_refused), (unsigned long long)frames);
}

TEST(slirp_answers_arp_for_the_gateway)
{
	struct net_policy p;
	struct net_slirp *ns;
	uint8_t f[NET_SLIRP_FRAME_MAX];

	net_policy_init(&p);
	ns = start(&p, NULL, 0);
	REQUIRE(ns);
	CHECK_EQ_INT(net_slirp_send(ns, f, arp_request(f, 0x0a000202)), 0);
	CHECK(wait_frame(ns, f, 5000, is_arp_reply, NULL) > 0);
	CHECK_EQ_INT(memcmp(f, nf_guest_mac, 6), 0);
	net_slirp_stop(ns);
}

TEST(a_syn_to_an_allowed_host_port_reaches_the_listener_and_the_syn_ack_comes_back)
{
	struct net_policy p;
	struct vm_error err = { 0 };
	struct net_slirp *ns;
	uint8_t f[NET_SLIRP_FRAME_MAX];
	char entry[64];
	uint16_t port;
	int lfd = listen_loopback(&port);

	REQUIRE(lfd >= 0);
	net_policy_init(&p);
	snprintf(entry, sizeof(entry), "host.smol.internal:%u", port);
	CHECK_OK(net_policy_allow_host(&p, entry, &err), err.msg);
	ns = start(&p, NULL, 0);
	REQUIRE(ns);
	CHECK_EQ_INT(net_slirp_send(ns, f, arp_request(f, 0x0a000202)), 0);
	CHECK(wait_frame(ns, f, 5000, is_arp_reply, NULL) > 0);
	send_syn(ns, 0x0a000202, 40000, port);
	CHECK(readable(lfd, 5000));
	int c = accept(lfd, NULL, NULL);

	CHECK(c >= 0);
	struct tcp_want w = { .sport = port, .dport = 40000, .flags = 0x12 };

	CHECK(wait_frame(ns, f, 5000, is_tcp, &w) > 0);
	if (c >= 0)
		close(c);
	close(lfd);
	net_slirp_stop(ns);
}

TEST(a_second_loopback_port_no_rule_allows_sees_no_connection)
{
	struct net_policy p;
	struct vm_error err = { 0 };
	struct net_event e;
	struct net_slirp *ns;
	uint8_t f[NET_SLIRP_FRAME_MAX];
	char entry[64];
	uint16_t allowed, other;
	int lfd = listen_loopback(&allowed), ofd = listen_loopback(&other);

	REQUIRE(lfd >= 0 && ofd >= 0);
	net_policy_init(&p);
	snprintf(entry, sizeof(entry), "host.smol.internal:%u", allowed);
	CHECK_OK(net_policy_allow_host(&p, entry, &err), err.msg);
	ns = start(&p, NULL, 0);
	REQUIRE(ns);
	CHECK_EQ_INT(net_slirp_send(ns, f, arp_request(f, 0x0a000202)), 0);
	send_syn(ns, 0x0a000202, 40001, other);
	settle(ns, 2);
	CHECK(!readable(ofd, 300));
	REQUIRE(net_slirp_events(ns, 0, &e, 1) == 1);
	CHECK_EQ_INT(e.rule, NET_RULE_HOST);
	CHECK_EQ_INT(e.port, other);
	close(lfd);
	close(ofd);
	net_slirp_stop(ns);
}

TEST(a_refused_private_destination_opens_no_host_socket)
{
	struct net_policy p;
	struct net_event e;
	struct net_slirp *ns;
	struct net_slirp_stats s;
	int before;

	net_policy_init(&p);
	ns = start(&p, NULL, 0);
	REQUIRE(ns);
	usleep(20000);
	before = fd_count();
	send_syn(ns, 0x0a010203, 40002, 80);	/* 10.1.2.3 */
	send_syn(ns, 0xa9fea9fe, 40003, 80);	/* 169.254.169.254 */
	settle(ns, 2);
	usleep(20000);
	CHECK_EQ_INT(fd_count(), before);
	net_slirp_stats(ns, &s);
	CHECK_EQ_INT(s.sockets, 0);
	CHECK_EQ_INT(s.refused[NET_RULE_PRIVATE], 1);
	CHECK_EQ_INT(s.refused[NET_RULE_LINK_LOCAL], 1);
	REQUIRE(net_slirp_events(ns, 0, &e, 1) == 1);
	CHECK_EQ_INT(e.rule, NET_RULE_PRIVATE);
	CHECK_EQ_INT(e.dst.bytes[0], 10);
	net_slirp_stop(ns);
}

TEST(a_name_not_allowed_is_answered_nxdomain_through_the_backend)
{
	struct net_policy p;
	struct vm_error err = { 0 };
	struct net_slirp *ns;
	uint8_t f[NET_SLIRP_FRAME_MAX], dns[300], l4[400];
	size_t n, l;

	net_policy_init(&p);
	CHECK_OK(net_policy_allow_host(&p, "example.org", &err), err.msg);
	ns = start(&p, NULL, 0);
	REQUIRE(ns);
	n = nf_dns(dns, 77, "blocked.example.net", 1, NULL);
	l = nf_udp(l4, 5353, 53, dns, n);
	CHECK_EQ_INT(net_slirp_send(ns, f, nf_ip4(f, 0x0a000203, NF_UDP, 0, l4, l)), 0);
	REQUIRE(wait_frame(ns, f, 5000, is_dns_answer, NULL) > 0);
	CHECK_EQ_INT(f[14 + 20 + 8 + 3] & 0xf, 3);
	net_slirp_stop(ns);
}

TEST(a_forward_with_a_lone_guest_port_gets_a_free_host_port_and_carries_a_connection)
{
	struct net_policy p;
	struct net_forward fw = { 0, 80 }, bound;
	struct net_slirp *ns;
	uint8_t f[NET_SLIRP_FRAME_MAX], l4[20];

	net_policy_init(&p);
	ns = start(&p, &fw, 1);
	REQUIRE(ns);
	REQUIRE(net_slirp_forwards(ns, &bound, 1) == 1);
	CHECK(bound.host_port != 0);
	CHECK_EQ_INT(bound.guest_port, 80);
	/* slirp learns the guest's MAC from its ARP */
	CHECK_EQ_INT(net_slirp_send(ns, f, arp_request(f, 0x0a000202)), 0);
	CHECK(wait_frame(ns, f, 5000, is_arp_reply, NULL) > 0);

	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(bound.host_port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_in me;
	socklen_t melen = sizeof(me);
	int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

	REQUIRE(c >= 0);
	CHECK(connect(c, (struct sockaddr *)&a, sizeof(a)) == 0 || errno == EINPROGRESS);
	getsockname(c, (struct sockaddr *)&me, &melen);
	/* The host's connection arrives as a SYN to the guest's port 80, from the gateway. */
	struct tcp_want w = { .dport = 80, .flags = 0x02 };
	int got = 0;
	long end = now_ms() + 5000;

	while (!got && now_ms() < end) {
		for (uint16_t sp = 0; !got && sp == 0;) {
			ssize_t n = net_slirp_recv(ns, f, sizeof(f));

			if (n == -EAGAIN) {
				usleep(5000);
				break;
			}
			const uint8_t *t = f + 14 + 20;

			if (n >= 54 && f[14 + 9] == 6 && nf_get16(t + 2) == 80 && (t[13] & 0x3f) == 0x02) {
				w.sport = nf_get16(t);
				w.seq = (uint32_t)t[4] << 24 | (uint32_t)t[5] << 16 | (uint32_t)t[6] << 8 | t[7];
				got = 1;
			}
		}
	}
	REQUIRE(got);
	/* The guest accepts: its SYN-ACK from port 80 passes the policy (a forwarded port's reply). */
	nf_tcp(l4, 80, w.sport, 0x12);
	uint32_t ack = w.seq + 1;

	l4[8] = (uint8_t)(ack >> 24), l4[9] = (uint8_t)(ack >> 16), l4[10] = (uint8_t)(ack >> 8), l4[11] = (uint8_t)ack;
	CHECK_EQ_INT(net_slirp_send(ns, f, nf_ip4(f, 0x0a000202, NF_TCP, 0, l4, 20)), 0);
	/* ... and the host's connect completes. */
	struct pollfd pw = { .fd = c, .events = POLLOUT };
	int soerr = -1;
	socklen_t elen = sizeof(soerr);

	CHECK_EQ_INT(poll(&pw, 1, 5000), 1);
	getsockopt(c, SOL_SOCKET, SO_ERROR, &soerr, &elen);
	CHECK_EQ_INT(soerr, 0);
	close(c);
	net_slirp_stop(ns);
}

TEST(a_host_port_in_use_names_the_port_and_who_holds_it)
{
	struct net_policy p;
	struct vm_error err = { 0 };
	struct net_slirp *ns = NULL;
	uint16_t port;
	int lfd = listen_loopback(&port);
	char want[64];

	REQUIRE(lfd >= 0);
	net_policy_init(&p);
	struct net_slirp_config cfg = { .policy = &p, .n_forwards = 1, .forwards = { { port, 80 } } };

	CHECK_EQ_INT(net_slirp_start(&ns, &cfg, &err), -EADDRINUSE);
	CHECK(ns == NULL);
	snprintf(want, sizeof(want), "host port %u (127.0.0.1) is in use by pid %d", port, (int)getpid());
	CHECK_STR_CONTAINS(err.msg, want);
	close(lfd);
}

TEST(frames_for_a_guest_that_does_not_read_are_bounded)
{
	struct net_policy p;
	struct net_slirp *ns;
	struct net_slirp_stats s;
	uint8_t f[NET_SLIRP_FRAME_MAX];
	uint64_t accepted = 0;
	unsigned received = 0;

	net_policy_init(&p);
	ns = start(&p, NULL, 0);
	REQUIRE(ns);
	for (int i = 0; i < 1000; i++) {
		int r = net_slirp_send(ns, f, arp_request(f, 0x0a000202));

		CHECK(r == 0 || r == -EAGAIN);
		if (r == 0)
			accepted++;
		else
			usleep(1000);
	}
	settle(ns, accepted);
	while (net_slirp_recv(ns, f, sizeof(f)) > 0)
		received++;
	net_slirp_stats(ns, &s);
	CHECK(accepted > NET_SLIRP_QUEUE);
	CHECK_EQ_INT(received, NET_SLIRP_QUEUE);
	CHECK_EQ_INT(s.rx_dropped, accepted - NET_SLIRP_QUEUE);
	CHECK_EQ_INT(net_slirp_send(ns, f, NET_SLIRP_FRAME_MAX + 1), -EMSGSIZE);
	net_slirp_stop(ns);
}

TEST(the_network_resource_file_is_read_and_its_mistakes_named_by_line)
{
	struct net_slirp_config cfg;
	struct net_policy p;
	struct vm_error err = { 0 };
	static const char good[] = "# written by the engine\n"
				   "allow_host pypi.org\n"
				   "allow_host host.smol.internal:8080\n"
				   "\n"
				   "allow_cidr 203.0.113.0/24   # a comment\n"
				   "forward 8080 80\n"
				   "forward 0 3000\n";

	CHECK_OK(net_slirp_config_parse(good, "net.conf", &cfg, &p, &err), err.msg);
	CHECK(cfg.policy == &p);
	CHECK_EQ_INT(p.n_hosts, 2);
	CHECK_EQ_INT(p.host_allowed, 1);
	CHECK_EQ_INT(p.n_cidrs, 1);
	CHECK_EQ_INT(cfg.n_forwards, 2);
	CHECK_EQ_INT(cfg.forwards[0].host_port, 8080);
	CHECK_EQ_INT(cfg.forwards[1].host_port, 0);
	CHECK_EQ_INT(cfg.forwards[1].guest_port, 3000);

	CHECK_EQ_INT(net_slirp_config_parse("allow_host pypi.org\nallow_cidr 10.0.0.1/8\n", "net.conf", &cfg, &p, &err),
		     -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "net.conf:2: allow_cidrs entry \"10.0.0.1/8\"");
	CHECK_EQ_INT(net_slirp_config_parse("forward 80 0\n", "net.conf", &cfg, &p, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "net.conf:1: forward takes");
	CHECK_EQ_INT(net_slirp_config_parse("\nallow_hosts x.org\n", "net.conf", &cfg, &p, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "net.conf:2: expected");
	CHECK_EQ_INT(net_slirp_config_load("/nonexistent/net.conf", &cfg, &p, &err), -ENOENT);
	CHECK_STR_CONTAINS(err.msg, "/nonexistent/net.conf");
}
