/* Builds sample state blobs for the snapshot tests and the fuzzer's seeds (snap_sample.h). */
#include "snap_sample.h"
#include "error.h"
#include "le_codec.h"
#include "virtio.h"
#include "virtio_net.h"
#include "virtio_vsock.h"
#include "vmgenid.h"

#include <linux/kvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* IER RDI|THRI, LCR 8N1, MCR DTR|RTS|OUT2, no errors, SCR, divisor 1, FIFO on (trigger 14), THRI pending, "abc". */
const uint8_t sample_uart_state[13] = { 0x03, 0x03, 0x0b, 0x00, 0x5a, 0x01, 0x00, 0xc1, 1, 3, 'a', 'b', 'c' };

static void put_le(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint8_t *section_bytes(uint32_t kind, uint32_t index, const void *data, size_t len)
{
	uint8_t *p = malloc(len ? len : 1);

	if (!p)
		abort();
	for (size_t j = 0; j < len; j++)
		p[j] = data ? ((const uint8_t *)data)[j] : (uint8_t)(kind * 31 + index * 7 + j);
	return p;
}

void sample_add(struct snap_sample *sp, uint32_t kind, uint32_t index, const void *data, size_t len)
{
	struct sample_section *s;

	if (sp->n >= SAMPLE_MAX_SECTIONS)
		abort();
	s = &sp->s[sp->n++];
	s->kind = kind;
	s->index = index;
	s->data = section_bytes(kind, index, data, len);
	s->len = len;
}

struct sample_section *sample_find(struct snap_sample *sp, uint32_t kind, uint32_t index)
{
	for (unsigned i = 0; i < sp->n; i++)
		if (sp->s[i].kind == kind && sp->s[i].index == index)
			return &sp->s[i];
	return NULL;
}

void sample_set(struct snap_sample *sp, uint32_t kind, uint32_t index, const void *data, size_t len)
{
	struct sample_section *s = sample_find(sp, kind, index);

	if (!s)
		abort();
	free(s->data);
	s->data = section_bytes(kind, index, data, len);
	s->len = len;
}

void sample_remove(struct snap_sample *sp, uint32_t kind, uint32_t index)
{
	struct sample_section *s = sample_find(sp, kind, index);

	if (!s)
		abort();
	free(s->data);
	memmove(s, s + 1, (size_t)(&sp->s[sp->n] - (s + 1)) * sizeof(*s));
	sp->n--;
}

/* A counted array section (CPUID, MSRS): u32 count, then count patterned entries. */
static void add_counted(struct snap_sample *sp, uint32_t kind, uint32_t index, uint32_t count, size_t entry)
{
	size_t len = 4 + count * entry;
	uint8_t *p = section_bytes(kind, index, NULL, len);

	put_le(p, count, 4);
	sample_add(sp, kind, index, p, len);
	free(p);
}

void sample_init(struct snap_sample *sp, uint32_t nr_cpus, uint64_t mem_size, const char *parent_path)
{
	uint8_t vm[24] = { 0 }, dev[1 + 4 + sizeof(sample_uart_state)];

	memset(sp, 0, sizeof(*sp));
	memset(sp->id, 0x11, sizeof(sp->id));
	put_le(vm, mem_size, 8);
	put_le(vm + 8, nr_cpus, 4);
	put_le(vm + 16, SAMPLE_TSC_KHZ, 8);
	sample_add(sp, SNAP_VM, 0, vm, sizeof(vm));
	if (parent_path) {
		memset(sp->parent, 0x22, sizeof(sp->parent));
		sample_add(sp, SNAP_PARENT, 0, parent_path, strlen(parent_path));
	}
	sample_add(sp, SNAP_CLOCK, 0, NULL, sizeof(struct kvm_clock_data));
	sample_add(sp, SNAP_PIT, 0, NULL, sizeof(struct kvm_pit_state2));
	for (uint32_t chip = 0; chip < 3; chip++)
		sample_add(sp, SNAP_IRQCHIP, chip, NULL, sizeof(struct kvm_irqchip));
	for (uint32_t cpu = 0; cpu < nr_cpus; cpu++) {
		add_counted(sp, SNAP_CPUID, cpu, 2, sizeof(struct kvm_cpuid_entry2));
		sample_add(sp, SNAP_MP_STATE, cpu, NULL, sizeof(struct kvm_mp_state));
		sample_add(sp, SNAP_REGS, cpu, NULL, sizeof(struct kvm_regs));
		sample_add(sp, SNAP_SREGS, cpu, NULL, sizeof(struct kvm_sregs));
		sample_add(sp, SNAP_XSAVE, cpu, NULL, sizeof(struct kvm_xsave));
		sample_add(sp, SNAP_XCRS, cpu, NULL, sizeof(struct kvm_xcrs));
		sample_add(sp, SNAP_DEBUGREGS, cpu, NULL, sizeof(struct kvm_debugregs));
		sample_add(sp, SNAP_LAPIC, cpu, NULL, sizeof(struct kvm_lapic_state));
		add_counted(sp, SNAP_MSRS, cpu, 3, sizeof(struct kvm_msr_entry));
		sample_add(sp, SNAP_VCPU_EVENTS, cpu, NULL, sizeof(struct kvm_vcpu_events));
	}
	dev[0] = 4;
	memcpy(dev + 1, "com1", 4);
	memcpy(dev + 5, sample_uart_state, sizeof(sample_uart_state));
	sample_add(sp, SNAP_DEVICE, 0, dev, sizeof(dev));
	sample_add(sp, SNAP_CONSOLE_INPUT, 0, "ls\n", 3);
}

void sample_add_device(struct snap_sample *sp, const char *name, const void *state, size_t len)
{
	size_t name_len = strlen(name);
	uint8_t *p = malloc(1 + name_len + len);

	if (!p)
		abort();
	p[0] = (uint8_t)name_len;
	memcpy(p + 1, name, name_len);
	memcpy(p + 1 + name_len, state, len);
	sample_add(sp, SNAP_DEVICE, 0, p, 1 + name_len + len);
	free(p);
}

/* A virtio device in `slot` whose driver is up with `nr_queues` ready queues in the first MiB of guest RAM. */
static struct virtio_dev_state sample_virtio(uint8_t slot, uint8_t nr_queues)
{
	struct virtio_dev_state s = { .slot = slot, .gsi = 5u + slot, .base = 0xc0001000ULL + 0x1000ULL * slot };
	struct virtio_mmio_state *t = &s.transport;

	t->nr_queues = nr_queues;
	t->status = VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK |
		    VIRTIO_STATUS_DRIVER_OK;
	t->drv_features = 1ULL << VIRTIO_F_VERSION_1;
	t->int_status = VIRTIO_INT_USED;
	t->config_gen = 1;
	for (uint8_t q = 0; q < nr_queues; q++)
		t->q[q] = (struct virtq_state){ .num = 8, .ready = 1, .last_avail = (uint16_t)(3 + q),
						.used_idx = (uint16_t)(3 + q), .desc = 0x10000u + 0x1000u * q,
						.avail = 0x30000u + 0x1000u * q, .used = 0x50000u + 0x1000u * q };
	return s;
}

const char *const sample_device_names[SAMPLE_NR_DEVICES] = { "com1", "vmgenid", "virtio-blk", "virtio-rng",
							     "virtio-vsock", "virtio-console", "virtio-net",
							     "virtio-blk-1", "virtio-blk-2", "virtio-blk-3",
							     "virtio-blk-4" };

void sample_add_device_state(struct snap_sample *sp, const char *name)
{
	static struct virtio_blk_state blk;
	static uint8_t buf[VIRTIO_BLK_STATE_MAX];
	struct le_writer w;

	le_writer_init(&w, buf, sizeof(buf));
	if (!strcmp(name, "com1")) {
		le_put_bytes(&w, sample_uart_state, sizeof(sample_uart_state));
	} else if (!strcmp(name, "vmgenid")) {
		struct vmgenid_state gen = { .addr = 0xef000, .gsi = 23 };

		vmgenid_state_encode(&gen, &w);
	} else if (!strcmp(name, "virtio-blk")) {
		memset(&blk, 0, sizeof(blk));
		blk.dev = sample_virtio(0, 1);
		blk.writable = 1;
		blk.disk_size = 1 << 20;
		memset(blk.layer_id, 0x5a, sizeof(blk.layer_id));
		strcpy(blk.path, "/var/lib/smol/disks/layer-1.smoldisk");
		virtio_blk_state_encode(&blk, &w);
	} else if (!strncmp(name, "virtio-blk-", 11)) {
		int n = name[11] - '0';	/* a volume: slot 4 + n, GSI 9 + n; read-only ones record their image */

		memset(&blk, 0, sizeof(blk));
		blk.dev = sample_virtio((uint8_t)(4 + n), 1);
		blk.writable = n % 2;
		blk.disk_size = 64 << 20;
		if (blk.writable)
			memset(blk.layer_id, 0x30 + n, sizeof(blk.layer_id));
		snprintf(blk.path, sizeof(blk.path), "/var/lib/smol/images/volume-%d.img", n);
		virtio_blk_state_encode(&blk, &w);
	} else if (!strcmp(name, "virtio-rng")) {
		struct virtio_dev_state rng = sample_virtio(1, 1);

		virtio_dev_state_encode(&rng, &w);
	} else if (!strcmp(name, "virtio-vsock")) {
		struct virtio_vsock_state vsock = { .dev = sample_virtio(2, 3), .guest_cid = 3 };

		virtio_vsock_state_encode(&vsock, &w);
	} else if (!strcmp(name, "virtio-console")) {
		struct virtio_dev_state con = sample_virtio(3, 2);

		virtio_dev_state_encode(&con, &w);
	} else if (!strcmp(name, "virtio-net")) {
		struct virtio_net_state net = { .dev = sample_virtio(4, 2), .mac = { 0x52, 0x54, 0, 0x12, 0x34, 0x56 } };

		virtio_net_state_encode(&net, &w);
	} else {
		abort();
	}
	if (w.overflow)
		abort();
	sample_add_device(sp, name, buf, w.len);
}

void sample_add_devices(struct snap_sample *sp)
{
	for (int i = 0; i < SAMPLE_NR_DEVICES; i++)
		if (strcmp(sample_device_names[i], "com1"))	/* sample_init has it */
			sample_add_device_state(sp, sample_device_names[i]);
}

void sample_free(struct snap_sample *sp)
{
	for (unsigned i = 0; i < sp->n; i++)
		free(sp->s[i].data);
	sp->n = 0;
}

uint8_t *sample_build(const struct snap_sample *sp, size_t *len)
{
	struct snap_writer w;
	struct vm_error err;

	snap_writer_init(&w);
	for (unsigned i = 0; i < sp->n; i++) {
		const struct sample_section *s = &sp->s[i];

		if (s->kind == SNAP_DEVICE && s->len) {
			/* In pieces, as a device's save does. */
			size_t at = snap_begin(&w, s->kind, s->index);

			snap_append(&w, s->data, 1);
			snap_append(&w, s->data + 1, s->len - 1);
			snap_end(&w, at);
		} else {
			snap_put(&w, s->kind, s->index, s->data, s->len);
		}
	}
	if (snap_writer_finish(&w, sp->id, sp->parent, &err) < 0) {
		snap_writer_free(&w);
		return NULL;
	}
	*len = w.len;
	return w.buf;
}

void sample_reseal(uint8_t *blob, size_t len)
{
	put_le(blob + 16, len, 8);
	put_le(blob + len - SNAP_TRAILER_SIZE, snap_crc64(0, blob, len - SNAP_TRAILER_SIZE), 8);
}
