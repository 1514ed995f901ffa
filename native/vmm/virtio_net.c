/*
 * virtio-net's device side (virtio_net.h): the two queues, the config space and the state codec. Called with the
 * transport's lock held, from the device's thread (or a test).
 */
#include "virtio_net.h"

#include "guest_mem.h"
#include "le_codec.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

static uint64_t net_features(void *dev)
{
	(void)dev;
	return 1ULL << VIRTIO_NET_F_MAC | 1ULL << VIRTIO_NET_F_STATUS;
}

static void net_config_read(void *dev, uint32_t off, uint8_t *data, uint32_t len)
{
	const struct virtio_net *vn = dev;
	uint8_t config[VIRTIO_NET_CONFIG_LEN];

	memcpy(config, vn->mac, 6);
	config[6] = VIRTIO_NET_S_LINK_UP;	/* little-endian u16 */
	config[7] = 0;
	memcpy(data, config + off, len);
}

static int used_gone(const char **why)
{
	*why = "the used ring is not in guest RAM";
	return -1;
}

static int transmit(struct virtio_mmio *t, struct virtio_net *vn, const char **why)
{
	struct virtq *q = &t->q[VIRTIO_NET_TX];
	struct virtq_chain *c = &vn->chain;
	int done = 0, ret;

	while ((ret = virtq_pop(q, t->mem, c, why)) > 0) {
		uint64_t frame = c->out_len > VIRTIO_NET_HDR_LEN ? c->out_len - VIRTIO_NET_HDR_LEN : 0;

		/* A chain without a header, a frame too short for Ethernet or longer than the MTU: not sent. */
		if (c->out_len < VIRTIO_NET_HDR_LEN || frame < 14 || frame > VIRTIO_NET_FRAME_MAX) {
			vn->bad_frames++;
		} else {
			virtq_chain_read(c, t->mem, VIRTIO_NET_HDR_LEN, vn->buf, frame);
			if (vn->backend && vn->backend->send(vn->backend->opaque, vn->buf, (size_t)frame) == 0)
				vn->tx_frames++;
			else
				vn->tx_dropped++;
		}
		if (virtq_push(q, t->mem, c->head, 0) < 0)
			return used_gone(why);
		done = 1;
	}
	return ret < 0 ? -1 : done;
}

static int receive(struct virtio_mmio *t, struct virtio_net *vn, const char **why)
{
	struct virtq *q = &t->q[VIRTIO_NET_RX];
	struct virtq_chain *c = &vn->chain;
	int done = 0, ret;

	while (vn->backend && (ret = virtq_pop(q, t->mem, c, why)) != 0) {
		uint8_t *hdr = vn->buf;
		ssize_t n;

		if (ret < 0)
			return -1;
		if (c->in_len < VIRTIO_NET_HDR_LEN + VIRTIO_NET_FRAME_MAX) {
			/* Too small for a whole frame: Linux never offers one without MRG_RXBUF; give it back empty. */
			if (virtq_push(q, t->mem, c->head, 0) < 0)
				return used_gone(why);
			done = 1;
			continue;
		}
		n = vn->backend->recv(vn->backend->opaque, vn->buf + VIRTIO_NET_HDR_LEN, VIRTIO_NET_FRAME_MAX);
		if (n == -EAGAIN) {
			q->last_avail--;	/* nothing waits: the buffer goes back, taken again first */
			break;
		}
		if (n < 0)
			continue;	/* a frame too long for the MTU: dropped by the backend */
		memset(hdr, 0, VIRTIO_NET_HDR_LEN);
		hdr[10] = 1;	/* num_buffers, little-endian */
		virtq_chain_write(c, t->mem, 0, vn->buf, VIRTIO_NET_HDR_LEN + (uint64_t)n);
		if (virtq_push(q, t->mem, c->head, (uint32_t)(VIRTIO_NET_HDR_LEN + n)) < 0)
			return used_gone(why);
		vn->rx_frames++;
		done = 1;
	}
	return done;
}

static int net_queue_work(struct virtio_mmio *t, int qi, const char **why)
{
	struct virtio_net *vn = t->dev;

	if (qi == VIRTIO_NET_TX)
		return transmit(t, vn, why);
	if (qi == VIRTIO_NET_RX)
		return receive(t, vn, why);
	return 0;
}

const struct virtio_dev_ops virtio_net_ops = {
	.name = "virtio-net",
	.device_id = VIRTIO_ID_NET,
	.nr_queues = 2,
	.config_len = VIRTIO_NET_CONFIG_LEN,
	.features = net_features,
	.config_read = net_config_read,
	.queue_work = net_queue_work,
};

void virtio_net_random_mac(uint8_t mac[6])
{
	uint8_t r[4] = { 0 };

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
		/* never short for 4 bytes once the pool is up; the zeros left still make a valid address */
	}
	mac[0] = 0x52;	/* locally administered, unicast; 52:55 is libslirp's own side, so not that */
	mac[1] = 0x54;
	memcpy(mac + 2, r, 4);
}

void virtio_net_state_encode(const struct virtio_net_state *s, struct le_writer *w)
{
	virtio_dev_state_encode(&s->dev, w);
	le_put_bytes(w, s->mac, 6);
}

const char *virtio_net_state_decode(const uint8_t *data, size_t len, struct virtio_net_state *s)
{
	struct le_reader r;

	memset(s, 0, sizeof(*s));
	le_reader_init(&r, data, len);
	virtio_dev_state_decode(&r, &s->dev);
	le_get_bytes(&r, s->mac, 6);
	if (s->mac[0] & 1)
		le_fail(&r, "the MAC address is a multicast one");
	return le_finish(&r);
}
