/* The virtio-mmio transport, version 2 (virtio 1.2, 4.2.2): registers, status and feature negotiation, queues. */
#include "guest_mem.h"
#include "virtio.h"

#include <stdio.h>
#include <string.h>

#define STATE_VERSION 1
#define KNOWN_STATUS (VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_DRIVER_OK | \
		      VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_NEEDS_RESET | VIRTIO_STATUS_FAILED)

void virtio_mmio_init(struct virtio_mmio *t, const struct virtio_dev_ops *ops, void *dev, struct guest_mem *mem)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->lock, NULL);
	t->ops = ops;
	t->dev = dev;
	t->mem = mem;
}

void virtio_mmio_exit(struct virtio_mmio *t)
{
	pthread_mutex_destroy(&t->lock);
}

static uint64_t offered(const struct virtio_mmio *t)
{
	return t->ops->features(t->dev) | (1ULL << VIRTIO_F_VERSION_1);
}

static void raise_irq(struct virtio_mmio *t, uint32_t why)
{
	t->int_status |= why;
	if (t->raise_irq)
		t->raise_irq(t->irq_opaque);
}

static void reset(struct virtio_mmio *t)
{
	t->status = 0;
	t->dev_features_sel = t->drv_features_sel = 0;
	t->drv_features = 0;
	t->queue_sel = 0;
	t->int_status = 0;
	memset(t->q, 0, sizeof(t->q));
	if (t->ops->reset)
		t->ops->reset(t->dev);
}

/* The device stops serving until the driver resets it (virtio 1.2, 2.1.1). */
static void needs_reset(struct virtio_mmio *t, const char *why)
{
	if (t->status & VIRTIO_STATUS_NEEDS_RESET)
		return;
	if (t->log && !t->logged) {	/* once per device: a guest must not be able to flood the host's log */
		char msg[160];

		snprintf(msg, sizeof(msg), "%s: %s; the device needs a reset", t->ops->name, why);
		t->log(t->irq_opaque, msg);
		t->logged = 1;
	}
	t->status |= VIRTIO_STATUS_NEEDS_RESET;
	if (t->status & VIRTIO_STATUS_DRIVER_OK)
		raise_irq(t, VIRTIO_INT_CONFIG);
}

static int serving(const struct virtio_mmio *t)
{
	return (t->status & VIRTIO_STATUS_DRIVER_OK) && !(t->status & VIRTIO_STATUS_NEEDS_RESET);
}

static void notify_locked(struct virtio_mmio *t, uint32_t qi)
{
	const char *why = "the device refused a request";
	int ret;

	if (qi >= t->ops->nr_queues || !serving(t) || !t->q[qi].ready || t->q[qi].broken)
		return;
	ret = t->ops->queue_work(t, (int)qi, &why);
	if (ret < 0) {
		t->q[qi].broken = 1;
		needs_reset(t, why);
	} else if (ret > 0) {
		raise_irq(t, VIRTIO_INT_USED);
	}
}

void virtio_mmio_notify(struct virtio_mmio *t, uint32_t q)
{
	pthread_mutex_lock(&t->lock);
	notify_locked(t, q);
	pthread_mutex_unlock(&t->lock);
}

void virtio_mmio_kick_all_locked(struct virtio_mmio *t)
{
	for (uint32_t q = 0; q < t->ops->nr_queues; q++)
		notify_locked(t, q);
}

static struct virtq *selected(struct virtio_mmio *t)
{
	return t->queue_sel < t->ops->nr_queues ? &t->q[t->queue_sel] : NULL;
}

static uint32_t reg_read(struct virtio_mmio *t, uint64_t off)
{
	struct virtq *q = selected(t);

	switch (off) {
	case VIRTIO_MMIO_MAGIC_VALUE:
		return VIRTIO_MMIO_MAGIC;
	case VIRTIO_MMIO_VERSION:
		return VIRTIO_MMIO_VERSION_2;
	case VIRTIO_MMIO_DEVICE_ID:
		return t->ops->device_id;
	case VIRTIO_MMIO_VENDOR_ID:
		return VIRTIO_VENDOR_ID;
	case VIRTIO_MMIO_DEVICE_FEATURES:
		return t->dev_features_sel < 2 ? (uint32_t)(offered(t) >> (32 * t->dev_features_sel)) : 0;
	case VIRTIO_MMIO_QUEUE_NUM_MAX:
		return q ? VIRTQ_MAX_SIZE : 0;
	case VIRTIO_MMIO_QUEUE_READY:
		return q ? q->ready : 0;
	case VIRTIO_MMIO_INTERRUPT_STATUS:
		return t->int_status;
	case VIRTIO_MMIO_STATUS:
		return t->status;
	case VIRTIO_MMIO_CONFIG_GENERATION:
		return t->config_gen;
	}
	return 0;
}

static void set_half(uint64_t *v, int high, uint32_t value)
{
	*v = high ? (*v & 0xffffffffULL) | ((uint64_t)value << 32) : (*v & ~0xffffffffULL) | value;
}

static void status_write(struct virtio_mmio *t, uint32_t value)
{
	if (!value) {
		reset(t);
		return;
	}
	value &= KNOWN_STATUS & ~VIRTIO_STATUS_NEEDS_RESET;	/* the device's bit, not the driver's */
	if ((value & VIRTIO_STATUS_FEATURES_OK) && !(t->status & VIRTIO_STATUS_FEATURES_OK)) {
		/* Refuse features we did not offer, and legacy drivers: FEATURES_OK then stays clear. */
		if ((t->drv_features & ~offered(t)) || !(t->drv_features & (1ULL << VIRTIO_F_VERSION_1)))
			value &= ~VIRTIO_STATUS_FEATURES_OK;
	}
	if ((value & VIRTIO_STATUS_DRIVER_OK) && !(value & VIRTIO_STATUS_FEATURES_OK))
		value &= ~VIRTIO_STATUS_DRIVER_OK;
	t->status = value | (t->status & VIRTIO_STATUS_NEEDS_RESET);
}

static void reg_write(struct virtio_mmio *t, uint64_t off, uint32_t value)
{
	struct virtq *q = selected(t);
	int q_writable = q && !q->ready;	/* a queue's size and addresses change only while it is not ready */
	const char *bad;

	switch (off) {
	case VIRTIO_MMIO_DEVICE_FEATURES_SEL:
		t->dev_features_sel = value;
		break;
	case VIRTIO_MMIO_DRIVER_FEATURES_SEL:
		t->drv_features_sel = value;
		break;
	case VIRTIO_MMIO_DRIVER_FEATURES:
		if (t->drv_features_sel < 2 && !(t->status & VIRTIO_STATUS_FEATURES_OK))
			set_half(&t->drv_features, (int)t->drv_features_sel, value);
		break;
	case VIRTIO_MMIO_QUEUE_SEL:
		t->queue_sel = value;
		break;
	case VIRTIO_MMIO_QUEUE_NUM:
		if (q_writable)
			q->num = value <= VIRTQ_MAX_SIZE ? (uint16_t)value : 0;	/* checked when it is made ready */
		break;
	case VIRTIO_MMIO_QUEUE_READY:
		if (!q)
			break;
		if (!(value & 1)) {
			q->ready = 0;
			break;
		}
		if (q->ready)
			break;
		bad = virtq_check_layout(q, t->mem);
		if (bad) {
			q->broken = 1;
			needs_reset(t, bad);
			break;
		}
		q->ready = 1;
		break;
	case VIRTIO_MMIO_QUEUE_NOTIFY:
		notify_locked(t, value);
		break;
	case VIRTIO_MMIO_INTERRUPT_ACK:
		t->int_status &= ~value;
		break;
	case VIRTIO_MMIO_STATUS:
		status_write(t, value);
		break;
	case VIRTIO_MMIO_QUEUE_DESC_LOW:
	case VIRTIO_MMIO_QUEUE_DESC_HIGH:
		if (q_writable)
			set_half(&q->desc, off == VIRTIO_MMIO_QUEUE_DESC_HIGH, value);
		break;
	case VIRTIO_MMIO_QUEUE_DRIVER_LOW:
	case VIRTIO_MMIO_QUEUE_DRIVER_HIGH:
		if (q_writable)
			set_half(&q->avail, off == VIRTIO_MMIO_QUEUE_DRIVER_HIGH, value);
		break;
	case VIRTIO_MMIO_QUEUE_DEVICE_LOW:
	case VIRTIO_MMIO_QUEUE_DEVICE_HIGH:
		if (q_writable)
			set_half(&q->used, off == VIRTIO_MMIO_QUEUE_DEVICE_HIGH, value);
		break;
	}
}

void virtio_mmio_access(struct virtio_mmio *t, uint64_t off, uint8_t *data, uint32_t len, int is_write)
{
	pthread_mutex_lock(&t->lock);
	if (off >= VIRTIO_MMIO_CONFIG) {
		uint64_t c = off - VIRTIO_MMIO_CONFIG;

		/* Config space: any width inside it; writes are ignored (nothing in it is writable). */
		if (!is_write) {
			memset(data, 0, len);
			if (c < t->ops->config_len && len <= t->ops->config_len - c)
				t->ops->config_read(t->dev, (uint32_t)c, data, len);
		}
	} else if (len != 4 || (off & 3)) {
		/* Registers are 32-bit, aligned (4.2.2.2): anything else reads 0 and writes nothing. */
		if (!is_write)
			memset(data, 0, len);
	} else if (is_write) {
		uint32_t v;

		memcpy(&v, data, 4);
		reg_write(t, off, v);
	} else {
		uint32_t v = reg_read(t, off);

		memcpy(data, &v, 4);
	}
	pthread_mutex_unlock(&t->lock);
}

static void put16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, 2);
}

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static uint16_t get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return v;
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

void virtio_mmio_save(const struct virtio_mmio *t, uint8_t out[VIRTIO_MMIO_STATE_LEN])
{
	memset(out, 0, VIRTIO_MMIO_STATE_LEN);
	out[0] = STATE_VERSION;
	out[1] = (uint8_t)t->ops->nr_queues;
	put32(out + 4, t->status);
	put32(out + 8, t->dev_features_sel);
	put32(out + 12, t->drv_features_sel);
	put64(out + 16, t->drv_features);
	put32(out + 24, t->queue_sel);
	put32(out + 28, t->int_status);
	put32(out + 32, t->config_gen);
	for (int i = 0; i < VIRTIO_MAX_QUEUES; i++) {
		const struct virtq *q = &t->q[i];
		uint8_t *p = out + 40 + 32 * i;

		put16(p, q->num);
		p[2] = q->ready;
		p[3] = q->broken;
		put16(p + 4, q->last_avail);
		put16(p + 6, q->used_idx);
		put64(p + 8, q->desc);
		put64(p + 16, q->avail);
		put64(p + 24, q->used);
	}
}

const char *virtio_mmio_load(struct virtio_mmio *t, const uint8_t *data, size_t len)
{
	struct virtq qs[VIRTIO_MAX_QUEUES];
	uint32_t status, int_status;
	uint64_t drv_features;

	if (len != VIRTIO_MMIO_STATE_LEN)
		return "the transport state has the wrong length";
	if (data[0] != STATE_VERSION)
		return "the transport state has an unknown version";
	if (data[1] != t->ops->nr_queues || get16(data + 2) || get32(data + 36))
		return "the transport state has another number of queues or non-zero reserved bytes";
	status = get32(data + 4);
	drv_features = get64(data + 16);
	int_status = get32(data + 28);
	if (status & ~KNOWN_STATUS)
		return "the device status has unknown bits";
	if ((status & VIRTIO_STATUS_FEATURES_OK) && (drv_features & ~offered(t)))
		return "the driver's features were never offered";
	if (int_status & ~(uint32_t)(VIRTIO_INT_USED | VIRTIO_INT_CONFIG))
		return "the interrupt status has unknown bits";
	memset(qs, 0, sizeof(qs));
	for (int i = 0; i < VIRTIO_MAX_QUEUES; i++) {
		struct virtq *q = &qs[i];
		const uint8_t *p = data + 40 + 32 * i;

		q->num = get16(p);
		q->ready = p[2];
		q->broken = p[3];
		q->last_avail = get16(p + 4);
		q->used_idx = get16(p + 6);
		q->desc = get64(p + 8);
		q->avail = get64(p + 16);
		q->used = get64(p + 24);
		if (q->ready > 1 || q->broken > 1 || q->num > VIRTQ_MAX_SIZE)
			return "a queue's state is out of range";
		if (i >= t->ops->nr_queues && (q->num || q->ready || q->broken || q->desc || q->avail || q->used ||
					       q->last_avail || q->used_idx))
			return "state for a queue the device does not have";
		if (q->ready && virtq_check_layout(q, t->mem))
			return "a ready queue is not in guest RAM";
	}
	t->status = status;
	t->dev_features_sel = get32(data + 8);
	t->drv_features_sel = get32(data + 12);
	t->drv_features = drv_features;
	t->queue_sel = get32(data + 24);
	t->int_status = int_status;
	t->config_gen = get32(data + 32);
	memcpy(t->q, qs, sizeof(qs));
	return NULL;
}
