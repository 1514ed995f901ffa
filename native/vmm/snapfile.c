/* The snapshot file formats: building and checking state blobs and memory layer headers (docs/snapshots.md). */
#include "snapfile.h"
#include "error.h"
#include "le_codec.h"

#include <errno.h>
#include <linux/kvm.h>
#include <stdlib.h>
#include <string.h>

#define CRC64_XZ_POLY 0xc96c5795d7870f42ULL	/* ECMA-182, reflected */

uint64_t snap_crc64(uint64_t crc, const void *buf, size_t len)
{
	static uint64_t table[256];
	static int ready;
	const uint8_t *p = buf;

	if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
		for (unsigned i = 0; i < 256; i++) {
			uint64_t c = i;

			for (int k = 0; k < 8; k++)
				c = (c >> 1) ^ ((c & 1) ? CRC64_XZ_POLY : 0);
			table[i] = c;	/* racing initialisers write the same values */
		}
		__atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
	}
	crc = ~crc;
	while (len--)
		crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

const char *snap_kind_name(uint32_t kind)
{
	switch (kind) {
	case SNAP_VM: return "VM";
	case SNAP_PARENT: return "PARENT";
	case SNAP_CLOCK: return "CLOCK";
	case SNAP_PIT: return "PIT";
	case SNAP_IRQCHIP: return "IRQCHIP";
	case SNAP_CPUID: return "CPUID";
	case SNAP_MP_STATE: return "MP_STATE";
	case SNAP_REGS: return "REGS";
	case SNAP_SREGS: return "SREGS";
	case SNAP_XSAVE: return "XSAVE";
	case SNAP_XCRS: return "XCRS";
	case SNAP_DEBUGREGS: return "DEBUGREGS";
	case SNAP_LAPIC: return "LAPIC";
	case SNAP_MSRS: return "MSRS";
	case SNAP_VCPU_EVENTS: return "VCPU_EVENTS";
	case SNAP_DEVICE: return "DEVICE";
	case SNAP_CONSOLE_INPUT: return "CONSOLE_INPUT";
	default: return NULL;
	}
}

void snap_writer_init(struct snap_writer *w)
{
	memset(w, 0, sizeof(*w));
	snap_append(w, NULL, SNAP_HEADER_SIZE);	/* filled in by snap_writer_finish */
}

void snap_writer_free(struct snap_writer *w)
{
	free(w->buf);
	memset(w, 0, sizeof(*w));
}

/* data NULL appends zeros. */
void snap_append(struct snap_writer *w, const void *data, size_t len)
{
	if (w->failed)
		return;
	if (len > SNAP_MAX_SIZE || w->len + len > SNAP_MAX_SIZE) {
		w->failed = E2BIG;
		return;
	}
	if (w->len + len > w->cap) {
		size_t cap = w->cap ? w->cap : 4096;
		uint8_t *buf;

		while (cap < w->len + len)
			cap *= 2;
		buf = realloc(w->buf, cap);
		if (!buf) {
			w->failed = ENOMEM;
			return;
		}
		w->buf = buf;
		w->cap = cap;
	}
	if (data)
		memcpy(w->buf + w->len, data, len);
	else
		memset(w->buf + w->len, 0, len);
	w->len += len;
}

size_t snap_begin(struct snap_writer *w, uint32_t kind, uint32_t index)
{
	uint8_t hdr[16];
	size_t at = w->len;

	le_store32(hdr, kind);
	le_store32(hdr + 4, index);
	le_store64(hdr + 8, 0);
	snap_append(w, hdr, sizeof(hdr));
	return at;
}

void snap_end(struct snap_writer *w, size_t begin)
{
	uint64_t len;

	if (w->failed)
		return;
	len = w->len - begin - 16;
	le_store64(w->buf + begin + 8, len);
	snap_append(w, NULL, (size_t)((8 - len % 8) % 8));
	w->nr_sections++;
}

void snap_put(struct snap_writer *w, uint32_t kind, uint32_t index, const void *data, size_t len)
{
	size_t at = snap_begin(w, kind, index);

	snap_append(w, data, len);
	snap_end(w, at);
}

int snap_writer_finish(struct snap_writer *w, const uint8_t id[SNAP_ID_SIZE], const uint8_t parent[SNAP_ID_SIZE],
		       struct vm_error *err)
{
	uint64_t crc;
	uint8_t trailer[SNAP_TRAILER_SIZE];

	snap_append(w, NULL, 0);
	if (!w->failed && w->len + SNAP_TRAILER_SIZE > SNAP_MAX_SIZE)
		w->failed = E2BIG;
	if (w->failed)
		return vm_error_set(err, w->failed, "cannot build the snapshot state: %s",
				    w->failed == ENOMEM ? "out of memory" : "larger than 64 MiB");
	memcpy(w->buf, SNAP_MAGIC, 8);
	le_store32(w->buf + 8, SNAP_VERSION);
	le_store32(w->buf + 12, SNAP_HEADER_SIZE);
	le_store64(w->buf + 16, w->len + SNAP_TRAILER_SIZE);
	memcpy(w->buf + 24, id, SNAP_ID_SIZE);
	if (parent)
		memcpy(w->buf + 40, parent, SNAP_ID_SIZE);
	else
		memset(w->buf + 40, 0, SNAP_ID_SIZE);
	le_store32(w->buf + 56, w->nr_sections);
	le_store32(w->buf + 60, 0);
	crc = snap_crc64(0, w->buf, w->len);
	le_store64(trailer, crc);
	snap_append(w, trailer, sizeof(trailer));
	return w->failed ? vm_error_set(err, w->failed, "cannot build the snapshot state: out of memory") : 0;
}

int snap_parse(const uint8_t *buf, size_t len, const char *what, struct snap_blob *out, struct vm_error *err)
{
	uint64_t total, crc, nr;
	uint32_t version, header_size;
	size_t at;

	memset(out, 0, sizeof(*out));
	if (len < SNAP_HEADER_SIZE + SNAP_TRAILER_SIZE)
		return vm_error_set(err, EINVAL, "%s is not a snapshot: %zu bytes is shorter than the %d-byte header",
				    what, len, SNAP_HEADER_SIZE);
	if (memcmp(buf, SNAP_MAGIC, 8))
		return vm_error_set(err, EINVAL, "%s is not a snapshot state file (no SMOLSNAP magic)", what);
	version = (uint32_t)le_load32(buf + 8);
	if (version != SNAP_VERSION)
		return vm_error_set(err, EINVAL, "%s has snapshot format version %u; this Smol reads version %d (%s)",
				    what, version, SNAP_VERSION,
				    version > SNAP_VERSION ? "written by a newer Smol" : "written by an older Smol");
	header_size = (uint32_t)le_load32(buf + 12);
	if (header_size != SNAP_HEADER_SIZE)
		return vm_error_set(err, EINVAL, "%s: header size %u, expected %d", what, header_size, SNAP_HEADER_SIZE);
	total = le_load64(buf + 16);
	if (total != len)
		return vm_error_set(err, EINVAL, "%s is %s: the header says %llu bytes, the file has %zu", what,
				    total > len ? "truncated" : "longer than written", (unsigned long long)total, len);
	crc = le_load64(buf + len - SNAP_TRAILER_SIZE);
	if (crc != snap_crc64(0, buf, len - SNAP_TRAILER_SIZE))
		return vm_error_set(err, EINVAL, "%s is corrupted: its checksum does not match its contents", what);
	if (le_load32(buf + 60))
		return vm_error_set(err, EINVAL, "%s: the reserved header field is not zero", what);
	nr = le_load32(buf + 56);
	if (nr > SNAP_MAX_SECTIONS)
		return vm_error_set(err, EINVAL, "%s: %llu sections, more than the %d allowed", what,
				    (unsigned long long)nr, SNAP_MAX_SECTIONS);
	memcpy(out->id, buf + 24, SNAP_ID_SIZE);
	memcpy(out->parent, buf + 40, SNAP_ID_SIZE);
	out->sections = calloc(nr ? nr : 1, sizeof(*out->sections));
	if (!out->sections)
		return vm_error_set(err, ENOMEM, "out of memory reading %s", what);
	at = SNAP_HEADER_SIZE;
	for (uint64_t i = 0; i < nr; i++) {
		struct snap_section *s = &out->sections[i];
		size_t left = len - SNAP_TRAILER_SIZE - at;
		uint64_t padded;

		if (left < 16) {
			snap_blob_free(out);
			return vm_error_set(err, EINVAL, "%s: section %llu of %llu starts past the end of the sections",
					    what, (unsigned long long)i + 1, (unsigned long long)nr);
		}
		s->kind = (uint32_t)le_load32(buf + at);
		s->index = (uint32_t)le_load32(buf + at + 4);
		s->len = le_load64(buf + at + 8);
		padded = s->len + (8 - s->len % 8) % 8;
		if (s->len > left - 16 || padded > left - 16) {
			const char *name = snap_kind_name(s->kind);
			unsigned long long claimed = (unsigned long long)s->len;

			snap_blob_free(out);	/* s points into what this frees */
			return vm_error_set(err, EINVAL, "%s: section %llu (%s) says %llu bytes, only %zu remain", what,
					    (unsigned long long)i + 1, name ? name : "unknown kind", claimed, left - 16);
		}
		if (!snap_kind_name(s->kind)) {
			uint32_t kind = s->kind;

			snap_blob_free(out);
			return vm_error_set(err, EINVAL, "%s: section %llu has unknown kind %u", what,
					    (unsigned long long)i + 1, kind);
		}
		s->data = buf + at + 16;
		for (uint64_t k = s->len; k < padded; k++) {
			if (s->data[k]) {
				uint32_t kind = s->kind;

				snap_blob_free(out);
				return vm_error_set(err, EINVAL, "%s: section %llu (%s) is padded with non-zero bytes", what,
						    (unsigned long long)i + 1, snap_kind_name(kind));
			}
		}
		at += 16 + (size_t)padded;
		out->nr_sections++;
	}
	if (at != len - SNAP_TRAILER_SIZE) {
		snap_blob_free(out);
		return vm_error_set(err, EINVAL, "%s: %zu bytes after the last section", what,
				    len - SNAP_TRAILER_SIZE - at);
	}
	return 0;
}

void snap_blob_free(struct snap_blob *b)
{
	free(b->sections);
	b->sections = NULL;
	b->nr_sections = 0;
}

const struct snap_section *snap_find(const struct snap_blob *b, uint32_t kind, uint32_t index)
{
	for (uint32_t i = 0; i < b->nr_sections; i++)
		if (b->sections[i].kind == kind && b->sections[i].index == index)
			return &b->sections[i];
	return NULL;
}

int snap_has_parent(const struct snap_blob *b)
{
	for (int i = 0; i < SNAP_ID_SIZE; i++)
		if (b->parent[i])
			return 1;
	return 0;
}

uint64_t mem_layer_data_offset(uint32_t kind, uint64_t mem_size)
{
	uint64_t bytes = MEM_LAYER_HEADER_SIZE;

	if (kind == MEM_LAYER_DIFF)
		bytes += (mem_size / SNAP_PAGE_SIZE + 7) / 8;
	return (bytes + SNAP_PAGE_SIZE - 1) & ~(SNAP_PAGE_SIZE - 1);
}

static uint64_t header_crc(const uint8_t *buf, uint32_t kind, uint64_t mem_size)
{
	uint8_t hdr[MEM_LAYER_HEADER_SIZE];
	uint64_t crc;

	memcpy(hdr, buf, sizeof(hdr));
	memset(hdr + 56, 0, 8);
	crc = snap_crc64(0, hdr, sizeof(hdr));
	if (kind == MEM_LAYER_DIFF)
		crc = snap_crc64(crc, buf + MEM_LAYER_HEADER_SIZE, (size_t)((mem_size / SNAP_PAGE_SIZE + 7) / 8));
	return crc;
}

void mem_layer_header_encode(const struct mem_layer_header *h, const uint8_t *bitmap, uint8_t *buf)
{
	memset(buf, 0, (size_t)h->data_offset);
	memcpy(buf, MEM_LAYER_MAGIC, 8);
	le_store32(buf + 8, MEM_LAYER_VERSION);
	le_store32(buf + 12, h->kind);
	le_store64(buf + 16, h->mem_size);
	le_store64(buf + 24, h->data_offset);
	le_store64(buf + 32, h->pages);
	memcpy(buf + 40, h->id, SNAP_ID_SIZE);
	if (h->kind == MEM_LAYER_DIFF)
		memcpy(buf + MEM_LAYER_HEADER_SIZE, bitmap, (size_t)((h->mem_size / SNAP_PAGE_SIZE + 7) / 8));
	le_store64(buf + 56, header_crc(buf, h->kind, h->mem_size));
}

long mem_layer_header_parse(const uint8_t *buf, size_t len, uint64_t file_size, const char *what,
			    struct mem_layer_header *h, const uint8_t **bitmap, struct vm_error *err)
{
	uint32_t version;
	uint64_t pages_in_guest;

	*bitmap = NULL;
	if (len < MEM_LAYER_HEADER_SIZE)
		return vm_error_set(err, EINVAL, "%s is truncated: %zu bytes, shorter than its %d-byte header", what,
				    len, MEM_LAYER_HEADER_SIZE);
	if (memcmp(buf, MEM_LAYER_MAGIC, 8))
		return vm_error_set(err, EINVAL, "%s is not a snapshot memory layer (no SMOLMEM magic)", what);
	version = (uint32_t)le_load32(buf + 8);
	if (version != MEM_LAYER_VERSION)
		return vm_error_set(err, EINVAL, "%s has memory layer version %u; this Smol reads version %d", what,
				    version, MEM_LAYER_VERSION);
	h->kind = (uint32_t)le_load32(buf + 12);
	h->mem_size = le_load64(buf + 16);
	h->data_offset = le_load64(buf + 24);
	h->pages = le_load64(buf + 32);
	memcpy(h->id, buf + 40, SNAP_ID_SIZE);
	if (h->kind != MEM_LAYER_FULL && h->kind != MEM_LAYER_DIFF)
		return vm_error_set(err, EINVAL, "%s: unknown layer kind %u (1 full, 2 diff)", what, h->kind);
	if (!h->mem_size || h->mem_size % (1ULL << 20) || h->mem_size > (256ULL << 30))
		return vm_error_set(err, EINVAL, "%s: memory size %llu bytes is not a whole number of MiB up to 256 GiB",
				    what, (unsigned long long)h->mem_size);
	if (h->data_offset != mem_layer_data_offset(h->kind, h->mem_size))
		return vm_error_set(err, EINVAL, "%s: data offset %llu, expected %llu", what,
				    (unsigned long long)h->data_offset,
				    (unsigned long long)mem_layer_data_offset(h->kind, h->mem_size));
	pages_in_guest = h->mem_size / SNAP_PAGE_SIZE;
	if (h->pages > pages_in_guest)
		return vm_error_set(err, EINVAL, "%s: %llu pages present, more than the %llu in guest memory", what,
				    (unsigned long long)h->pages, (unsigned long long)pages_in_guest);
	if (file_size != h->data_offset + h->mem_size)
		return vm_error_set(err, EINVAL, "%s is %llu bytes; a layer of %llu MiB must be %llu (%s)", what,
				    (unsigned long long)file_size, (unsigned long long)(h->mem_size >> 20),
				    (unsigned long long)(h->data_offset + h->mem_size),
				    file_size < h->data_offset + h->mem_size ? "truncated" : "too long");
	if (len < h->data_offset)
		return (long)h->data_offset;
	if (le_load64(buf + 56) != header_crc(buf, h->kind, h->mem_size))
		return vm_error_set(err, EINVAL, "%s is corrupted: its header checksum does not match", what);
	if (h->kind == MEM_LAYER_DIFF) {
		uint64_t count = 0;
		const uint8_t *bm = buf + MEM_LAYER_HEADER_SIZE;

		for (uint64_t i = 0; i < (pages_in_guest + 7) / 8; i++)
			count += (uint64_t)__builtin_popcount(bm[i]);
		if (count != h->pages)
			return vm_error_set(err, EINVAL, "%s: its bitmap has %llu pages, its header says %llu", what,
					    (unsigned long long)count, (unsigned long long)h->pages);
		*bitmap = bm;
	} else if (h->pages != pages_in_guest) {
		return vm_error_set(err, EINVAL, "%s: a full layer must hold all %llu pages, not %llu", what,
				    (unsigned long long)pages_in_guest, (unsigned long long)h->pages);
	}
	return 0;
}

static uint64_t kind_fixed_size(uint32_t kind)
{
	switch (kind) {
	case SNAP_VM: return 24;
	case SNAP_CLOCK: return sizeof(struct kvm_clock_data);
	case SNAP_PIT: return sizeof(struct kvm_pit_state2);
	case SNAP_IRQCHIP: return sizeof(struct kvm_irqchip);
	case SNAP_MP_STATE: return sizeof(struct kvm_mp_state);
	case SNAP_REGS: return sizeof(struct kvm_regs);
	case SNAP_SREGS: return sizeof(struct kvm_sregs);
	case SNAP_XCRS: return sizeof(struct kvm_xcrs);
	case SNAP_DEBUGREGS: return sizeof(struct kvm_debugregs);
	case SNAP_LAPIC: return sizeof(struct kvm_lapic_state);
	case SNAP_VCPU_EVENTS: return sizeof(struct kvm_vcpu_events);
	default: return 0;
	}
}

static int is_vcpu_kind(uint32_t kind)
{
	return kind >= SNAP_CPUID && kind <= SNAP_VCPU_EVENTS;
}

/* A counted array: u32 count, then count entries of `entry` bytes, and nothing else. */
static int counted_ok(const struct snap_section *s, size_t entry, uint32_t max)
{
	uint64_t count;

	if (s->len < 4)
		return 0;
	count = le_load32(s->data);
	return count <= max && s->len == 4 + count * entry;
}

static int section_size_ok(const struct snap_section *s)
{
	uint64_t fixed = kind_fixed_size(s->kind);

	if (fixed)
		return s->len == fixed;
	switch (s->kind) {
	case SNAP_PARENT: return s->len >= 1 && s->len <= SNAP_MAX_PARENT_PATH && !memchr(s->data, 0, s->len);
	case SNAP_CPUID: return counted_ok(s, sizeof(struct kvm_cpuid_entry2), SNAP_MAX_CPUID);
	case SNAP_MSRS: return counted_ok(s, sizeof(struct kvm_msr_entry), SNAP_MAX_MSRS);
	case SNAP_XSAVE: return s->len >= sizeof(struct kvm_xsave) && s->len <= SNAP_MAX_XSAVE && s->len % 4 == 0;
	case SNAP_DEVICE: return s->len >= 2 && s->data[0] >= 1 && s->data[0] <= s->len - 1;
	case SNAP_CONSOLE_INPUT: return s->len <= SNAP_MAX_CONSOLE_INPUT;
	default: return 0;
	}
}

int snap_validate(const struct snap_blob *b, const char *what, struct snap_vm_info *info, struct vm_error *err)
{
	static const uint32_t per_vm[] = { SNAP_VM, SNAP_CLOCK, SNAP_PIT };
	static const uint32_t per_vcpu[] = { SNAP_CPUID, SNAP_MP_STATE, SNAP_REGS, SNAP_SREGS, SNAP_XSAVE,
					     SNAP_XCRS, SNAP_DEBUGREGS, SNAP_LAPIC, SNAP_MSRS, SNAP_VCPU_EVENTS };
	const struct snap_section *vm, *parent;

	memset(info, 0, sizeof(*info));
	for (uint32_t i = 0; i < b->nr_sections; i++) {
		const struct snap_section *s = &b->sections[i];

		if (!section_size_ok(s))
			return vm_error_set(err, EINVAL, "%s: section %s (index %u) has a wrong size: %llu bytes", what,
					    snap_kind_name(s->kind), s->index, (unsigned long long)s->len);
		for (uint32_t j = 0; j < i; j++) {
			const struct snap_section *o = &b->sections[j];

			if (o->kind != s->kind || o->index != s->index)
				continue;
			if (s->kind != SNAP_DEVICE)
				return vm_error_set(err, EINVAL, "%s: section %s (index %u) appears twice", what,
						    snap_kind_name(s->kind), s->index);
			if (o->data[0] == s->data[0] && !memcmp(o->data + 1, s->data + 1, s->data[0]))
				return vm_error_set(err, EINVAL, "%s: the state of device %.*s appears twice", what,
						    s->data[0], (const char *)s->data + 1);
		}
	}
	vm = snap_find(b, SNAP_VM, 0);
	if (!vm)
		return vm_error_set(err, EINVAL, "%s: the VM section is missing", what);
	info->mem_size = le_load64(vm->data);
	info->nr_cpus = (uint32_t)le_load32(vm->data + 8);
	info->tsc_khz = le_load64(vm->data + 16);
	if (!info->mem_size || info->mem_size % (1ULL << 20) || info->mem_size > (256ULL << 30))
		return vm_error_set(err, EINVAL, "%s: memory size %llu bytes is not a whole number of MiB up to 256 GiB",
				    what, (unsigned long long)info->mem_size);
	if (info->nr_cpus < 1 || info->nr_cpus > SNAP_MAX_CPUS)
		return vm_error_set(err, EINVAL, "%s: %u vCPUs; a VM has 1 to %d", what, info->nr_cpus, SNAP_MAX_CPUS);
	for (size_t k = 0; k < sizeof(per_vm) / sizeof(per_vm[0]); k++)
		if (!snap_find(b, per_vm[k], 0))
			return vm_error_set(err, EINVAL, "%s: the %s section is missing", what, snap_kind_name(per_vm[k]));
	for (uint32_t chip = 0; chip < 3; chip++)
		if (!snap_find(b, SNAP_IRQCHIP, chip))
			return vm_error_set(err, EINVAL, "%s: the IRQCHIP section for chip %u is missing", what, chip);
	for (uint32_t cpu = 0; cpu < info->nr_cpus; cpu++)
		for (size_t k = 0; k < sizeof(per_vcpu) / sizeof(per_vcpu[0]); k++)
			if (!snap_find(b, per_vcpu[k], cpu))
				return vm_error_set(err, EINVAL, "%s: the %s section of vCPU %u is missing", what,
						    snap_kind_name(per_vcpu[k]), cpu);
	for (uint32_t i = 0; i < b->nr_sections; i++) {
		const struct snap_section *s = &b->sections[i];

		if ((is_vcpu_kind(s->kind) && s->index >= info->nr_cpus) || (s->kind == SNAP_IRQCHIP && s->index > 2) ||
		    (!is_vcpu_kind(s->kind) && s->kind != SNAP_IRQCHIP && s->kind != SNAP_DEVICE && s->index != 0))
			return vm_error_set(err, EINVAL, "%s: section %s has index %u, out of range", what,
					    snap_kind_name(s->kind), s->index);
	}
	parent = snap_find(b, SNAP_PARENT, 0);
	if (!!parent != snap_has_parent(b))
		return vm_error_set(err, EINVAL, "%s: %s", what,
				    parent ? "names a parent directory but no parent id" :
					     "has a parent id but no parent directory");
	if (parent) {
		memcpy(info->parent_path, parent->data, (size_t)parent->len);
		info->parent_path[parent->len] = 0;
	}
	return 0;
}
