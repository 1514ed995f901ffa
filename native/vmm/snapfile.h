/*
 * The snapshot file formats (docs/snapshots.md): the state blob, a list of typed sections behind a header and in
 * front of a CRC-64, and the memory layer header. Pure byte handling, no KVM, so the parsers can be unit-tested and
 * fuzzed. Everything parsed here is untrusted.
 */
#ifndef SMOL_SNAPFILE_H
#define SMOL_SNAPFILE_H

#include <stddef.h>
#include <stdint.h>

#define SNAP_MAGIC "SMOLSNAP"
#define SNAP_VERSION 2
#define SNAP_HEADER_SIZE 64
#define SNAP_TRAILER_SIZE 8
#define SNAP_ID_SIZE 16
#define SNAP_MAX_SIZE (64u << 20)	/* a state blob is a few hundred KiB even with 64 vCPUs */
#define SNAP_MAX_SECTIONS 4096

enum snap_kind {
	SNAP_VM = 1,
	SNAP_PARENT = 2,
	SNAP_CLOCK = 16,
	SNAP_PIT = 17,
	SNAP_IRQCHIP = 18,
	SNAP_CPUID = 32,
	SNAP_MP_STATE = 33,
	SNAP_REGS = 34,
	SNAP_SREGS = 35,
	SNAP_XSAVE = 36,
	SNAP_XCRS = 37,
	SNAP_DEBUGREGS = 38,
	SNAP_LAPIC = 39,
	SNAP_MSRS = 40,
	SNAP_VCPU_EVENTS = 41,
	SNAP_DEVICE = 64,
	SNAP_CONSOLE_INPUT = 65,
};

#define MEM_LAYER_MAGIC "SMOLMEM"	/* 8 bytes with its NUL */
#define MEM_LAYER_VERSION 1
#define MEM_LAYER_FULL 1
#define MEM_LAYER_DIFF 2
#define MEM_LAYER_HEADER_SIZE 64
#define SNAP_PAGE_SIZE 4096ULL

struct vm_error;

uint64_t snap_crc64(uint64_t crc, const void *buf, size_t len);
const char *snap_kind_name(uint32_t kind);

/* Builds a state blob in memory. A failed allocation is remembered and reported by snap_writer_finish. */
struct snap_writer {
	uint8_t *buf;
	size_t len, cap;
	uint32_t nr_sections;
	int failed;
};

void snap_writer_init(struct snap_writer *w);
void snap_writer_free(struct snap_writer *w);
void snap_put(struct snap_writer *w, uint32_t kind, uint32_t index, const void *data, size_t len);
/* A section whose contents come in pieces: begin, append any number of times, end. */
size_t snap_begin(struct snap_writer *w, uint32_t kind, uint32_t index);
void snap_append(struct snap_writer *w, const void *data, size_t len);
void snap_end(struct snap_writer *w, size_t begin);
/* Fills in the header and the CRC. On success the blob is w->buf[0, w->len). */
int snap_writer_finish(struct snap_writer *w, const uint8_t id[SNAP_ID_SIZE], const uint8_t parent[SNAP_ID_SIZE],
		       struct vm_error *err);

struct snap_section {
	uint32_t kind, index;
	const uint8_t *data;
	uint64_t len;
};

/* A parsed blob; its sections point into the buffer it was parsed from. */
struct snap_blob {
	uint8_t id[SNAP_ID_SIZE], parent[SNAP_ID_SIZE];
	uint32_t nr_sections;
	struct snap_section *sections;
};

/* Checks magic, version, sizes, CRC and the section framing. `what` names the file in messages. */
int snap_parse(const uint8_t *buf, size_t len, const char *what, struct snap_blob *out, struct vm_error *err);
void snap_blob_free(struct snap_blob *b);
const struct snap_section *snap_find(const struct snap_blob *b, uint32_t kind, uint32_t index);
int snap_has_parent(const struct snap_blob *b);

#define SNAP_MAX_CPUS 64
#define SNAP_MAX_CPUID 4096		/* entries */
#define SNAP_MAX_MSRS 4096
#define SNAP_MAX_XSAVE (1u << 20)
#define SNAP_MAX_PARENT_PATH 4096
#define SNAP_MAX_CONSOLE_INPUT (1u << 20)

/* What snap_validate found in a blob's VM and PARENT sections. */
struct snap_vm_info {
	uint64_t mem_size, tsc_khz;
	uint32_t nr_cpus;
	char parent_path[SNAP_MAX_PARENT_PATH + 1];	/* empty without a parent */
};

/*
 * Checks that every section a VM needs is there exactly once with the size its kind needs, for every vCPU the VM
 * section names and no other, so that restoring never reads past a section. Device sections are checked by their
 * devices when loaded.
 */
int snap_validate(const struct snap_blob *b, const char *what, struct snap_vm_info *info, struct vm_error *err);

struct mem_layer_header {
	uint32_t kind;
	uint64_t mem_size, data_offset, pages;
	uint8_t id[SNAP_ID_SIZE];
};

/* Bytes of header plus bitmap, rounded up to a page: the data offset of a layer of this kind and size. */
uint64_t mem_layer_data_offset(uint32_t kind, uint64_t mem_size);
/* Encodes the header (and, for a diff, copies the bitmap) into buf, which holds data_offset bytes. */
void mem_layer_header_encode(const struct mem_layer_header *h, const uint8_t *bitmap, uint8_t *buf);
/*
 * Parses a header from buf (at least data_offset bytes when `len` allows; the first 64 bytes otherwise give the
 * size needed): returns the bytes needed when len is too short, 0 on success, a negative error otherwise.
 * `file_size` must be exactly data_offset + mem_size. *bitmap points into buf for a diff, NULL for a full layer.
 */
long mem_layer_header_parse(const uint8_t *buf, size_t len, uint64_t file_size, const char *what,
			    struct mem_layer_header *h, const uint8_t **bitmap, struct vm_error *err);

#endif
