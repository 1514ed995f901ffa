/* Builds sample state blobs for the snapshot tests and the fuzzer's seeds (snap_sample.h). */
#include "snap_sample.h"
#include "error.h"

#include <linux/kvm.h>
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
