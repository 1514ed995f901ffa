/*
 * A snapshot state blob made of chosen sections, for the snapshot tests and the fuzzer's seed corpus. sample_init
 * gives every section snap_validate requires for `nr_cpus` vCPUs (with <linux/kvm.h> sizes, filled with a pattern),
 * a com1 DEVICE section, a CONSOLE_INPUT section and, with a parent path, a PARENT section and a parent id. Tests
 * then remove, add or change sections before sample_build encodes them with the snap_writer.
 */
#ifndef SMOL_SNAP_SAMPLE_H
#define SMOL_SNAP_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "snapfile.h"

#define SAMPLE_MAX_SECTIONS ((SNAP_MAX_CPUS + 1) * 10 + 16)	/* one vCPU too many fits */
#define SAMPLE_TSC_KHZ 2500000

struct sample_section {
	uint32_t kind, index;
	uint8_t *data;
	size_t len;
};

struct snap_sample {
	struct sample_section s[SAMPLE_MAX_SECTIONS];
	unsigned n;
	uint8_t id[SNAP_ID_SIZE], parent[SNAP_ID_SIZE];	/* parent all zeros: none */
};

/* The com1 UART state in the sample's DEVICE section: registers, then 3 bytes in the receive FIFO. */
extern const uint8_t sample_uart_state[13];

void sample_init(struct snap_sample *sp, uint32_t nr_cpus, uint64_t mem_size, const char *parent_path);
/* Adds a DEVICE section for device `name` holding `len` bytes of its state. */
void sample_add_device(struct snap_sample *sp, const char *name, const void *state, size_t len);
/* Every device that has state, by section name. */
#define SAMPLE_NR_DEVICES 11
extern const char *const sample_device_names[SAMPLE_NR_DEVICES];
/* Adds the section of device `name` (one of sample_device_names), made by its encoder from a valid state. */
void sample_add_device_state(struct snap_sample *sp, const char *name);
/* Adds every device's section but com1's (sample_init has it): a blob like one from a VM with every device. */
void sample_add_devices(struct snap_sample *sp);
void sample_free(struct snap_sample *sp);
/* Adds a section; data NULL fills it with the pattern. Sections are written in the order they were added. */
void sample_add(struct snap_sample *sp, uint32_t kind, uint32_t index, const void *data, size_t len);
/* Replaces the first section of this kind and index (data NULL: the pattern). */
void sample_set(struct snap_sample *sp, uint32_t kind, uint32_t index, const void *data, size_t len);
void sample_remove(struct snap_sample *sp, uint32_t kind, uint32_t index);
struct sample_section *sample_find(struct snap_sample *sp, uint32_t kind, uint32_t index);
/* The encoded blob (malloc'ed, the caller frees it) and its length; NULL if the writer failed. */
uint8_t *sample_build(const struct snap_sample *sp, size_t *len);
/* After a test or the fuzzer changed a blob's bytes: makes its total size `len` and its CRC right again. */
void sample_reseal(uint8_t *blob, size_t len);

#endif
