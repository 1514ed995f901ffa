/*
 * Snapshot files are read back from disk, where they may be truncated, corrupted, from another version of Smol or
 * hostile: what the writer builds must come back the same, and every other file must be refused with a message
 * that says what is wrong with it (docs/snapshots.md).
 */
#include "test.h"
#include "error.h"
#include "snap_sample.h"
#include "snapfile.h"
#include "uart.h"

#include <errno.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WHAT "snaps/a/state"
#define MIB (1ULL << 20)
#define GIB (1ULL << 30)

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

/* snap_parse, then snap_validate: what the first failing step returned, 0 when both pass. */
static int load(const uint8_t *buf, size_t len, struct snap_vm_info *info, struct vm_error *err)
{
	struct snap_blob b;
	int r;

	memset(err, 0, sizeof(*err));
	r = snap_parse(buf, len, WHAT, &b, err);
	if (r < 0)
		return r;
	r = snap_validate(&b, WHAT, info, err);
	snap_blob_free(&b);
	return r;
}

static void refused_at(int line, const uint8_t *buf, size_t len, const char *want)
{
	struct snap_vm_info info;
	struct vm_error err;
	int r = load(buf, len, &info, &err);

	if (r >= 0)
		test_fail(__FILE__, line, "accepted; expected a refusal saying \"%s\"", want);
	else if (r != -EINVAL || err.code != EINVAL || !strstr(err.msg, want) || !strstr(err.msg, WHAT))
		test_fail(__FILE__, line, "refused with \"%s\" (%d); expected it to name " WHAT " and say \"%s\"",
			  err.msg, r, want);
}

/* The blob is refused, and the message names the file and contains `want`. */
#define CHECK_REFUSED(buf, len, want) refused_at(__LINE__, buf, len, want)

static void sample_refused_at(int line, const struct snap_sample *sp, const char *want)
{
	size_t len;
	uint8_t *blob = sample_build(sp, &len);

	if (!blob) {
		test_fail(__FILE__, line, "the writer failed");
		return;
	}
	refused_at(line, blob, len, want);
	free(blob);
}

#define CHECK_SAMPLE_REFUSED(sp, want) sample_refused_at(__LINE__, sp, want)

static void sample_accepted_at(int line, const struct snap_sample *sp)
{
	struct snap_vm_info info;
	struct vm_error err;
	size_t len;
	uint8_t *blob = sample_build(sp, &len);

	if (!blob || load(blob, len, &info, &err) < 0)
		test_fail(__FILE__, line, "refused: %s", blob ? err.msg : "the writer failed");
	free(blob);
}

#define CHECK_SAMPLE_ACCEPTED(sp) sample_accepted_at(__LINE__, sp)

TEST(crc64_is_the_xz_checksum)
{
	CHECK_EQ_INT(snap_crc64(0, "123456789", 9), 0x995dc9bbdf1939faULL);
	CHECK_EQ_INT(snap_crc64(0, "", 0), 0);
	/* In pieces, as the memory layer's header and bitmap are checked. */
	CHECK_EQ_INT(snap_crc64(snap_crc64(0, "1234", 4), "56789", 5), 0x995dc9bbdf1939faULL);
}

/* Everything the writer put in comes back from snap_parse and snap_validate, in order and byte for byte. */
static void check_round_trip(uint32_t nr_cpus, const char *parent)
{
	struct snap_sample sp;
	struct snap_vm_info info;
	struct snap_blob b;
	struct vm_error err = { 0 };
	const struct snap_section *dev;
	size_t len;
	uint8_t *blob;

	sample_init(&sp, nr_cpus, 256 * MIB, parent);
	blob = sample_build(&sp, &len);
	REQUIRE(blob);
	CHECK_EQ_INT(len % 8, 0);
	CHECK_EQ_INT(test_rd64(blob + 16), len);
	CHECK_OK(snap_parse(blob, len, WHAT, &b, &err), err.msg);
	if (b.sections) {
		CHECK(memcmp(b.id, sp.id, SNAP_ID_SIZE) == 0);
		CHECK(memcmp(b.parent, sp.parent, SNAP_ID_SIZE) == 0);
		CHECK_EQ_INT(snap_has_parent(&b), parent != NULL);
		CHECK_EQ_INT(b.nr_sections, sp.n);
		for (unsigned i = 0; i < sp.n && i < b.nr_sections; i++) {
			const struct snap_section *s = &b.sections[i];

			CHECK_EQ_INT(s->kind, sp.s[i].kind);
			CHECK_EQ_INT(s->index, sp.s[i].index);
			CHECK_EQ_INT(s->len, sp.s[i].len);
			CHECK_EQ_INT((s->data - blob) % 8, 0);
			if (s->len == sp.s[i].len && memcmp(s->data, sp.s[i].data, sp.s[i].len))
				test_fail(__FILE__, __LINE__, "section %u (%s %u) differs", i, snap_kind_name(s->kind),
					  s->index);
		}
		dev = snap_find(&b, SNAP_DEVICE, 0);
		CHECK(dev && dev->len == 5 + sizeof(sample_uart_state) && !memcmp(dev->data, "\4com1", 5) &&
		      !memcmp(dev->data + 5, sample_uart_state, sizeof(sample_uart_state)));
		CHECK_OK(snap_validate(&b, WHAT, &info, &err), err.msg);
		CHECK_EQ_INT(info.mem_size, 256 * MIB);
		CHECK_EQ_INT(info.nr_cpus, nr_cpus);
		CHECK_EQ_INT(info.tsc_khz, SAMPLE_TSC_KHZ);
		CHECK(strcmp(info.parent_path, parent ? parent : "") == 0);
		snap_blob_free(&b);
	}
	free(blob);
	sample_free(&sp);
}

TEST(state_written_for_one_vcpu_reads_back_the_same)
{
	check_round_trip(1, NULL);
}

TEST(state_written_for_two_vcpus_with_a_parent_reads_back_the_same)
{
	check_round_trip(2, "../base");
}

TEST(state_for_64_vcpus_and_256_gib_is_accepted)
{
	struct snap_sample sp;

	sample_init(&sp, SNAP_MAX_CPUS, 256 * GIB, NULL);
	CHECK_SAMPLE_ACCEPTED(&sp);
	sample_free(&sp);
}

TEST(state_larger_than_64_mib_is_not_written)
{
	struct snap_writer w;
	struct vm_error err = { 0 };
	uint8_t id[SNAP_ID_SIZE] = { 1 };

	snap_writer_init(&w);
	snap_put(&w, SNAP_CONSOLE_INPUT, 0, NULL, 65 * MIB);
	CHECK_EQ_INT(snap_writer_finish(&w, id, NULL, &err), -E2BIG);
	CHECK_STR_CONTAINS(err.msg, "larger than 64 MiB");
	snap_writer_free(&w);
}

/* A valid one-vCPU blob to damage. */
static uint8_t *good_blob(size_t *len)
{
	struct snap_sample sp;
	uint8_t *blob;

	sample_init(&sp, 1, 64 * MIB, NULL);
	blob = sample_build(&sp, len);
	sample_free(&sp);
	return blob;
}

TEST(state_shorter_than_its_header_is_refused)
{
	size_t len;
	uint8_t *blob = good_blob(&len);

	REQUIRE(blob);
	CHECK_REFUSED(blob, 0, "0 bytes is shorter than the 64-byte header");
	CHECK_REFUSED(blob, 63, "63 bytes is shorter than the 64-byte header");
	CHECK_REFUSED(blob, 71, "71 bytes is shorter");
	free(blob);
}

TEST(state_whose_header_is_not_this_format_is_refused)
{
	static const struct {
		size_t at;
		uint32_t value;
		const char *want;
	} cases[] = {
		{ 4, 0x4c4f4d53, "is not a snapshot state file (no SMOLSNAP magic)" },	/* SMOLSMOL */
		{ 8, 3, "version 3; this Smol reads version 2 (written by a newer Smol)" },
		{ 8, 0xffffffff, "version 4294967295; this Smol reads version 2 (written by a newer Smol)" },
		{ 8, 0, "version 0; this Smol reads version 2 (written by an older Smol)" },
		{ 8, 1, "version 1; this Smol reads version 2 (written by an older Smol)" },
		{ 12, 72, "header size 72, expected 64" },
		{ 12, 0, "header size 0, expected 64" },
	};
	size_t len;
	uint8_t *blob = good_blob(&len), saved[SNAP_HEADER_SIZE];

	REQUIRE(blob);
	memcpy(saved, blob, sizeof(saved));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		put32(blob + cases[i].at, cases[i].value);
		CHECK_REFUSED(blob, len, cases[i].want);
		memcpy(blob, saved, sizeof(saved));
	}
	free(blob);
}

TEST(truncated_or_extended_state_is_refused)
{
	size_t len;
	uint8_t *blob = good_blob(&len), *longer;

	REQUIRE(blob);
	CHECK_REFUSED(blob, len - 1, "is truncated: the header says");
	CHECK_REFUSED(blob, 100, "is truncated: the header says");
	longer = calloc(1, len + 8);
	REQUIRE(longer);
	memcpy(longer, blob, len);
	CHECK_REFUSED(longer, len + 8, "is longer than written: the header says");
	free(longer);
	free(blob);
}

TEST(any_flipped_byte_in_state_is_refused)
{
	struct snap_blob b;
	struct vm_error err;
	size_t len;
	uint8_t *blob = good_blob(&len);

	REQUIRE(blob);
	for (size_t i = 0; i < len; i++) {
		uint8_t mask = (uint8_t)(i % 255 + 1);	/* every bit pattern, somewhere */

		blob[i] ^= mask;
		if (snap_parse(blob, len, WHAT, &b, &err) == 0) {
			test_fail(__FILE__, __LINE__, "byte %zu ^ 0x%02x accepted", i, mask);
			snap_blob_free(&b);
		} else if (i >= 24 && !strstr(err.msg, "is corrupted: its checksum does not match")) {
			/* Below 24: magic, version, header size and total size fail their own checks first. */
			test_fail(__FILE__, __LINE__, "byte %zu ^ 0x%02x: \"%s\"", i, mask, err.msg);
		}
		blob[i] ^= mask;
	}
	free(blob);
}

TEST(state_with_more_than_4096_sections_is_refused)
{
	size_t len;
	uint8_t *blob = good_blob(&len);

	REQUIRE(blob);
	put32(blob + 56, SNAP_MAX_SECTIONS + 1);
	sample_reseal(blob, len);
	CHECK_REFUSED(blob, len, "4097 sections, more than the 4096 allowed");
	put32(blob + 56, 0xffffffff);
	sample_reseal(blob, len);
	CHECK_REFUSED(blob, len, "4294967295 sections, more than the 4096 allowed");
	free(blob);
}

TEST(section_running_past_the_end_is_refused)
{
	size_t len;
	uint8_t *blob = good_blob(&len);
	uint32_t nr;

	REQUIRE(blob);
	/* The first section is VM: its length field is at 64 + 8. */
	put64(blob + 72, UINT64_MAX);
	sample_reseal(blob, len);
	CHECK_REFUSED(blob, len, "section 1 (VM) says 18446744073709551615 bytes, only");
	put64(blob + 72, UINT64_MAX - 6);	/* padded to 8, it wraps to 0 */
	sample_reseal(blob, len);
	CHECK_REFUSED(blob, len, "section 1 (VM) says 18446744073709551609 bytes, only");
	put64(blob + 72, len - SNAP_TRAILER_SIZE - 64 - 16 + 1);
	sample_reseal(blob, len);
	CHECK_REFUSED(blob, len, "section 1 (VM) says");
	put64(blob + 72, 24);
	/* One section more than there are. */
	nr = test_rd32(blob + 56);
	put32(blob + 56, nr + 1);
	sample_reseal(blob, len);
	CHECK_REFUSED(blob, len, "starts past the end of the sections");
	free(blob);
}

/*
 * Found by fuzz_snapshot: refusing a section longer than the file, snap_parse freed its section array and then read
 * the section's kind and length from it for the message. The fuzzer's input, with its size and CRC made right.
 */
TEST(section_too_long_for_the_file_is_refused_without_reading_freed_memory)
{
	uint8_t blob[88] = {
		0x53, 0x4d, 0x4f, 0x4c, 0x53, 0x4e, 0x41, 0x50, 0x01, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00,
		0x60, 0x3a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11,
		0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x22, 0x22, 0x22, 0x47, 0xff, 0xff, 0xff, 0xff,
		0x00, 0x00, 0x00, 0x22, 0x22, 0x22, 0x22, 0x22, 0x1d, 0x00, 0x00, 0x00, 0x48, 0x49, 0x4a, 0x4b,
		0x4c, 0x4d, 0x4e, 0x4f, 0x50, 0x51, 0x52, 0x53, 0x54, 0xbc, 0xbd, 0xbe, 0xc0, 0xc1, 0xc2, 0xc3,
		0xc4, 0xc5, 0xc6, 0x00, 0x63, 0x2a, 0xa7, 0x73,
	};

	memset(blob + 60, 0, 4);	/* the fuzzer's input predates the check of the reserved field */
	blob[8] = SNAP_VERSION;		/* and format version 2 */
	sample_reseal(blob, sizeof(blob));
	CHECK_REFUSED(blob, sizeof(blob), "section 1 (unknown kind) says 14106050016455801940 bytes, only 0 remain");
}

TEST(reserved_header_field_and_section_padding_must_be_zero)
{
	size_t len;
	uint8_t *blob = good_blob(&len);

	REQUIRE(blob);
	blob[61] = 1;
	sample_reseal(blob, len);
	CHECK_REFUSED(blob, len, "the reserved header field is not zero");
	blob[61] = 0;
	/* The last section is CONSOLE_INPUT with 3 bytes: 5 bytes of padding follow them. */
	blob[len - SNAP_TRAILER_SIZE - 1] = 0x5a;
	sample_reseal(blob, len);
	CHECK_REFUSED(blob, len, "(CONSOLE_INPUT) is padded with non-zero bytes");
	free(blob);
}

TEST(the_same_device_twice_is_refused)
{
	static const uint8_t other[] = { 4, 'c', 'o', 'm', '2', 0 };
	struct snap_sample sp;

	sample_init(&sp, 1, 64 * MIB, NULL);	/* it has the state of com1 */
	sample_add(&sp, SNAP_DEVICE, 0, other, sizeof(other));
	CHECK_SAMPLE_ACCEPTED(&sp);
	sample_add(&sp, SNAP_DEVICE, 0, other, sizeof(other));
	CHECK_SAMPLE_REFUSED(&sp, "the state of device com2 appears twice");
	sample_free(&sp);
}

TEST(unknown_section_kind_is_refused)
{
	struct snap_sample sp;

	sample_init(&sp, 1, 64 * MIB, NULL);
	sample_add(&sp, 99, 0, NULL, 8);
	CHECK_SAMPLE_REFUSED(&sp, "has unknown kind 99");
	sample_remove(&sp, 99, 0);
	sample_add(&sp, 0, 0, NULL, 0);
	CHECK_SAMPLE_REFUSED(&sp, "has unknown kind 0");
	sample_free(&sp);
}

TEST(bytes_after_the_last_section_are_refused)
{
	size_t len;
	uint8_t *blob = good_blob(&len), *longer;

	REQUIRE(blob);
	/* The last section, CONSOLE_INPUT of 3 bytes, becomes 16 + 8 stray bytes. */
	put32(blob + 56, test_rd32(blob + 56) - 1);
	sample_reseal(blob, len);
	CHECK_REFUSED(blob, len, ": 24 bytes after the last section");
	put32(blob + 56, test_rd32(blob + 56) + 1);
	longer = calloc(1, len + 5);
	REQUIRE(longer);
	memcpy(longer, blob, len - SNAP_TRAILER_SIZE);
	sample_reseal(longer, len + 5);
	CHECK_REFUSED(longer, len + 5, ": 5 bytes after the last section");
	free(longer);
	free(blob);
}

TEST(each_missing_required_section_is_named)
{
	static const struct {
		uint32_t kind, index;
		const char *want;
	} cases[] = {
		{ SNAP_VM, 0, "the VM section is missing" },
		{ SNAP_CLOCK, 0, "the CLOCK section is missing" },
		{ SNAP_PIT, 0, "the PIT section is missing" },
		{ SNAP_IRQCHIP, 0, "the IRQCHIP section for chip 0 is missing" },
		{ SNAP_IRQCHIP, 1, "the IRQCHIP section for chip 1 is missing" },
		{ SNAP_IRQCHIP, 2, "the IRQCHIP section for chip 2 is missing" },
		{ SNAP_CPUID, 1, "the CPUID section of vCPU 1 is missing" },
		{ SNAP_MP_STATE, 1, "the MP_STATE section of vCPU 1 is missing" },
		{ SNAP_REGS, 1, "the REGS section of vCPU 1 is missing" },
		{ SNAP_SREGS, 1, "the SREGS section of vCPU 1 is missing" },
		{ SNAP_XSAVE, 1, "the XSAVE section of vCPU 1 is missing" },
		{ SNAP_XCRS, 1, "the XCRS section of vCPU 1 is missing" },
		{ SNAP_DEBUGREGS, 1, "the DEBUGREGS section of vCPU 1 is missing" },
		{ SNAP_LAPIC, 1, "the LAPIC section of vCPU 1 is missing" },
		{ SNAP_MSRS, 1, "the MSRS section of vCPU 1 is missing" },
		{ SNAP_VCPU_EVENTS, 1, "the VCPU_EVENTS section of vCPU 1 is missing" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct snap_sample sp;

		sample_init(&sp, 2, 64 * MIB, NULL);
		sample_remove(&sp, cases[i].kind, cases[i].index);
		CHECK_SAMPLE_REFUSED(&sp, cases[i].want);
		sample_free(&sp);
	}
}

/* A counted section (CPUID, MSRS) whose count says `count` and that holds `entries` entries of `entry` bytes. */
static void set_counted(struct snap_sample *sp, uint32_t kind, uint32_t count, uint32_t entries, size_t entry)
{
	size_t len = 4 + entries * entry;
	uint8_t *p = calloc(1, len);

	if (!p)
		abort();
	put32(p, count);
	sample_set(sp, kind, 0, p, len);
	free(p);
}

TEST(section_of_the_wrong_size_is_refused)
{
	static const struct {
		uint32_t kind, index;
		size_t len;
		const char *want;
	} cases[] = {
		{ SNAP_VM, 0, 23, "section VM (index 0) has a wrong size: 23 bytes" },
		{ SNAP_VM, 0, 32, "section VM (index 0) has a wrong size: 32 bytes" },
		{ SNAP_CLOCK, 0, sizeof(struct kvm_clock_data) + 8, "section CLOCK (index 0) has a wrong size" },
		{ SNAP_PIT, 0, sizeof(struct kvm_pit_state2) - 1, "section PIT (index 0) has a wrong size" },
		{ SNAP_IRQCHIP, 2, 0, "section IRQCHIP (index 2) has a wrong size: 0 bytes" },
		{ SNAP_CPUID, 0, 3, "section CPUID (index 0) has a wrong size: 3 bytes" },
		{ SNAP_MP_STATE, 0, 8, "section MP_STATE (index 0) has a wrong size: 8 bytes" },
		{ SNAP_REGS, 0, sizeof(struct kvm_regs) - 8, "section REGS (index 0) has a wrong size" },
		{ SNAP_SREGS, 0, sizeof(struct kvm_sregs) + 1, "section SREGS (index 0) has a wrong size" },
		{ SNAP_XSAVE, 0, 4092, "section XSAVE (index 0) has a wrong size: 4092 bytes" },
		{ SNAP_XSAVE, 0, 4098, "section XSAVE (index 0) has a wrong size: 4098 bytes" },
		{ SNAP_XSAVE, 0, SNAP_MAX_XSAVE + 4, "section XSAVE (index 0) has a wrong size: 1048580 bytes" },
		{ SNAP_XCRS, 0, 0, "section XCRS (index 0) has a wrong size: 0 bytes" },
		{ SNAP_DEBUGREGS, 0, sizeof(struct kvm_debugregs) + 8, "section DEBUGREGS (index 0) has a wrong size" },
		{ SNAP_LAPIC, 0, sizeof(struct kvm_lapic_state) - 1, "section LAPIC (index 0) has a wrong size" },
		{ SNAP_MSRS, 0, 2, "section MSRS (index 0) has a wrong size: 2 bytes" },
		{ SNAP_VCPU_EVENTS, 0, sizeof(struct kvm_vcpu_events) + 8, "section VCPU_EVENTS (index 0) has a wrong size" },
		{ SNAP_CONSOLE_INPUT, 0, SNAP_MAX_CONSOLE_INPUT + 1, "section CONSOLE_INPUT (index 0) has a wrong size" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct snap_sample sp;

		sample_init(&sp, 1, 64 * MIB, NULL);
		sample_set(&sp, cases[i].kind, cases[i].index, NULL, cases[i].len);
		CHECK_SAMPLE_REFUSED(&sp, cases[i].want);
		sample_free(&sp);
	}
}

TEST(cpuid_and_msr_counts_must_match_their_entries)
{
	struct snap_sample sp;
	const size_t cpuid = sizeof(struct kvm_cpuid_entry2), msr = sizeof(struct kvm_msr_entry);

	sample_init(&sp, 1, 64 * MIB, NULL);
	set_counted(&sp, SNAP_CPUID, 3, 2, cpuid);
	CHECK_SAMPLE_REFUSED(&sp, "section CPUID (index 0) has a wrong size");
	set_counted(&sp, SNAP_CPUID, 1, 2, cpuid);
	CHECK_SAMPLE_REFUSED(&sp, "section CPUID (index 0) has a wrong size");
	set_counted(&sp, SNAP_CPUID, SNAP_MAX_CPUID + 1, SNAP_MAX_CPUID + 1, cpuid);
	CHECK_SAMPLE_REFUSED(&sp, "section CPUID (index 0) has a wrong size");
	set_counted(&sp, SNAP_CPUID, 0xffffffff, 2, cpuid);	/* count × entry must not wrap */
	CHECK_SAMPLE_REFUSED(&sp, "section CPUID (index 0) has a wrong size");
	set_counted(&sp, SNAP_CPUID, SNAP_MAX_CPUID, SNAP_MAX_CPUID, cpuid);
	CHECK_SAMPLE_ACCEPTED(&sp);
	set_counted(&sp, SNAP_MSRS, 2, 3, msr);
	CHECK_SAMPLE_REFUSED(&sp, "section MSRS (index 0) has a wrong size");
	set_counted(&sp, SNAP_MSRS, SNAP_MAX_MSRS + 1, SNAP_MAX_MSRS + 1, msr);
	CHECK_SAMPLE_REFUSED(&sp, "section MSRS (index 0) has a wrong size");
	set_counted(&sp, SNAP_MSRS, 0, 0, msr);
	CHECK_SAMPLE_ACCEPTED(&sp);
	sample_free(&sp);
}

TEST(device_section_needs_a_name_that_fits)
{
	static const struct {
		const char *bytes;
		size_t len;
	} cases[] = {
		{ "\0x", 2 },		/* empty name */
		{ "\5com1", 5 },	/* name longer than the section */
		{ "\1", 1 },		/* a length and no name */
		{ "", 0 },
	};
	struct snap_sample sp;

	sample_init(&sp, 1, 64 * MIB, NULL);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		sample_set(&sp, SNAP_DEVICE, 0, cases[i].bytes, cases[i].len);
		CHECK_SAMPLE_REFUSED(&sp, "section DEVICE (index 0) has a wrong size");
	}
	sample_set(&sp, SNAP_DEVICE, 0, "\4com1", 5);	/* a device with no bytes of its own */
	CHECK_SAMPLE_ACCEPTED(&sp);
	sample_free(&sp);
}

TEST(duplicate_section_is_refused)
{
	struct snap_sample sp;

	sample_init(&sp, 2, 64 * MIB, NULL);
	sample_add(&sp, SNAP_CLOCK, 0, NULL, sizeof(struct kvm_clock_data));
	CHECK_SAMPLE_REFUSED(&sp, "section CLOCK (index 0) appears twice");
	sample_free(&sp);
	sample_init(&sp, 2, 64 * MIB, NULL);
	sample_add(&sp, SNAP_LAPIC, 1, NULL, sizeof(struct kvm_lapic_state));
	CHECK_SAMPLE_REFUSED(&sp, "section LAPIC (index 1) appears twice");
	sample_free(&sp);
	sample_init(&sp, 1, 64 * MIB, "../base");
	sample_add(&sp, SNAP_PARENT, 0, "../other", 8);
	CHECK_SAMPLE_REFUSED(&sp, "section PARENT (index 0) appears twice");
	sample_free(&sp);
}

TEST(section_index_out_of_range_is_refused)
{
	static const struct {
		uint32_t kind, index;
		size_t len;
		const char *want;
	} cases[] = {
		{ SNAP_REGS, 1, sizeof(struct kvm_regs), "section REGS has index 1, out of range" },
		{ SNAP_VCPU_EVENTS, 64, sizeof(struct kvm_vcpu_events), "section VCPU_EVENTS has index 64, out of range" },
		{ SNAP_CPUID, 0xffffffff, 4, "section CPUID has index 4294967295, out of range" },
		{ SNAP_IRQCHIP, 3, sizeof(struct kvm_irqchip), "section IRQCHIP has index 3, out of range" },
		{ SNAP_CLOCK, 1, sizeof(struct kvm_clock_data), "section CLOCK has index 1, out of range" },
		{ SNAP_CONSOLE_INPUT, 2, 1, "section CONSOLE_INPUT has index 2, out of range" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct snap_sample sp;
		uint8_t *zeros = calloc(1, cases[i].len);	/* a CPUID count of 0 */

		REQUIRE(zeros);
		sample_init(&sp, 1, 64 * MIB, NULL);
		sample_add(&sp, cases[i].kind, cases[i].index, zeros, cases[i].len);
		CHECK_SAMPLE_REFUSED(&sp, cases[i].want);
		sample_free(&sp);
		free(zeros);
	}
}

TEST(memory_size_that_is_not_whole_mib_up_to_256_gib_is_refused)
{
	static const uint64_t sizes[] = { 0, 3 * MIB / 2, MIB + 4096, 256 * GIB + MIB, UINT64_MAX };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct snap_sample sp;
		char want[128];

		sample_init(&sp, 1, sizes[i], NULL);
		snprintf(want, sizeof(want), "memory size %llu bytes is not a whole number of MiB up to 256 GiB",
			 (unsigned long long)sizes[i]);
		CHECK_SAMPLE_REFUSED(&sp, want);
		sample_free(&sp);
	}
}

TEST(vcpu_count_outside_1_to_64_is_refused)
{
	struct snap_sample sp;

	sample_init(&sp, 0, 64 * MIB, NULL);
	CHECK_SAMPLE_REFUSED(&sp, ": 0 vCPUs; a VM has 1 to 64");
	sample_free(&sp);
	sample_init(&sp, 65, 64 * MIB, NULL);
	CHECK_SAMPLE_REFUSED(&sp, ": 65 vCPUs; a VM has 1 to 64");
	sample_free(&sp);
}

TEST(parent_directory_and_parent_id_come_together)
{
	struct snap_sample sp;

	sample_init(&sp, 1, 64 * MIB, "../base");
	memset(sp.parent, 0, sizeof(sp.parent));
	CHECK_SAMPLE_REFUSED(&sp, "names a parent directory but no parent id");
	sample_free(&sp);
	sample_init(&sp, 1, 64 * MIB, NULL);
	sp.parent[15] = 1;
	CHECK_SAMPLE_REFUSED(&sp, "has a parent id but no parent directory");
	sample_free(&sp);
}

TEST(parent_directory_that_is_empty_too_long_or_has_a_nul_is_refused)
{
	struct snap_sample sp;
	char *path = malloc(SNAP_MAX_PARENT_PATH + 1);

	REQUIRE(path);
	memset(path, 'a', SNAP_MAX_PARENT_PATH + 1);
	sample_init(&sp, 1, 64 * MIB, "../base");
	sample_set(&sp, SNAP_PARENT, 0, "../a\0b", 6);
	CHECK_SAMPLE_REFUSED(&sp, "section PARENT (index 0) has a wrong size: 6 bytes");
	sample_set(&sp, SNAP_PARENT, 0, "", 0);
	CHECK_SAMPLE_REFUSED(&sp, "section PARENT (index 0) has a wrong size: 0 bytes");
	sample_set(&sp, SNAP_PARENT, 0, path, SNAP_MAX_PARENT_PATH + 1);
	CHECK_SAMPLE_REFUSED(&sp, "section PARENT (index 0) has a wrong size: 4097 bytes");
	sample_set(&sp, SNAP_PARENT, 0, path, SNAP_MAX_PARENT_PATH);
	CHECK_SAMPLE_ACCEPTED(&sp);
	sample_free(&sp);
	free(path);
}

/* Memory layers. */

#define LAYER "snaps/a/memory"
#define DIFF_MEM (256 * MIB)	/* 65536 pages: an 8 KiB bitmap, data at 12 KiB */

/* An encoded header of data_offset bytes (malloc'ed); `h` gets what was encoded. */
static uint8_t *layer_encode(uint32_t kind, uint64_t mem_size, uint64_t pages, const uint8_t *bitmap,
			     struct mem_layer_header *h)
{
	uint8_t *buf;

	memset(h, 0, sizeof(*h));
	h->kind = kind;
	h->mem_size = mem_size;
	h->data_offset = mem_layer_data_offset(kind, mem_size);
	h->pages = pages;
	memset(h->id, 0x33, sizeof(h->id));
	buf = malloc((size_t)h->data_offset);
	if (buf)
		mem_layer_header_encode(h, bitmap, buf);
	return buf;
}

/* A diff bitmap for DIFF_MEM with 10 pages set: 0, 1, 7, 8, 100, 8000 to 8003 and the last. */
static uint8_t *diff_bitmap(void)
{
	static const unsigned pages[] = { 0, 1, 7, 8, 100, 65535 };
	uint8_t *bm = calloc(1, DIFF_MEM / SNAP_PAGE_SIZE / 8);

	if (!bm)
		abort();
	for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++)
		bm[pages[i] / 8] |= (uint8_t)(1 << (pages[i] % 8));
	bm[1000] = 0x0f;
	return bm;
}

static void layer_refused_at(int line, const uint8_t *buf, size_t len, uint64_t file_size, const char *want)
{
	struct mem_layer_header h;
	struct vm_error err = { 0 };
	const uint8_t *bitmap = (const uint8_t *)1;
	long r = mem_layer_header_parse(buf, len, file_size, LAYER, &h, &bitmap, &err);

	if (r != -EINVAL || err.code != EINVAL || !strstr(err.msg, want) || !strstr(err.msg, LAYER))
		test_fail(__FILE__, line, "got %ld, \"%s\"; expected a refusal naming " LAYER " and saying \"%s\"", r,
			  err.msg, want);
	if (bitmap)
		test_fail(__FILE__, line, "a refused layer still gave a bitmap");
}

#define CHECK_LAYER_REFUSED(buf, len, file_size, want) layer_refused_at(__LINE__, buf, len, file_size, want)

TEST(full_memory_layer_header_reads_back_the_same)
{
	struct mem_layer_header h, got;
	struct vm_error err = { 0 };
	const uint8_t *bitmap = (const uint8_t *)1;
	uint8_t *buf = layer_encode(MEM_LAYER_FULL, 64 * MIB, 64 * MIB / SNAP_PAGE_SIZE, NULL, &h);

	REQUIRE(buf);
	CHECK_EQ_INT(h.data_offset, 4096);
	CHECK_OK(mem_layer_header_parse(buf, 4096, 4096 + 64 * MIB, LAYER, &got, &bitmap, &err), err.msg);
	CHECK_EQ_INT(got.kind, MEM_LAYER_FULL);
	CHECK_EQ_INT(got.mem_size, 64 * MIB);
	CHECK_EQ_INT(got.data_offset, 4096);
	CHECK_EQ_INT(got.pages, 16384);
	CHECK(memcmp(got.id, h.id, SNAP_ID_SIZE) == 0);
	CHECK(bitmap == NULL);
	free(buf);
}

TEST(diff_memory_layer_header_reads_back_the_same_with_its_bitmap)
{
	struct mem_layer_header h, got;
	struct vm_error err = { 0 };
	const uint8_t *bitmap = NULL;
	uint8_t *bm = diff_bitmap(), *buf = layer_encode(MEM_LAYER_DIFF, DIFF_MEM, 10, bm, &h);

	REQUIRE(buf);
	CHECK_EQ_INT(h.data_offset, 12288);
	CHECK_OK(mem_layer_header_parse(buf, 12288, 12288 + DIFF_MEM, LAYER, &got, &bitmap, &err), err.msg);
	CHECK_EQ_INT(got.kind, MEM_LAYER_DIFF);
	CHECK_EQ_INT(got.mem_size, DIFF_MEM);
	CHECK_EQ_INT(got.data_offset, 12288);
	CHECK_EQ_INT(got.pages, 10);
	CHECK(memcmp(got.id, h.id, SNAP_ID_SIZE) == 0);
	CHECK(bitmap == buf + MEM_LAYER_HEADER_SIZE);
	CHECK(bitmap && memcmp(bitmap, bm, DIFF_MEM / SNAP_PAGE_SIZE / 8) == 0);
	free(buf);
	free(bm);
}

TEST(memory_layer_header_asks_for_its_bitmap_when_given_less)
{
	static const size_t lens[] = { 64, 65, 4096, 12287 };
	struct mem_layer_header h, got;
	struct vm_error err = { 0 };
	const uint8_t *bitmap = (const uint8_t *)1;
	uint8_t *bm = diff_bitmap(), *buf = layer_encode(MEM_LAYER_DIFF, DIFF_MEM, 10, bm, &h), *full;

	REQUIRE(buf);
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		CHECK_EQ_INT(mem_layer_header_parse(buf, lens[i], 12288 + DIFF_MEM, LAYER, &got, &bitmap, &err), 12288);
		CHECK(bitmap == NULL);
	}
	full = layer_encode(MEM_LAYER_FULL, 64 * MIB, 16384, NULL, &h);
	REQUIRE(full);
	CHECK_EQ_INT(mem_layer_header_parse(full, 64, 4096 + 64 * MIB, LAYER, &got, &bitmap, &err), 4096);
	free(full);
	free(buf);
	free(bm);
}

TEST(memory_layer_with_a_bad_header_is_refused)
{
	const uint64_t size = 4096 + 64 * MIB;
	struct mem_layer_header h;
	uint8_t *buf = layer_encode(MEM_LAYER_FULL, 64 * MIB, 16384, NULL, &h), saved[MEM_LAYER_HEADER_SIZE];

	REQUIRE(buf);
	memcpy(saved, buf, sizeof(saved));
	CHECK_LAYER_REFUSED(buf, 63, size, "is truncated: 63 bytes, shorter than its 64-byte header");
	CHECK_LAYER_REFUSED(buf, 0, size, "is truncated: 0 bytes");
	memcpy(buf, "SMOLSNAP", 8);
	CHECK_LAYER_REFUSED(buf, 4096, size, "is not a snapshot memory layer (no SMOLMEM magic)");
	memcpy(buf, saved, sizeof(saved));
	put32(buf + 8, 2);
	CHECK_LAYER_REFUSED(buf, 4096, size, "has memory layer version 2; this Smol reads version 1");
	memcpy(buf, saved, sizeof(saved));
	put32(buf + 12, 3);
	CHECK_LAYER_REFUSED(buf, 4096, size, "unknown layer kind 3 (1 full, 2 diff)");
	put32(buf + 12, 0);
	CHECK_LAYER_REFUSED(buf, 4096, size, "unknown layer kind 0 (1 full, 2 diff)");
	memcpy(buf, saved, sizeof(saved));
	put64(buf + 16, 64 * MIB + 4096);
	CHECK_LAYER_REFUSED(buf, 4096, size, "memory size 67112960 bytes is not a whole number of MiB up to 256 GiB");
	put64(buf + 16, 0);
	CHECK_LAYER_REFUSED(buf, 4096, size, "memory size 0 bytes is not a whole number of MiB");
	put64(buf + 16, 257 * GIB);
	CHECK_LAYER_REFUSED(buf, 4096, size, "is not a whole number of MiB up to 256 GiB");
	memcpy(buf, saved, sizeof(saved));
	put64(buf + 24, 8192);
	CHECK_LAYER_REFUSED(buf, 4096, size, "data offset 8192, expected 4096");
	put64(buf + 24, 64);
	CHECK_LAYER_REFUSED(buf, 4096, size, "data offset 64, expected 4096");
	memcpy(buf, saved, sizeof(saved));
	put64(buf + 32, 16385);
	CHECK_LAYER_REFUSED(buf, 4096, size, "16385 pages present, more than the 16384 in guest memory");
	memcpy(buf, saved, sizeof(saved));
	CHECK_LAYER_REFUSED(buf, 4096, size - 1, "is 67112959 bytes; a layer of 64 MiB must be 67112960 (truncated)");
	CHECK_LAYER_REFUSED(buf, 4096, 0, "is 0 bytes; a layer of 64 MiB must be 67112960 (truncated)");
	CHECK_LAYER_REFUSED(buf, 4096, size + 1, "is 67112961 bytes; a layer of 64 MiB must be 67112960 (too long)");
	buf[45] ^= 0x40;	/* in the id */
	CHECK_LAYER_REFUSED(buf, 4096, size, "is corrupted: its header checksum does not match");
	memcpy(buf, saved, sizeof(saved));
	buf[60] ^= 1;		/* in the checksum itself */
	CHECK_LAYER_REFUSED(buf, 4096, size, "is corrupted: its header checksum does not match");
	free(buf);
}

TEST(diff_layer_with_a_damaged_or_miscounted_bitmap_is_refused)
{
	const uint64_t size = 12288 + DIFF_MEM;
	struct mem_layer_header h;
	uint8_t *bm = diff_bitmap(), *buf = layer_encode(MEM_LAYER_DIFF, DIFF_MEM, 10, bm, &h);

	REQUIRE(buf);
	buf[MEM_LAYER_HEADER_SIZE + 500] ^= 0x10;
	CHECK_LAYER_REFUSED(buf, 12288, size, "is corrupted: its header checksum does not match");
	buf[MEM_LAYER_HEADER_SIZE + 500] ^= 0x10;
	buf[MEM_LAYER_HEADER_SIZE + 8191] ^= 0x80;	/* the last page's bit */
	CHECK_LAYER_REFUSED(buf, 12288, size, "is corrupted: its header checksum does not match");
	free(buf);
	buf = layer_encode(MEM_LAYER_DIFF, DIFF_MEM, 11, bm, &h);	/* a right checksum over a wrong count */
	REQUIRE(buf);
	CHECK_LAYER_REFUSED(buf, 12288, size, "its bitmap has 10 pages, its header says 11");
	free(buf);
	buf = layer_encode(MEM_LAYER_DIFF, DIFF_MEM, 0, bm, &h);
	REQUIRE(buf);
	CHECK_LAYER_REFUSED(buf, 12288, size, "its bitmap has 10 pages, its header says 0");
	free(buf);
	free(bm);
}

TEST(full_layer_without_every_page_is_refused)
{
	struct mem_layer_header h;
	uint8_t *buf = layer_encode(MEM_LAYER_FULL, 64 * MIB, 5, NULL, &h);

	REQUIRE(buf);
	CHECK_LAYER_REFUSED(buf, 4096, 4096 + 64 * MIB, "a full layer must hold all 16384 pages, not 5");
	free(buf);
}

/* The UART's DEVICE bytes. */

static const struct uart_hooks no_hooks;

/* Bytes into the receive FIFO the way a guest's loopback test puts them there. */
static void loop_back(struct uart *u, const char *s)
{
	uart_write(u, UART_MCR, UART_MCR_LOOP | 0x0b);
	while (*s)
		uart_write(u, UART_THR, (uint8_t)*s++);
	uart_write(u, UART_MCR, 0x0b);	/* DTR, RTS, OUT2 */
}

TEST(uart_state_keeps_registers_and_fifo_order_across_a_wrapped_ring)
{
	struct uart u1, u2;
	uint8_t saved[UART_STATE_MAX], again[UART_STATE_MAX];
	char got[17] = { 0 };
	size_t n;

	uart_init(&u1, &no_hooks);
	uart_write(&u1, UART_LCR, UART_LCR_DLAB);
	uart_write(&u1, UART_RBR, 1);		/* divisor 1: 115200 baud */
	uart_write(&u1, UART_IER, 0);
	uart_write(&u1, UART_LCR, 0x03);
	uart_write(&u1, UART_FCR, 0xc1);	/* FIFO on, trigger at 14 */
	uart_write(&u1, UART_SCR, 0x5a);
	uart_write(&u1, UART_IER, UART_IER_RDI | UART_IER_THRI);
	loop_back(&u1, "0123456789abcdef");
	for (int i = 0; i < 5; i++)
		CHECK_EQ_INT(uart_read(&u1, UART_RBR), "01234"[i]);
	loop_back(&u1, "ghijk");		/* the ring wraps: head at 5, 16 bytes */
	n = uart_save(&u1, saved);
	CHECK_EQ_INT(n, UART_STATE_FIXED + 16);

	uart_init(&u2, &no_hooks);
	CHECK(uart_load(&u2, saved, n) == NULL);
	CHECK_EQ_INT(uart_save(&u2, again), n);
	CHECK(memcmp(saved, again, n) == 0);
	uart_resync_irq(&u2);
	CHECK_EQ_INT(u2.irq_level, 1);		/* 16 bytes waiting, above the trigger level */
	CHECK_EQ_INT(uart_read(&u2, UART_LCR), 0x03);
	CHECK_EQ_INT(uart_read(&u2, UART_MCR), 0x0b);
	CHECK_EQ_INT(uart_read(&u2, UART_SCR), 0x5a);
	CHECK_EQ_INT(uart_read(&u2, UART_IER), UART_IER_RDI | UART_IER_THRI);
	CHECK_EQ_INT(uart_read(&u2, UART_IIR), UART_IIR_RDI | UART_IIR_FIFO_ENABLED);
	for (int i = 0; i < 16; i++)
		got[i] = (char)uart_read(&u2, UART_RBR);
	CHECK(strcmp(got, "56789abcdefghijk") == 0);
	CHECK_EQ_INT(uart_read(&u2, UART_LSR) & UART_LSR_DR, 0);
	/* Then the pending transmit-empty interrupt, acknowledged by reading IIR. */
	CHECK_EQ_INT(uart_read(&u2, UART_IIR), UART_IIR_THRI | UART_IIR_FIFO_ENABLED);
	CHECK_EQ_INT(uart_read(&u2, UART_IIR), UART_IIR_NO_INT | UART_IIR_FIFO_ENABLED);
	CHECK_EQ_INT(u2.irq_level, 0);
	uart_write(&u2, UART_LCR, UART_LCR_DLAB);
	CHECK_EQ_INT(uart_read(&u2, UART_RBR), 1);
	CHECK_EQ_INT(uart_read(&u2, UART_IER), 0);
	uart_exit(&u1);
	uart_exit(&u2);
}

TEST(uart_state_that_does_not_fit_the_uart_is_refused_and_changes_nothing)
{
	static const struct {
		uint8_t bytes[UART_STATE_MAX + 2];
		size_t len;
		const char *want;
	} cases[] = {
		{ { 0 }, 0, "shorter than the registers" },
		{ { 0x01, 0x03, 0x08, 0, 0, 1, 0, 0xc1, 0 }, 9, "shorter than the registers" },
		{ { 0x01, 0x03, 0x08, 0, 0, 1, 0, 0xc1, 0, 17 }, UART_STATE_FIXED + 17,
		  "more bytes in the receive FIFO than it holds" },
		{ { 0x01, 0x03, 0x08, 0, 0, 1, 0, 0xc1, 0, 255 }, UART_STATE_MAX, "more bytes in the receive FIFO" },
		{ { 0x01, 0x03, 0x08, 0, 0, 1, 0, 0xc1, 0, 3, 'a', 'b' }, 12, "its length does not match its receive FIFO" },
		{ { 0x01, 0x03, 0x08, 0, 0, 1, 0, 0xc1, 0, 3, 'a', 'b', 'c', 'd' }, 14,
		  "its length does not match its receive FIFO" },
		{ { 0x01, 0x03, 0x08, 0, 0, 1, 0, 0xc1, 2, 0 }, UART_STATE_FIXED,
		  "the transmit-interrupt flag is not 0 or 1" },
		{ { 0x01, 0x03, 0x08, 0, 0, 1, 0, 0x00, 0, 2, 'a', 'b' }, 12,
		  "more than one received byte with the FIFO off" },
		{ { 0x11, 0x03, 0x08, 0, 0, 1, 0, 0xc1, 0, 0 }, UART_STATE_FIXED, "bits set that the UART never keeps" },
		{ { 0x01, 0x03, 0x28, 0, 0, 1, 0, 0xc1, 0, 0 }, UART_STATE_FIXED, "bits set that the UART never keeps" },
		{ { 0x01, 0x03, 0x08, 0x04, 0, 1, 0, 0xc1, 0, 0 }, UART_STATE_FIXED, "bits set that the UART never keeps" },
		{ { 0x01, 0x03, 0x08, 0x01, 0, 1, 0, 0xc1, 0, 1, 'a' }, UART_STATE_FIXED + 1,
		  "a byte offered from the host queue while the receive FIFO holds bytes" },
		{ { 0x01, 0x03, 0x08, 0, 0, 1, 0, 0xc3, 0, 0 }, UART_STATE_FIXED, "bits set that the UART never keeps" },
	};
	struct uart u;
	uint8_t before[UART_STATE_MAX], after[UART_STATE_MAX];
	size_t n;

	uart_init(&u, &no_hooks);
	REQUIRE(uart_load(&u, sample_uart_state, sizeof(sample_uart_state)) == NULL);
	n = uart_save(&u, before);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *why = uart_load(&u, cases[i].bytes, cases[i].len);

		if (!test_str_contains(why, cases[i].want))
			test_fail(__FILE__, __LINE__, "case %zu: \"%s\", expected \"%s\"", i, why ? why : "(accepted)",
				  cases[i].want);
		CHECK(uart_save(&u, after) == n && memcmp(before, after, n) == 0);
	}
	/* One byte with the FIFO off is what a 16450-mode UART holds. */
	CHECK(uart_load(&u, (const uint8_t[]){ 0x01, 0x03, 0x08, 0, 0, 1, 0, 0x00, 0, 1, 'z' }, 11) == NULL);
	CHECK_EQ_INT(uart_read(&u, UART_RBR), 'z');
	uart_exit(&u);
}
