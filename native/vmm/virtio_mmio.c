/* The virtio-mmio transport, version 2 (virtio 1.2, 4.2.2): registers, status and feature negotiation, queues. */
#include "guest_mem.h"
#include "le_codec.h"
#include "virtio.h"

#include <stdio.h>
#include <string.h>

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

/* ---- state (docs/snapshots.md, "virtio devices") ---- */

#define QUEUE_BITS(q) ((q)->num | (q)->ready | (q)->broken | (q)->last_avail | (q)->used_idx | (q)->desc | \
		       (q)->avail | (q)->used)

void virtio_dev_state_encode(const struct virtio_dev_state *s, struct le_writer *w)
{
	const struct virtio_mmio_state *t = &s->transport;

	le_put_u8(w, s->slot);
	le_put_u8(w, t->nr_queues);
	le_put_u16(w, 0);
	le_put_u32(w, s->gsi);
	le_put_u64(w, s->base);
	le_put_u32(w, t->status);
	le_put_u32(w, t->dev_features_sel);
	le_put_u32(w, t->drv_features_sel);
	le_put_u32(w, t->queue_sel);
	le_put_u64(w, t->drv_features);
	le_put_u32(w, t->int_status);
	le_put_u32(w, t->config_gen);
	for (int i = 0; i < VIRTIO_MAX_QUEUES; i++) {
		const struct virtq_state *q = &t->q[i];

		le_put_u16(w, q->num);
		le_put_u8(w, q->ready);
		le_put_u8(w, q->broken);
		le_put_u16(w, q->last_avail);
		le_put_u16(w, q->used_idx);
		le_put_u64(w, q->desc);
		le_put_u64(w, q->avail);
		le_put_u64(w, q->used);
	}
}

void virtio_dev_state_decode(struct le_reader *r, struct virtio_dev_state *s)
{
	struct virtio_mmio_state *t = &s->transport;

	memset(s, 0, sizeof(*s));
	s->slot = le_get_u8(r);
	t->nr_queues = le_get_u8(r);
	if (t->nr_queues < 1 || t->nr_queues > VIRTIO_MAX_QUEUES)
		le_fail(r, "the number of queues is out of range");
	le_get_zeros(r, 2, "the device's reserved bytes are not zero");
	s->gsi = le_get_u32(r);
	s->base = le_get_u64(r);
	t->status = le_get_u32(r);
	t->dev_features_sel = le_get_u32(r);
	t->drv_features_sel = le_get_u32(r);
	t->queue_sel = le_get_u32(r);
	t->drv_features = le_get_u64(r);
	t->int_status = le_get_u32(r);
	t->config_gen = le_get_u32(r);
	for (int i = 0; i < VIRTIO_MAX_QUEUES; i++) {
		struct virtq_state *q = &t->q[i];

		q->num = le_get_u16(r);
		q->ready = le_get_u8(r);
		q->broken = le_get_u8(r);
		q->last_avail = le_get_u16(r);
		q->used_idx = le_get_u16(r);
		q->desc = le_get_u64(r);
		q->avail = le_get_u64(r);
		q->used = le_get_u64(r);
		if (q->ready > 1 || q->broken > 1 || q->num > VIRTQ_MAX_SIZE)
			le_fail(r, "a queue's state is out of range");
		if (i >= t->nr_queues && QUEUE_BITS(q))
			le_fail(r, "state for a queue the device does not have");
	}
	if (t->status & ~KNOWN_STATUS)
		le_fail(r, "the device status has unknown bits");
	if (t->int_status & ~(uint32_t)(VIRTIO_INT_USED | VIRTIO_INT_CONFIG))
		le_fail(r, "the interrupt status has unknown bits");
}

const char *virtio_dev_state_parse(const uint8_t *data, size_t len, struct virtio_dev_state *s)
{
	struct le_reader r;

	le_reader_init(&r, data, len);
	virtio_dev_state_decode(&r, s);
	return le_finish(&r);
}

void virtio_mmio_get_state(struct virtio_mmio *t, struct virtio_mmio_state *s)
{
	memset(s, 0, sizeof(*s));
	s->nr_queues = (uint8_t)t->ops->nr_queues;
	s->status = t->status;
	s->dev_features_sel = t->dev_features_sel;
	s->drv_features_sel = t->drv_features_sel;
	s->drv_features = t->drv_features;
	s->queue_sel = t->queue_sel;
	s->int_status = t->int_status;
	s->config_gen = t->config_gen;
	for (int i = 0; i < VIRTIO_MAX_QUEUES; i++) {
		const struct virtq *q = &t->q[i];

		s->q[i] = (struct virtq_state){ .num = q->num, .ready = q->ready, .broken = q->broken,
						.last_avail = q->last_avail, .used_idx = q->used_idx, .desc = q->desc,
						.avail = q->avail, .used = q->used };
	}
}

const char *virtio_mmio_set_state(struct virtio_mmio *t, const struct virtio_mmio_state *s)
{
	struct virtq qs[VIRTIO_MAX_QUEUES];

	if (s->nr_queues != t->ops->nr_queues)
		return "the transport state has another number of queues than the device";
	if ((s->status & VIRTIO_STATUS_FEATURES_OK) && (s->drv_features & ~offered(t)))
		return "the driver's features were never offered";
	memset(qs, 0, sizeof(qs));
	for (int i = 0; i < VIRTIO_MAX_QUEUES; i++) {
		const struct virtq_state *v = &s->q[i];
		struct virtq *q = &qs[i];

		*q = (struct virtq){ .num = v->num, .ready = v->ready, .broken = v->broken,
				     .last_avail = v->last_avail, .used_idx = v->used_idx, .desc = v->desc,
				     .avail = v->avail, .used = v->used };
		if (q->ready && virtq_check_layout(q, t->mem))
			return "a ready queue is not in guest RAM";
	}
	t->status = s->status;
	t->dev_features_sel = s->dev_features_sel;
	t->drv_features_sel = s->drv_features_sel;
	t->drv_features = s->drv_features;
	t->queue_sel = s->queue_sel;
	t->int_status = s->int_status;
	t->config_gen = s->config_gen;
	memcpy(t->q, qs, sizeof(qs));
	return NULL;
}
