/* Loading an ELF64 kernel: every test starts from a valid two-segment file and breaks one thing. */
#include "test.h"
#include "error.h"
#include "guest_mem.h"
#include "loader.h"

#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RAM (16ULL << 20)
#define SEG0_ADDR 0x100000ULL	/* text: 0x100 bytes from the file */
#define SEG1_ADDR 0x200000ULL	/* data: 0x80 bytes from the file, then 0xf80 bytes of bss */
#define ENTRY (SEG0_ADDR + 0x10)

struct elf_file {
	union {
		uint8_t bytes[0x2080];
		Elf64_Ehdr eh;
	};
	size_t len;
};

static Elf64_Phdr *phdr(struct elf_file *f, int i)
{
	return (Elf64_Phdr *)(f->bytes + f->eh.e_phoff) + i;
}

static void elf_valid(struct elf_file *f)
{
	memset(f, 0, sizeof(*f));
	memcpy(f->eh.e_ident, ELFMAG, SELFMAG);
	f->eh.e_ident[EI_CLASS] = ELFCLASS64;
	f->eh.e_ident[EI_DATA] = ELFDATA2LSB;
	f->eh.e_ident[EI_VERSION] = EV_CURRENT;
	f->eh.e_type = ET_EXEC;
	f->eh.e_machine = EM_X86_64;
	f->eh.e_version = EV_CURRENT;
	f->eh.e_entry = ENTRY;
	f->eh.e_phoff = sizeof(Elf64_Ehdr);
	f->eh.e_ehsize = sizeof(Elf64_Ehdr);
	f->eh.e_phentsize = sizeof(Elf64_Phdr);
	f->eh.e_phnum = 2;
	*phdr(f, 0) = (Elf64_Phdr){ .p_type = PT_LOAD, .p_offset = 0x1000, .p_paddr = SEG0_ADDR, .p_vaddr = SEG0_ADDR,
				    .p_filesz = 0x100, .p_memsz = 0x100, .p_flags = PF_R | PF_X };
	*phdr(f, 1) = (Elf64_Phdr){ .p_type = PT_LOAD, .p_offset = 0x2000, .p_paddr = SEG1_ADDR, .p_vaddr = SEG1_ADDR,
				    .p_filesz = 0x80, .p_memsz = 0x1000, .p_flags = PF_R | PF_W };
	for (int i = 0; i < 0x100; i++)
		f->bytes[0x1000 + i] = (uint8_t)(0xa0 + i);
	for (int i = 0; i < 0x80; i++)
		f->bytes[0x2000 + i] = (uint8_t)(0x30 + i);
	f->len = sizeof(f->bytes);
}

/* Writes `len` bytes to a temporary file and loads it as the kernel into `mem`. */
static int load_bytes(struct guest_mem *mem, const void *data, size_t len, struct kernel_image *k,
		      struct vm_error *err)
{
	char path[TEST_PATH_MAX];
	int ret = test_tmpfile(path, data, len);

	if (ret < 0)
		return vm_error_set(err, -ret, "test could not write its kernel file");
	ret = loader_load_kernel(mem, path, k, err);
	unlink(path);
	return ret;
}

/* The loader's message for the file, or a note that it loaded. */
static const char *load_error(const struct elf_file *f)
{
	static struct vm_error err;
	struct guest_mem mem;
	struct kernel_image k;

	memset(&err, 0, sizeof(err));
	if (guest_mem_init(&mem, RAM, &err) < 0)
		return err.msg;
	if (load_bytes(&mem, f->bytes, f->len, &k, &err) == 0)
		snprintf(err.msg, sizeof(err.msg), "(loaded without error)");
	guest_mem_exit(&mem);
	return err.msg;
}

TEST(elf_segments_are_copied_to_their_physical_address_and_bss_is_zeroed)
{
	struct vm_error err = { 0 };
	struct elf_file f;
	struct guest_mem mem;
	struct kernel_image k;
	uint8_t *seg0, *seg1;

	elf_valid(&f);
	REQUIRE(guest_mem_init(&mem, RAM, &err) == 0);
	seg1 = guest_mem_ptr(&mem, SEG1_ADDR, 0x1000);
	REQUIRE(seg1);
	memset(seg1, 0xcc, 0x1000);	/* stale bytes where the bss goes */
	CHECK_OK(load_bytes(&mem, f.bytes, f.len, &k, &err), err.msg);
	CHECK_EQ_INT(k.kind, KERNEL_ELF64);
	CHECK_EQ_INT(k.entry, ENTRY);
	CHECK_EQ_INT(k.end, SEG1_ADDR + 0x1000);
	seg0 = guest_mem_ptr(&mem, SEG0_ADDR, 0x100);
	REQUIRE(seg0);
	CHECK(memcmp(seg0, f.bytes + 0x1000, 0x100) == 0);
	CHECK(memcmp(seg1, f.bytes + 0x2000, 0x80) == 0);
	for (int i = 0x80; i < 0x1000; i++)
		if (seg1[i] != 0) {
			CHECK_EQ_INT(seg1[i], 0);
			break;
		}
	CHECK_EQ_INT(*(uint8_t *)guest_mem_ptr(&mem, SEG0_ADDR - 1, 1), 0);	/* nothing written below it */
	guest_mem_exit(&mem);
}

TEST(file_that_is_neither_elf_nor_bzimage_is_rejected)
{
	struct elf_file f;

	elf_valid(&f);
	memcpy(f.bytes, "MZ\x90\x00", 4);
	CHECK_STR_CONTAINS(load_error(&f), "not an ELF64 file or bzImage");
}

TEST(elf32_big_endian_and_foreign_machine_kernels_are_rejected)
{
	struct elf_file f;

	elf_valid(&f);
	f.eh.e_ident[EI_CLASS] = ELFCLASS32;
	CHECK_STR_CONTAINS(load_error(&f), "not a little-endian ELF64 x86-64 file");
	elf_valid(&f);
	f.eh.e_ident[EI_DATA] = ELFDATA2MSB;
	CHECK_STR_CONTAINS(load_error(&f), "not a little-endian ELF64 x86-64 file");
	elf_valid(&f);
	f.eh.e_machine = EM_AARCH64;
	CHECK_STR_CONTAINS(load_error(&f), "not a little-endian ELF64 x86-64 file");
}

TEST(position_independent_elf_is_rejected)
{
	struct elf_file f;

	elf_valid(&f);
	f.eh.e_type = ET_DYN;
	CHECK_STR_CONTAINS(load_error(&f), "is not an executable");
}

TEST(truncated_elf_names_the_segment_outside_the_file)
{
	struct elf_file f;

	elf_valid(&f);
	f.len = 0x2040;		/* segment 1 wants file bytes up to 0x2080 */
	CHECK_STR_CONTAINS(load_error(&f), "segment 1 lies outside the file");
	elf_valid(&f);
	phdr(&f, 0)->p_offset = 0xfffffffffffff000ULL;	/* offset + filesz wraps around */
	CHECK_STR_CONTAINS(load_error(&f), "segment 0 lies outside the file");
}

TEST(program_header_table_outside_the_file_is_rejected)
{
	struct elf_file f;

	elf_valid(&f);
	f.eh.e_phoff = f.len - 8;
	CHECK_STR_CONTAINS(load_error(&f), "program header table lies outside the file");
	f.eh.e_phoff = 0xffffffffffffffc0ULL;	/* offset + size wraps around */
	CHECK_STR_CONTAINS(load_error(&f), "program header table lies outside the file");
}

TEST(elf_with_no_or_too_many_program_headers_is_rejected)
{
	struct elf_file f;

	elf_valid(&f);
	f.eh.e_phnum = 0;
	CHECK_STR_CONTAINS(load_error(&f), "bad program header table (0 entries");
	f.eh.e_phnum = 65;
	CHECK_STR_CONTAINS(load_error(&f), "bad program header table (65 entries");
	f.eh.e_phnum = 2;
	f.eh.e_phentsize = sizeof(Elf32_Phdr);
	CHECK_STR_CONTAINS(load_error(&f), "bad program header table");
}

TEST(segment_below_1mib_is_rejected)
{
	struct elf_file f;

	elf_valid(&f);
	phdr(&f, 0)->p_paddr = SEG0_ADDR - 0x1000;	/* would cover the boot structures */
	CHECK_STR_CONTAINS(load_error(&f), "segment 0 at 0xff000 is below 1 MiB");
}

TEST(segment_beyond_ram_names_the_ram_size)
{
	struct elf_file f;

	elf_valid(&f);
	phdr(&f, 1)->p_paddr = RAM - 0x800;	/* starts inside RAM, ends 0x800 bytes past it */
	CHECK_STR_CONTAINS(load_error(&f), "segment at 0xfff800+0x1000 does not fit in 16 MiB of RAM");
}

TEST(segment_whose_end_wraps_past_2_pow_64_is_rejected)
{
	struct elf_file f;

	elf_valid(&f);
	/* p_paddr + p_memsz wraps to exactly 16 MiB: a naive `paddr + memsz <= ram` check would accept it. */
	phdr(&f, 1)->p_paddr = 0xfffffffffffff000ULL;
	phdr(&f, 1)->p_memsz = 0x1001000;
	CHECK_STR_CONTAINS(load_error(&f), "does not fit in 16 MiB");
}

TEST(segment_with_more_file_bytes_than_memory_bytes_is_rejected)
{
	struct elf_file f;

	elf_valid(&f);
	phdr(&f, 1)->p_filesz = 0x1001;
	CHECK_STR_CONTAINS(load_error(&f), "segment 1 has more file bytes than memory bytes");
}

TEST(entry_point_outside_every_segment_is_rejected)
{
	struct elf_file f;

	elf_valid(&f);
	f.eh.e_entry = SEG0_ADDR + 0x100;	/* one past the end of the text */
	CHECK_STR_CONTAINS(load_error(&f), "entry point 0x100100 is not inside a loaded segment");
}

TEST(elf_without_loadable_segments_is_rejected)
{
	struct elf_file f;

	elf_valid(&f);
	phdr(&f, 0)->p_type = PT_NOTE;
	phdr(&f, 1)->p_type = PT_NOTE;
	CHECK_STR_CONTAINS(load_error(&f), "no loadable segment");
}

TEST(ten_byte_file_is_rejected)
{
	struct elf_file f;

	elf_valid(&f);
	f.len = 10;
	CHECK_STR_CONTAINS(load_error(&f), "not an ELF64 file or bzImage (only 10 bytes)");
}

TEST(kernel_path_that_is_a_directory_is_rejected)
{
	struct vm_error err = { 0 };
	struct guest_mem mem;
	struct kernel_image k;
	char dir[TEST_PATH_MAX];

	snprintf(dir, sizeof(dir), "%s/dir-XXXXXX", test_tmpdir());
	REQUIRE(mkdtemp(dir));
	REQUIRE(guest_mem_init(&mem, RAM, &err) == 0);
	CHECK(loader_load_kernel(&mem, dir, &k, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, dir);
	CHECK_STR_CONTAINS(err.msg, "not a regular file");
	guest_mem_exit(&mem);
	rmdir(dir);
}

TEST(missing_kernel_file_names_the_path)
{
	struct vm_error err = { 0 };
	struct guest_mem mem;
	struct kernel_image k;

	REQUIRE(guest_mem_init(&mem, RAM, &err) == 0);
	CHECK(loader_load_kernel(&mem, "/nonexistent/smol/vmlinux", &k, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "kernel /nonexistent/smol/vmlinux: No such file");
	guest_mem_exit(&mem);
}
