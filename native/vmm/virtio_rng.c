/* virtio-rng (virtio 1.2, 5.4): the driver's writable buffers filled from the host's getrandom(2). */
#include "guest_mem.h"
#include "virtio.h"

#include <errno.h>
#include <sys/random.h>

static uint64_t rng_features(void *dev)
{
	(void)dev;
	return 0;
}

static void rng_config_read(void *dev, uint32_t off, uint8_t *data, uint32_t len)
{
	(void)dev;
	(void)off;
	(void)data;
	(void)len;	/* no config space (config_len 0): never called */
}

static int rng_queue_work(struct virtio_mmio *t, int qi, const char **why)
{
	struct virtq *q = &t->q[qi];
	struct virtq_chain *c = &(struct virtq_chain){ 0 };
	static __thread uint8_t buf[VIRTIO_RNG_MAX_REQUEST];
	int done = 0, ret;

	while ((ret = virtq_pop(q, t->mem, c, why)) > 0) {
		uint64_t want = c->in_len < sizeof(buf) ? c->in_len : sizeof(buf), got = 0;
		uint32_t written;

		while (got < want) {
			ssize_t n = getrandom(buf + got, want - got, 0);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;	/* cannot happen once the pool is up; give the driver what there is */
			got += (uint64_t)n;
		}
		written = (uint32_t)virtq_chain_write(c, t->mem, 0, buf, got);
		if (virtq_push(q, t->mem, c->head, written) < 0) {
			*why = "the used ring is not in guest RAM";
			return -1;
		}
		done = 1;
	}
	return ret < 0 ? -1 : done;
}

const struct virtio_dev_ops virtio_rng_ops = {
	.name = "virtio-rng",
	.device_id = VIRTIO_ID_ENTROPY,
	.nr_queues = 1,
	.config_len = 0,
	.features = rng_features,
	.config_read = rng_config_read,
	.queue_work = rng_queue_work,
};
