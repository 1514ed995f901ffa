/*
 * virtio-console (virtio 1.2, 5.3), one port and no features: the console a Linux guest knows as /dev/hvc0. The
 * transmit queue's buffers go into the VM's console output ring whole, one VM exit per buffer instead of one per
 * byte as on the UART; the receive queue's buffers are filled from the console's input queue.
 *
 * A transmit buffer that does not fit under the console's limit waits for a reader that reads, at most the console's
 * stall time (console.h); a stalled reader's buffers are taken and dropped, so the guest (Linux's hvc0 spins with
 * interrupts off) always gets them back. Only a pause cuts the wait short: then the buffer is put back on the avail
 * ring (taken again later, in order) and the console calls back once its reader has made room. Nothing is
 * half-taken, so a snapshot never has to remember a partly copied buffer.
 */
#include "console.h"
#include "guest_mem.h"
#include "virtio.h"

#include <string.h>

static uint64_t console_features(void *dev)
{
	(void)dev;
	return 0;	/* no SIZE, no MULTIPORT, no EMERG_WRITE: one port, its size left to the guest */
}

static void console_config_read(void *dev, uint32_t off, uint8_t *data, uint32_t len)
{
	/* cols, rows (u16 each; meaningful with SIZE only), max_nr_ports (u32; MULTIPORT only), emerg_wr (u32) */
	uint8_t config[VIRTIO_CONSOLE_CONFIG_LEN] = { 0 };

	(void)dev;
	config[4] = 1;
	memcpy(data, config + off, len);
}

/* Puts the chain taken last back on the avail ring: it is taken again, first, by the next virtq_pop. */
static void unpop(struct virtq *q)
{
	q->last_avail--;
}

static int transmit(struct virtio_mmio *t, struct virtio_console *vc, const char **why)
{
	struct virtq *q = &t->q[VIRTIO_CONSOLE_TX];
	struct virtq_chain *c = &vc->chain;
	int done = 0, ret;

	while ((ret = virtq_pop(q, t->mem, c, why)) > 0) {
		uint64_t len = c->out_len < VIRTIO_CONSOLE_MAX_BUFFER ? c->out_len : VIRTIO_CONSOLE_MAX_BUFFER;

		virtq_chain_read(c, t->mem, 0, vc->buf, len);
		if (!console_out_offer(vc->con, vc->buf, len)) {
			unpop(q);	/* the console calls back when there is room */
			break;
		}
		vc->dropped += c->out_len - len;
		if (virtq_push(q, t->mem, c->head, 0) < 0) {
			*why = "the used ring is not in guest RAM";
			return -1;
		}
		done = 1;
	}
	return ret < 0 ? -1 : done;
}

static int receive(struct virtio_mmio *t, struct virtio_console *vc, const char **why)
{
	struct virtq *q = &t->q[VIRTIO_CONSOLE_RX];
	struct virtq_chain *c = &vc->chain;
	int done = 0, ret;

	while (console_in_pending(vc->con) && (ret = virtq_pop(q, t->mem, c, why)) != 0) {
		uint64_t room = c->in_len < VIRTIO_CONSOLE_MAX_BUFFER ? c->in_len : VIRTIO_CONSOLE_MAX_BUFFER;
		size_t n;

		if (ret < 0)
			return -1;
		if (!room) {	/* a buffer the device cannot write: give it back empty */
			if (virtq_push(q, t->mem, c->head, 0) < 0)
				goto gone;
			done = 1;
			continue;
		}
		n = console_in_take(vc->con, vc->buf, room);
		virtq_chain_write(c, t->mem, 0, vc->buf, n);
		if (virtq_push(q, t->mem, c->head, (uint32_t)n) < 0)
			goto gone;
		done = 1;
	}
	return done;
gone:
	*why = "the used ring is not in guest RAM";
	return -1;
}

static int console_queue_work(struct virtio_mmio *t, int qi, const char **why)
{
	struct virtio_console *vc = t->dev;

	if (qi == VIRTIO_CONSOLE_TX)
		return transmit(t, vc, why);
	if (qi == VIRTIO_CONSOLE_RX)
		return receive(t, vc, why);
	return 0;
}

int virtio_console_takes_input(const struct virtio_mmio *t)
{
	return (__atomic_load_n(&t->status, __ATOMIC_ACQUIRE) & (VIRTIO_STATUS_DRIVER_OK | VIRTIO_STATUS_NEEDS_RESET)) ==
	       VIRTIO_STATUS_DRIVER_OK;
}

const struct virtio_dev_ops virtio_console_ops = {
	.name = "virtio-console",
	.device_id = VIRTIO_ID_CONSOLE,
	.nr_queues = 2,
	.config_len = VIRTIO_CONSOLE_CONFIG_LEN,
	.features = console_features,
	.config_read = console_config_read,
	.queue_work = console_queue_work,
};
