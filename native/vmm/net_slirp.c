/*
 * The libslirp backend (net_slirp.h, docs/network.md). libslirp is not thread-safe: the Slirp and everything it
 * calls back (send_packet, timers) belong to this backend's thread. Other threads touch only the two frame queues,
 * the policy's counters and events, and the stats, all under `lock`.
 */
#define _GNU_SOURCE
#include "net_slirp.h"

#include "error.h"

#include <dirent.h>
#include <errno.h>
#include <ifaddrs.h>
#include <libslirp.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define POLL_MAX_MS 1000	/* the loop wakes at least this often, whatever libslirp's timeout says */
#define UDP_EXTRA_SOCKETS 64	/* UDP flows (DNS among them) may go this far past the connection cap */

struct frame {
	uint16_t len;
	uint8_t data[NET_SLIRP_FRAME_MAX];
};

struct ring {
	struct frame *slots;
	unsigned head, count;
};

struct slirp_timer {
	SlirpTimerCb cb;
	void *cb_opaque;
	int64_t expire_ms;	/* -1: not armed */
	struct slirp_timer *next;
};

struct net_slirp {
	Slirp *slirp;
	pthread_t thread;
	int thread_started;
	atomic_int stop;
	int wake_fd, rx_fd;

	pthread_mutex_t lock;	/* the rings, policy's counters and events, stats */
	struct ring tx, rx;
	struct net_policy policy;
	struct net_slirp_stats stats;

	/* the backend thread's own */
	struct pollfd *pfds;
	unsigned n_pfds, cap_pfds;
	struct slirp_timer *timers;
	uint8_t reply[NET_POLICY_REPLY_MAX];

	struct net_forward forwards[NET_SLIRP_MAX_FORWARDS];
	unsigned n_forwards;
	void (*rx_ready)(void *opaque);
	void *rx_opaque;
};

/* ---- queues ---- */

static int ring_push(struct ring *r, const void *data, size_t len)
{
	if (r->count == NET_SLIRP_QUEUE)
		return -EAGAIN;
	struct frame *f = &r->slots[(r->head + r->count) % NET_SLIRP_QUEUE];

	f->len = (uint16_t)len;
	memcpy(f->data, data, len);
	r->count++;
	return 0;
}

static struct frame *ring_front(struct ring *r)
{
	return r->count ? &r->slots[r->head] : NULL;
}

static void ring_pop(struct ring *r)
{
	r->head = (r->head + 1) % NET_SLIRP_QUEUE;
	r->count--;
}

static void kick(int fd)
{
	uint64_t one = 1;

	if (write(fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is already non-zero, so the reader wakes anyway */
	}
}

/* A frame for the guest, from the stack or the policy; called with lock held. */
static void deliver(struct net_slirp *ns, const void *data, size_t len)
{
	int was_empty = ns->rx.count == 0;

	if (len > NET_SLIRP_FRAME_MAX || ring_push(&ns->rx, data, len) < 0) {
		ns->stats.rx_dropped++;
		return;
	}
	ns->stats.rx_frames++;
	if (was_empty) {
		kick(ns->rx_fd);
		if (ns->rx_ready)
			ns->rx_ready(ns->rx_opaque);
	}
}

/* ---- libslirp's callbacks ---- */

static ssize_t cb_send_packet(const void *buf, size_t len, void *opaque)
{
	struct net_slirp *ns = opaque;

	pthread_mutex_lock(&ns->lock);
	if (net_policy_stack_frame(&ns->policy, buf, len) == NET_PASS)
		deliver(ns, buf, len);
	pthread_mutex_unlock(&ns->lock);
	return (ssize_t)len;
}

static void cb_guest_error(const char *msg, void *opaque)
{
	(void)msg;
	(void)opaque;	/* a guest's malformed frame: libslirp drops it, and so do we */
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t cb_clock_get_ns(void *opaque)
{
	(void)opaque;
	return now_ns();
}

static void *cb_timer_new(SlirpTimerCb cb, void *cb_opaque, void *opaque)
{
	struct net_slirp *ns = opaque;
	struct slirp_timer *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->cb = cb;
	t->cb_opaque = cb_opaque;
	t->expire_ms = -1;
	t->next = ns->timers;
	ns->timers = t;
	return t;
}

static void cb_timer_free(void *timer, void *opaque)
{
	struct net_slirp *ns = opaque;

	for (struct slirp_timer **p = &ns->timers; *p; p = &(*p)->next) {
		if (*p == timer) {
			*p = (*p)->next;
			free(timer);
			return;
		}
	}
}

static void cb_timer_mod(void *timer, int64_t expire_ms, void *opaque)
{
	(void)opaque;
	((struct slirp_timer *)timer)->expire_ms = expire_ms;
}

static void cb_register_poll_fd(int fd, void *opaque)
{
	(void)fd;
	(void)opaque;	/* every loop asks libslirp for its descriptors afresh */
}

static void cb_notify(void *opaque)
{
	(void)opaque;
}

static const SlirpCb callbacks = {
	.send_packet = cb_send_packet,
	.guest_error = cb_guest_error,
	.clock_get_ns = cb_clock_get_ns,
	.timer_new = cb_timer_new,
	.timer_free = cb_timer_free,
	.timer_mod = cb_timer_mod,
	.register_poll_fd = cb_register_poll_fd,
	.unregister_poll_fd = cb_register_poll_fd,
	.notify = cb_notify,
};

static int cb_add_poll(int fd, int events, void *opaque)
{
	struct net_slirp *ns = opaque;

	if (ns->n_pfds == ns->cap_pfds) {
		unsigned cap = ns->cap_pfds * 2;
		struct pollfd *p = realloc(ns->pfds, cap * sizeof(*p));

		if (!p)
			return -1;	/* this descriptor is not polled this round */
		ns->pfds = p;
		ns->cap_pfds = cap;
	}
	ns->pfds[ns->n_pfds] = (struct pollfd){
		.fd = fd,
		.events = (short)((events & SLIRP_POLL_IN ? POLLIN : 0) | (events & SLIRP_POLL_OUT ? POLLOUT : 0) |
				  (events & SLIRP_POLL_PRI ? POLLPRI : 0)),
	};
	return (int)ns->n_pfds++;
}

static int cb_get_revents(int idx, void *opaque)
{
	struct net_slirp *ns = opaque;
	short r;

	if (idx < 0 || (unsigned)idx >= ns->n_pfds)
		return 0;
	r = ns->pfds[idx].revents;
	return (r & POLLIN ? SLIRP_POLL_IN : 0) | (r & POLLOUT ? SLIRP_POLL_OUT : 0) |
	       (r & POLLPRI ? SLIRP_POLL_PRI : 0) | (r & POLLERR ? SLIRP_POLL_ERR : 0) |
	       (r & POLLHUP ? SLIRP_POLL_HUP : 0);
}

/* ---- the thread ---- */

/* What a passed frame would open: 2 for a TCP SYN, 1 for UDP, 0 for neither (IPv4 and plain IPv6 headers). */
static int opens_flow(const uint8_t *f, size_t len)
{
	size_t l4;
	uint8_t proto;

	if (len < 14)
		return 0;
	if (f[12] == 0x08 && f[13] == 0x00 && len >= 34) {
		proto = f[14 + 9];
		l4 = 14 + (size_t)(f[14] & 0xf) * 4;
	} else if (f[12] == 0x86 && f[13] == 0xdd && len >= 54) {
		proto = f[14 + 6];
		l4 = 54;
	} else {
		return 0;
	}
	if (proto == 17)
		return 1;
	if (proto == 6 && l4 + 14 <= len)
		return (f[l4 + 13] & 0x12) == 0x02 ? 2 : 0;
	return 0;
}

/* Hands the guest's queued frames, judged, to the stack. */
static void drain_tx(struct net_slirp *ns)
{
	static __thread struct frame f;

	for (;;) {
		enum net_verdict v;
		size_t reply_len = 0;

		pthread_mutex_lock(&ns->lock);
		struct frame *front = ring_front(&ns->tx);

		if (!front) {
			pthread_mutex_unlock(&ns->lock);
			return;
		}
		f.len = front->len;
		memcpy(f.data, front->data, front->len);
		ring_pop(&ns->tx);
		v = net_policy_guest_frame(&ns->policy, f.data, f.len, ns->reply, &reply_len);
		if (v == NET_REPLY)
			deliver(ns, ns->reply, reply_len);
		if (v != NET_PASS)
			ns->stats.tx_refused++;
		if (v == NET_PASS) {
			int kind = opens_flow(f.data, f.len);
			unsigned cap = NET_SLIRP_MAX_SOCKETS + (kind == 1 ? UDP_EXTRA_SOCKETS : 0);

			if (kind && ns->stats.sockets >= cap) {
				ns->stats.conns_refused++;
				v = NET_DROP;
			} else {
				ns->stats.tx_frames++;
			}
		}
		pthread_mutex_unlock(&ns->lock);
		if (v == NET_PASS)
			slirp_input(ns->slirp, f.data, f.len);
	}
}

static void run_timers(struct net_slirp *ns)
{
	int64_t now = now_ns() / 1000000;
	int fired;

	/* A callback may free or re-arm timers, so each round starts from the head again. */
	do {
		fired = 0;
		for (struct slirp_timer *t = ns->timers; t; t = t->next) {
			if (t->expire_ms >= 0 && t->expire_ms <= now) {
				t->expire_ms = -1;
				t->cb(t->cb_opaque);
				fired = 1;
				break;
			}
		}
	} while (fired);
}

static void *backend_thread(void *arg)
{
	struct net_slirp *ns = arg;

	while (!atomic_load(&ns->stop)) {
		uint32_t timeout = UINT32_MAX;
		int64_t now = now_ns() / 1000000;
		int n;

		ns->n_pfds = 0;
		ns->pfds[ns->n_pfds++] = (struct pollfd){ .fd = ns->wake_fd, .events = POLLIN };
		slirp_pollfds_fill(ns->slirp, &timeout, cb_add_poll, ns);
		pthread_mutex_lock(&ns->lock);
		ns->stats.sockets = ns->n_pfds - 1;
		pthread_mutex_unlock(&ns->lock);
		if (timeout > POLL_MAX_MS)
			timeout = POLL_MAX_MS;
		for (struct slirp_timer *t = ns->timers; t; t = t->next) {
			int64_t left = t->expire_ms - now;

			if (t->expire_ms < 0)
				continue;
			if (left < 0)
				left = 0;
			if (left < (int64_t)timeout)
				timeout = (uint32_t)left;
		}
		n = poll(ns->pfds, ns->n_pfds, (int)timeout);
		if (n > 0 && (ns->pfds[0].revents & POLLIN)) {
			uint64_t v;

			if (read(ns->wake_fd, &v, sizeof(v)) < 0) {
				/* EAGAIN: someone else read it; nothing lost, the queue is drained below */
			}
		}
		slirp_pollfds_poll(ns->slirp, n < 0, cb_get_revents, ns);
		run_timers(ns);
		drain_tx(ns);
	}
	return NULL;
}

/* ---- forwards ---- */

/* A free TCP port on 127.0.0.1 (bound and closed at once; the stack binds it right after). */
static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -errno;

	if (fd < 0)
		return port;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && getsockname(fd, (struct sockaddr *)&a, &alen) == 0)
		port = ntohs(a.sin_port);
	else
		port = -errno;
	close(fd);
	return port;
}

static int add_forward(struct net_slirp *ns, struct net_forward *fw, struct vm_error *err)
{
	struct in_addr host = { htonl(INADDR_LOOPBACK) }, guest = { htonl(NET_GUEST_IP4) };

	if (fw->guest_port == 0)
		return vm_error_set(err, EINVAL, "ports: guest port 0");
	if (fw->host_port) {
		char who[128];

		if (slirp_add_hostfwd(ns->slirp, 0, host, fw->host_port, guest, fw->guest_port) == 0)
			return 0;
		if (net_port_holder(fw->host_port, who, sizeof(who)) == 0)
			return vm_error_set(err, EADDRINUSE, "ports: host port %u (127.0.0.1) is in use by %s",
					    fw->host_port, who);
		return vm_error_set(err, EADDRINUSE, "ports: host port %u (127.0.0.1) is in use", fw->host_port);
	}
	for (int tries = 0; tries < 8; tries++) {
		int port = free_port();

		if (port < 0)
			return vm_error_set(err, -port, "ports: no free host port for guest port %u: %s", fw->guest_port,
					    strerror(-port));
		if (slirp_add_hostfwd(ns->slirp, 0, host, port, guest, fw->guest_port) == 0) {
			fw->host_port = (uint16_t)port;
			return 0;
		}
	}
	return vm_error_set(err, EADDRINUSE, "ports: no free host port for guest port %u after 8 tries",
			    fw->guest_port);
}

/* ---- the host resource ---- */

static int port_arg(const char *text, unsigned long max, unsigned long *out)
{
	char *end;

	if (!*text || *text < '0' || *text > '9')
		return -1;
	errno = 0;
	*out = strtoul(text, &end, 10);
	return *end || errno || *out > max ? -1 : 0;
}

int net_slirp_config_parse(const char *text, const char *name, struct net_slirp_config *cfg,
			   struct net_policy *policy, struct vm_error *err)
{
	char line[512];
	unsigned lineno = 0;

	memset(cfg, 0, sizeof(*cfg));
	net_policy_init(policy);
	cfg->policy = policy;
	while (*text) {
		size_t n = strcspn(text, "\n");
		char *key, *arg, *arg2, *save = NULL;
		int r = 0;

		lineno++;
		if (n >= sizeof(line))
			return vm_error_set(err, EINVAL, "%s:%u: line longer than %zu bytes", name, lineno,
					    sizeof(line) - 1);
		memcpy(line, text, n);
		line[n] = 0;
		text += n + (text[n] == '\n');
		line[strcspn(line, "#")] = 0;
		key = strtok_r(line, " \t\r", &save);
		if (!key)
			continue;
		arg = strtok_r(NULL, " \t\r", &save);
		arg2 = arg ? strtok_r(NULL, " \t\r", &save) : NULL;
		if (!strcmp(key, "allow_host") && arg && !arg2) {
			r = net_policy_allow_host(policy, arg, err);
		} else if (!strcmp(key, "allow_cidr") && arg && !arg2) {
			r = net_policy_allow_cidr(policy, arg, err);
		} else if (!strcmp(key, "forward") && arg && arg2 && !strtok_r(NULL, " \t\r", &save)) {
			unsigned long host, guest;

			if (port_arg(arg, 65535, &host) < 0 || port_arg(arg2, 65535, &guest) < 0 || guest == 0)
				return vm_error_set(err, EINVAL, "%s:%u: forward takes a host port (0 to 65535, 0: a "
						    "free one) and a guest port (1 to 65535)", name, lineno);
			if (cfg->n_forwards >= NET_SLIRP_MAX_FORWARDS)
				return vm_error_set(err, E2BIG, "%s:%u: more than %d forwards", name, lineno,
						    NET_SLIRP_MAX_FORWARDS);
			cfg->forwards[cfg->n_forwards++] = (struct net_forward){ (uint16_t)host, (uint16_t)guest };
		} else {
			return vm_error_set(err, EINVAL, "%s:%u: expected \"allow_host NAME\", \"allow_cidr CIDR\" or "
					    "\"forward HOST GUEST\"", name, lineno);
		}
		if (r < 0)
			return vm_error_prefix(err, "%s:%u: ", name, lineno);
	}
	return 0;
}

int net_slirp_config_load(const char *path, struct net_slirp_config *cfg, struct net_policy *policy,
			  struct vm_error *err)
{
	FILE *f = fopen(path, "re");
	char *text;
	long size;
	int r;

	if (!f)
		return vm_error_set(err, errno, "network configuration %s: %s", path, strerror(errno));
	if (fseek(f, 0, SEEK_END) < 0 || (size = ftell(f)) < 0 || size > (1 << 20) || fseek(f, 0, SEEK_SET) < 0) {
		fclose(f);
		return vm_error_set(err, EINVAL, "network configuration %s: unreadable or larger than 1 MiB", path);
	}
	text = malloc((size_t)size + 1);
	if (!text || fread(text, 1, (size_t)size, f) != (size_t)size) {
		free(text);
		fclose(f);
		return vm_error_set(err, EIO, "network configuration %s: cannot read it", path);
	}
	fclose(f);
	text[size] = 0;
	r = strlen(text) == (size_t)size ? net_slirp_config_parse(text, path, cfg, policy, err)
					 : vm_error_set(err, EINVAL, "network configuration %s: has a NUL byte", path);
	free(text);
	return r;
}

/* ---- lifetime ---- */

static void add_host_addresses(struct net_policy *p)
{
	struct ifaddrs *list, *i;

	if (getifaddrs(&list) < 0)
		return;
	for (i = list; i; i = i->ifa_next) {
		struct net_addr a = { 0 };

		if (!i->ifa_addr)
			continue;
		if (i->ifa_addr->sa_family == AF_INET) {
			a.family = 4;
			memcpy(a.bytes, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, 4);
		} else if (i->ifa_addr->sa_family == AF_INET6) {
			a.family = 6;
			memcpy(a.bytes, &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, 16);
		} else {
			continue;
		}
		net_policy_host_address(p, &a);
	}
	freeifaddrs(list);
}

int net_slirp_start(struct net_slirp **out, const struct net_slirp_config *cfg, struct vm_error *err)
{
	struct net_slirp *ns;
	SlirpConfig sc = { 0 };
	int r;

	*out = NULL;
	if (cfg->n_forwards > NET_SLIRP_MAX_FORWARDS)
		return vm_error_set(err, E2BIG, "ports: more than %d forwards", NET_SLIRP_MAX_FORWARDS);
	ns = calloc(1, sizeof(*ns));
	if (!ns)
		return vm_error_set(err, ENOMEM, "network: out of memory");
	ns->wake_fd = ns->rx_fd = -1;
	pthread_mutex_init(&ns->lock, NULL);
	ns->policy = *cfg->policy;
	ns->rx_ready = cfg->rx_ready;
	ns->rx_opaque = cfg->rx_opaque;
	add_host_addresses(&ns->policy);
	ns->tx.slots = calloc(NET_SLIRP_QUEUE, sizeof(struct frame));
	ns->rx.slots = calloc(NET_SLIRP_QUEUE, sizeof(struct frame));
	ns->cap_pfds = 64;
	ns->pfds = calloc(ns->cap_pfds, sizeof(*ns->pfds));
	ns->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ns->rx_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!ns->tx.slots || !ns->rx.slots || !ns->pfds || ns->wake_fd < 0 || ns->rx_fd < 0) {
		r = vm_error_set(err, errno ? errno : ENOMEM, "network: cannot set up the backend: %s", strerror(errno));
		goto fail;
	}

	sc.version = 4;
	sc.in_enabled = true;
	sc.vnetwork.s_addr = htonl(NET_NETWORK_IP4);
	sc.vnetmask.s_addr = htonl(NET_NETMASK_IP4);
	sc.vhost.s_addr = htonl(NET_GATEWAY_IP4);
	sc.vdhcp_start.s_addr = htonl(NET_GUEST_IP4);
	sc.vnameserver.s_addr = htonl(NET_DNS_IP4);
	sc.in6_enabled = true;
	inet_pton(AF_INET6, "fec0::", &sc.vprefix_addr6);
	sc.vprefix_len = 64;
	inet_pton(AF_INET6, "fec0::2", &sc.vhost6);
	inet_pton(AF_INET6, "fec0::3", &sc.vnameserver6);
	sc.vhostname = "smol";
	sc.if_mtu = 1500;
	sc.if_mru = 1500;
	/* Defence in depth: unless host.smol.internal is allowed, libslirp itself refuses the host's loopback. */
	sc.disable_host_loopback = !ns->policy.host_allowed;
	ns->slirp = slirp_new(&sc, &callbacks, ns);
	if (!ns->slirp) {
		r = vm_error_set(err, ENOMEM, "network: libslirp would not start");
		goto fail;
	}
	for (unsigned i = 0; i < cfg->n_forwards; i++) {
		ns->forwards[i] = cfg->forwards[i];
		r = add_forward(ns, &ns->forwards[i], err);
		if (r < 0)
			goto fail;
		ns->n_forwards++;
		if (net_policy_forward(&ns->policy, ns->forwards[i].guest_port) < 0) {
			r = vm_error_set(err, E2BIG, "ports: more than %d guest ports", NET_POLICY_MAX_FORWARDS);
			goto fail;
		}
	}
	r = -pthread_create(&ns->thread, NULL, backend_thread, ns);
	if (r < 0) {
		vm_error_set(err, -r, "network: cannot start its thread: %s", strerror(-r));
		goto fail;
	}
	ns->thread_started = 1;
	*out = ns;
	return 0;
fail:
	net_slirp_stop(ns);
	return r;
}

void net_slirp_stop(struct net_slirp *ns)
{
	if (!ns)
		return;
	if (ns->thread_started) {
		atomic_store(&ns->stop, 1);
		kick(ns->wake_fd);
		pthread_join(ns->thread, NULL);
	}
	if (ns->slirp)
		slirp_cleanup(ns->slirp);
	while (ns->timers) {
		struct slirp_timer *t = ns->timers;

		ns->timers = t->next;
		free(t);
	}
	if (ns->wake_fd >= 0)
		close(ns->wake_fd);
	if (ns->rx_fd >= 0)
		close(ns->rx_fd);
	free(ns->tx.slots);
	free(ns->rx.slots);
	free(ns->pfds);
	pthread_mutex_destroy(&ns->lock);
	free(ns);
}

int net_slirp_send(struct net_slirp *ns, const void *frame, size_t len)
{
	int r, was_empty;

	if (len > NET_SLIRP_FRAME_MAX)
		return -EMSGSIZE;
	pthread_mutex_lock(&ns->lock);
	was_empty = ns->tx.count == 0;
	r = ring_push(&ns->tx, frame, len);
	pthread_mutex_unlock(&ns->lock);
	if (r == 0 && was_empty)
		kick(ns->wake_fd);
	return r;
}

ssize_t net_slirp_recv(struct net_slirp *ns, void *buf, size_t size)
{
	ssize_t n = -EAGAIN;

	pthread_mutex_lock(&ns->lock);
	struct frame *f = ring_front(&ns->rx);

	if (f) {
		n = f->len <= size ? f->len : -EMSGSIZE;
		if (n > 0)
			memcpy(buf, f->data, f->len);
		ring_pop(&ns->rx);
	}
	pthread_mutex_unlock(&ns->lock);
	return n;
}

int net_slirp_rx_fd(const struct net_slirp *ns)
{
	return ns->rx_fd;
}

unsigned net_slirp_forwards(const struct net_slirp *ns, struct net_forward *out, unsigned max)
{
	unsigned n = ns->n_forwards < max ? ns->n_forwards : max;

	memcpy(out, ns->forwards, n * sizeof(*out));
	return n;
}

unsigned net_slirp_events(struct net_slirp *ns, uint64_t after, struct net_event *out, unsigned max)
{
	unsigned n;

	pthread_mutex_lock(&ns->lock);
	n = net_policy_events(&ns->policy, after, out, max);
	pthread_mutex_unlock(&ns->lock);
	return n;
}

void net_slirp_stats(struct net_slirp *ns, struct net_slirp_stats *out)
{
	pthread_mutex_lock(&ns->lock);
	*out = ns->stats;
	memcpy(out->refused, ns->policy.refused, sizeof(out->refused));
	pthread_mutex_unlock(&ns->lock);
}

/* ---- who holds a port ---- */

/* The inode of a socket listening on TCP port `port`, from /proc/net/tcp or tcp6; 0 when none is found. */
static unsigned long listening_inode(const char *table, uint16_t port)
{
	FILE *f = fopen(table, "r");
	char line[512];
	unsigned long found = 0;

	if (!f)
		return 0;
	if (!fgets(line, sizeof(line), f)) {
		fclose(f);
		return 0;
	}
	while (!found && fgets(line, sizeof(line), f)) {
		char local[64];
		unsigned state, lport;
		unsigned long inode;

		if (sscanf(line, " %*d: %63s %*s %x %*s %*s %*s %*d %*d %lu", local, &state, &inode) != 3)
			continue;
		char *colon = strrchr(local, ':');

		if (!colon || sscanf(colon + 1, "%x", &lport) != 1)
			continue;
		if (lport == port && state == 0x0a && inode)
			found = inode;
	}
	fclose(f);
	return found;
}

int net_port_holder(uint16_t port, char *buf, size_t size)
{
	unsigned long inode = listening_inode("/proc/net/tcp", port);
	char want[64], path[PATH_MAX], link[128];
	struct dirent *p;
	DIR *procs;
	int found = -ENOENT;

	if (!inode)
		inode = listening_inode("/proc/net/tcp6", port);
	if (!inode)
		return -ENOENT;
	snprintf(want, sizeof(want), "socket:[%lu]", inode);
	procs = opendir("/proc");
	if (!procs)
		return -ENOENT;
	while (found < 0 && (p = readdir(procs))) {
		DIR *fds;
		struct dirent *d;

		if (p->d_name[0] < '0' || p->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/fd", p->d_name);
		fds = opendir(path);
		if (!fds)
			continue;	/* another user's process: not ours to read */
		while (found < 0 && (d = readdir(fds))) {
			ssize_t n;

			snprintf(path, sizeof(path), "/proc/%s/fd/%s", p->d_name, d->d_name);
			n = readlink(path, link, sizeof(link) - 1);
			if (n <= 0)
				continue;
			link[n] = 0;
			if (strcmp(link, want) == 0) {
				char comm[64] = "?";
				FILE *c;

				snprintf(path, sizeof(path), "/proc/%s/comm", p->d_name);
				c = fopen(path, "r");
				if (c) {
					if (fgets(comm, sizeof(comm), c))
						comm[strcspn(comm, "\n")] = 0;
					fclose(c);
				}
				snprintf(buf, size, "pid %s (%s)", p->d_name, comm);
				found = 0;
			}
		}
		closedir(fds);
	}
	closedir(procs);
	return found;
}

int net_slirp_backend_send(void *ns, const void *frame, size_t len)
{
	return net_slirp_send(ns, frame, len);
}

ssize_t net_slirp_backend_recv(void *ns, void *buf, size_t size)
{
	return net_slirp_recv(ns, buf, size);
}
