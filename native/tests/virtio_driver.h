/*
 * A minimal virtio driver for the tests and the fuzzer: it sets a device up through its MMIO registers as Linux's
 * virtio_mmio driver does, and puts descriptor chains on a split queue in guest memory. The device side is the
 * real transport and device code.
 */
#ifndef SMOL_TEST_VIRTIO_DRIVER_H
#define SMOL_TEST_VIRTIO_DRIVER_H

#include <stdint.h>
#include <string.h>

#include "guest_mem.h"
#include "virtio.h"

#define DRV_DESC 0x1000ULL
#define DRV_AVAIL 0x2000ULL
#define DRV_USED 0x3000ULL
#define DRV_BUF 0x10000ULL

struct drv {
	struct virtio_mmio *t;
	struct guest_mem *mem;
	uint16_t num;
	uint16_t avail_idx;	/* the driver's next avail index */
	uint16_t used_seen;
	int irqs;
};

static inline uint32_t drv_r32(struct drv *d, uint64_t off)
{
	uint32_t v;

	virtio_mmio_access(d->t, off, (uint8_t *)&v, 4, 0);
	return v;
}

static inline void drv_w32(struct drv *d, uint64_t off, uint32_t v)
{
	virtio_mmio_access(d->t, off, (uint8_t *)&v, 4, 1);
}

static inline void drv_irq(void *opaque)
{
	((struct drv *)opaque)->irqs++;
}

/* ACKNOWLEDGE, DRIVER, features (VERSION_1 and `extra`), FEATURES_OK, queue 0 at the DRV_* addresses, DRIVER_OK. */
static inline uint32_t drv_setup(struct drv *d, uint16_t num, uint64_t extra)
{
	d->num = num;
	d->t->raise_irq = drv_irq;
	d->t->irq_opaque = d;
	drv_w32(d, VIRTIO_MMIO_STATUS, 0);
	drv_w32(d, VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE);
	drv_w32(d, VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	drv_w32(d, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	drv_w32(d, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)extra);
	drv_w32(d, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	drv_w32(d, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)(extra >> 32) | 1);	/* VERSION_1 is bit 32 */
	drv_w32(d, VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK);
	drv_w32(d, VIRTIO_MMIO_QUEUE_SEL, 0);
	drv_w32(d, VIRTIO_MMIO_QUEUE_NUM, num);
	drv_w32(d, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)DRV_DESC);
	drv_w32(d, VIRTIO_MMIO_QUEUE_DESC_HIGH, 0);
	drv_w32(d, VIRTIO_MMIO_QUEUE_DRIVER_LOW, (uint32_t)DRV_AVAIL);
	drv_w32(d, VIRTIO_MMIO_QUEUE_DRIVER_HIGH, 0);
	drv_w32(d, VIRTIO_MMIO_QUEUE_DEVICE_LOW, (uint32_t)DRV_USED);
	drv_w32(d, VIRTIO_MMIO_QUEUE_DEVICE_HIGH, 0);
	drv_w32(d, VIRTIO_MMIO_QUEUE_READY, 1);
	drv_w32(d, VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK |
					       VIRTIO_STATUS_DRIVER_OK);
	return drv_r32(d, VIRTIO_MMIO_STATUS);
}

/* Descriptor i of the table. */
static inline void drv_desc(struct drv *d, uint16_t i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next)
{
	uint8_t *p = guest_mem_ptr(d->mem, DRV_DESC + 16ULL * i, 16);

	memcpy(p, &addr, 8);
	memcpy(p + 8, &len, 4);
	memcpy(p + 12, &flags, 2);
	memcpy(p + 14, &next, 2);
}

/* Offers the chain starting at `head` and notifies queue 0. */
static inline void drv_kick(struct drv *d, uint16_t head)
{
	uint8_t *avail = guest_mem_ptr(d->mem, DRV_AVAIL, 6 + 2ULL * d->num);

	memcpy(avail + 4 + 2 * (d->avail_idx % d->num), &head, 2);
	d->avail_idx++;
	memcpy(avail + 2, &d->avail_idx, 2);
	drv_w32(d, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
}

static inline uint16_t drv_used_idx(struct drv *d)
{
	uint16_t v;

	memcpy(&v, (uint8_t *)guest_mem_ptr(d->mem, DRV_USED, 4) + 2, 2);
	return v;
}

/* The used ring's element for used index `i`: the chain's head and the length written. */
static inline void drv_used(struct drv *d, uint16_t i, uint32_t *id, uint32_t *len)
{
	uint8_t *e = (uint8_t *)guest_mem_ptr(d->mem, DRV_USED + 4 + 8ULL * (i % d->num), 8);

	memcpy(id, e, 4);
	memcpy(len, e + 4, 4);
}

#endif
