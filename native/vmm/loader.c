#define _GNU_SOURCE
#include "loader.h"
#include "error.h"
#include "file_io.h"
#include "guest_mem.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIB(x) ((unsigned long long)(x) >> 20)

static int file_size(int fd, uint64_t *size)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	*size = (uint64_t)st.st_size;
	return 0;
}

static int load_elf64(struct guest_mem *mem, int fd, const char *name, uint64_t fsize, const Elf64_Ehdr *eh,
		      struct kernel_image *out, struct vm_error *err)
{
	Elf64_Phdr ph[64];
	int loaded = 0, entry_inside = 0;

	if (eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB || eh->e_machine != EM_X86_64)
		return vm_error_set(err, ENOEXEC, "kernel %s: not a little-endian ELF64 x86-64 file", name);
	if (eh->e_type != ET_EXEC)
		return vm_error_set(err, ENOEXEC, "kernel %s: ELF type %u is not an executable", name, eh->e_type);
	if (eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phnum == 0 || eh->e_phnum > 64)
		return vm_error_set(err, ENOEXEC, "kernel %s: bad program header table (%u entries of %u bytes)", name,
				    eh->e_phnum, eh->e_phentsize);
	if (eh->e_phoff > fsize || (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) > fsize - eh->e_phoff)
		return vm_error_set(err, ENOEXEC, "kernel %s: program header table lies outside the file", name);
	if (file_pread_all(fd, ph, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr), eh->e_phoff) < 0)
		return vm_error_set(err, EIO, "kernel %s: cannot read program headers", name);

	out->kind = KERNEL_ELF64;
	out->end = 0;
	for (int i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *p = &ph[i];
		uint8_t *dst;

		if (p->p_type != PT_LOAD || p->p_memsz == 0)
			continue;
		if (p->p_filesz > p->p_memsz)
			return vm_error_set(err, ENOEXEC, "kernel %s: segment %d has more file bytes than memory bytes",
					    name, i);
		if (p->p_offset > fsize || p->p_filesz > fsize - p->p_offset)
			return vm_error_set(err, ENOEXEC, "kernel %s: segment %d lies outside the file (truncated?)",
					    name, i);
		if (p->p_paddr < LOADER_MIN_ADDR)
			return vm_error_set(err, ENOEXEC, "kernel %s: segment %d at 0x%llx is below 1 MiB", name, i,
					    (unsigned long long)p->p_paddr);
		dst = guest_mem_ptr(mem, p->p_paddr, p->p_memsz);
		if (!dst)
			return vm_error_set(err, ENOMEM,
					    "kernel %s: segment at 0x%llx+0x%llx does not fit in %llu MiB of RAM", name,
					    (unsigned long long)p->p_paddr, (unsigned long long)p->p_memsz,
					    MIB(mem->size));
		if (file_pread_all(fd, dst, p->p_filesz, p->p_offset) < 0)
			return vm_error_set(err, EIO, "kernel %s: cannot read segment %d", name, i);
		memset(dst + p->p_filesz, 0, p->p_memsz - p->p_filesz);
		if (eh->e_entry >= p->p_paddr && eh->e_entry - p->p_paddr < p->p_memsz)
			entry_inside = 1;
		if (p->p_paddr + p->p_memsz > out->end)
			out->end = p->p_paddr + p->p_memsz;
		loaded++;
	}
	if (!loaded)
		return vm_error_set(err, ENOEXEC, "kernel %s: no loadable segment", name);
	if (eh->e_entry >= 0x100000000ULL)
		return vm_error_set(err, ENOEXEC, "kernel %s: entry point 0x%llx is above the 4 GiB the boot page tables map",
				    name, (unsigned long long)eh->e_entry);
	if (!entry_inside)
		return vm_error_set(err, ENOEXEC, "kernel %s: entry point 0x%llx is not inside a loaded segment", name,
				    (unsigned long long)eh->e_entry);
	out->entry = eh->e_entry;
	out->initrd_addr_max = 0xffffffff;
	return 0;
}

/* Offsets in the bzImage's first sector(s), from the Linux x86 boot protocol. */
#define BZ_SETUP_SECTS 0x1f1
#define BZ_BOOT_FLAG 0x1fe
#define BZ_JUMP 0x200
#define BZ_HEADER 0x202
#define BZ_VERSION 0x206
#define BZ_INITRD_ADDR_MAX 0x22c
#define BZ_XLOADFLAGS 0x236
#define BZ_PREF_ADDRESS 0x258
#define BZ_INIT_SIZE 0x260
#define BZ_HEAD_LEN 0x280	/* covers the longest setup header we copy (0x1f1 + 0x80) */

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int load_bzimage(struct guest_mem *mem, int fd, const char *name, uint64_t fsize, const uint8_t *head,
			struct kernel_image *out, struct vm_error *err)
{
	unsigned setup_sects = head[BZ_SETUP_SECTS] ? head[BZ_SETUP_SECTS] : 4;
	uint64_t pm_off = (uint64_t)(setup_sects + 1) * 512, pm_size, load, span;
	uint16_t version = (uint16_t)(head[BZ_VERSION] | head[BZ_VERSION + 1] << 8);
	uint32_t hdr_end = BZ_HEADER + head[BZ_JUMP + 1];
	uint8_t *dst;

	if (version < 0x20c || !(head[BZ_XLOADFLAGS] & 1))
		return vm_error_set(err, ENOEXEC, "kernel %s: bzImage (boot protocol %u.%02u) has no 64-bit entry point",
				    name, version >> 8, version & 0xff);
	if (pm_off >= fsize)
		return vm_error_set(err, ENOEXEC, "kernel %s: bzImage is truncated", name);
	pm_size = fsize - pm_off;
	load = ((uint64_t)le32(head + BZ_PREF_ADDRESS + 4) << 32) | le32(head + BZ_PREF_ADDRESS);
	if (load < LOADER_MIN_ADDR || load >= 0x100000000ULL)
		load = 0x1000000;
	span = le32(head + BZ_INIT_SIZE) > pm_size ? le32(head + BZ_INIT_SIZE) : pm_size;
	dst = guest_mem_ptr(mem, load, span);
	if (!dst)
		return vm_error_set(err, ENOMEM, "kernel %s: needs 0x%llx+0x%llx, which does not fit in %llu MiB of RAM",
				    name, (unsigned long long)load, (unsigned long long)span, MIB(mem->size));
	if (file_pread_all(fd, dst, pm_size, pm_off) < 0)
		return vm_error_set(err, EIO, "kernel %s: cannot read the protected-mode kernel", name);
	out->kind = KERNEL_BZIMAGE;
	out->entry = load + 0x200;	/* startup_64 */
	out->end = load + span;
	if (hdr_end > BZ_SETUP_SECTS + sizeof(out->setup_header))
		hdr_end = BZ_SETUP_SECTS + sizeof(out->setup_header);
	out->setup_header_len = hdr_end - BZ_SETUP_SECTS;
	memcpy(out->setup_header, head + BZ_SETUP_SECTS, out->setup_header_len);
	out->initrd_addr_max = le32(head + BZ_INITRD_ADDR_MAX);
	return 0;
}

int loader_load_kernel_fd(struct guest_mem *mem, int fd, const char *name, struct kernel_image *out,
			  struct vm_error *err)
{
	uint8_t head[BZ_HEAD_LEN];
	uint64_t fsize = 0;

	memset(out, 0, sizeof(*out));
	int ret = file_size(fd, &fsize);

	if (ret < 0)
		return vm_error_set(err, -ret, "kernel %s: %s", name, ret == -EINVAL ? "not a regular file" : strerror(-ret));
	if (fsize < sizeof(Elf64_Ehdr))
		return vm_error_set(err, ENOEXEC, "kernel %s: not an ELF64 file or bzImage (only %llu bytes)", name,
				    (unsigned long long)fsize);
	memset(head, 0, sizeof(head));
	if (file_pread_all(fd, head, fsize < sizeof(head) ? fsize : sizeof(head), 0) < 0)
		return vm_error_set(err, EIO, "kernel %s: cannot read the file header", name);
	if (!memcmp(head, ELFMAG, SELFMAG))
		return load_elf64(mem, fd, name, fsize, (const Elf64_Ehdr *)head, out, err);
	if (fsize >= sizeof(head) && head[BZ_BOOT_FLAG] == 0x55 && head[BZ_BOOT_FLAG + 1] == 0xaa &&
	    !memcmp(head + BZ_HEADER, "HdrS", 4))
		return load_bzimage(mem, fd, name, fsize, head, out, err);
	return vm_error_set(err, ENOEXEC, "kernel %s: not an ELF64 file or bzImage", name);
}

int loader_load_kernel(struct guest_mem *mem, const char *path, struct kernel_image *out, struct vm_error *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK), ret;	/* a FIFO must not block us */

	if (fd < 0)
		return vm_error_set(err, errno, "kernel %s: %s", path, strerror(errno));
	ret = loader_load_kernel_fd(mem, fd, path, out, err);
	close(fd);
	return ret;
}

int loader_load_initrd(struct guest_mem *mem, const char *path, uint64_t min_addr, uint64_t max_addr,
		       uint64_t *addr, uint64_t *size, struct vm_error *err)
{
	uint64_t fsize, top = max_addr < mem->low_size ? max_addr : mem->low_size, at;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK), ret = 0;
	void *dst;

	if (fd < 0)
		return vm_error_set(err, errno, "initrd %s: %s", path, strerror(errno));
	if (file_size(fd, &fsize) < 0) {
		ret = vm_error_set(err, EINVAL, "initrd %s: not a regular file", path);
		goto out;
	}
	if (fsize == 0) {
		ret = vm_error_set(err, EINVAL, "initrd %s is empty", path);
		goto out;
	}
	if (fsize > top || ((top - fsize) & ~0xfffULL) < min_addr) {
		ret = vm_error_set(err, ENOMEM, "initrd %s (%llu MiB) does not fit above the kernel in %llu MiB of RAM",
				   path, MIB(fsize), MIB(mem->size));
		goto out;
	}
	at = (top - fsize) & ~0xfffULL;
	dst = guest_mem_ptr(mem, at, fsize);
	if (!dst || file_pread_all(fd, dst, fsize, 0) < 0) {
		ret = vm_error_set(err, EIO, "initrd %s: cannot read it", path);
		goto out;
	}
	*addr = at;
	*size = fsize;
out:
	close(fd);
	return ret;
}
