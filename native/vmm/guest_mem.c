#define _GNU_SOURCE
#include "guest_mem.h"
#include "error.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int guest_mem_init(struct guest_mem *mem, uint64_t size, struct vm_error *err)
{
	memset(mem, 0, sizeof(*mem));
	mem->fd = memfd_create("smol-guest-ram", MFD_CLOEXEC);
	if (mem->fd < 0)
		return vm_error_set(err, errno, "cannot create guest memory: memfd_create: %s", strerror(errno));
	if (ftruncate(mem->fd, (off_t)size) < 0) {
		int e = errno;

		close(mem->fd);
		mem->fd = -1;
		return vm_error_set(err, e, "cannot size guest memory to %llu MiB: %s",
				    (unsigned long long)(size >> 20), strerror(e));
	}
	mem->host = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, mem->fd, 0);
	if (mem->host == MAP_FAILED) {
		int e = errno;

		close(mem->fd);
		mem->fd = -1;
		mem->host = NULL;
		return vm_error_set(err, e, "cannot map %llu MiB of guest memory: %s",
				    (unsigned long long)(size >> 20), strerror(e));
	}
	mem->size = size;
	mem->low_size = size < GUEST_MMIO_GAP_START ? size : GUEST_MMIO_GAP_START;
	mem->high_size = size - mem->low_size;
	return 0;
}

void guest_mem_exit(struct guest_mem *mem)
{
	if (mem->host && mem->host != MAP_FAILED)
		munmap(mem->host, mem->size);
	if (mem->fd >= 0)
		close(mem->fd);
	mem->host = NULL;
	mem->fd = -1;
}

void *guest_mem_ptr(const struct guest_mem *mem, uint64_t gpa, uint64_t len)
{
	/* Written so that no sum can overflow: compare lengths against what is left of each region. */
	if (gpa < mem->low_size) {
		if (len > mem->low_size - gpa)
			return NULL;
		return mem->host + gpa;
	}
	if (gpa >= GUEST_HIGH_START && gpa - GUEST_HIGH_START < mem->high_size) {
		uint64_t off = gpa - GUEST_HIGH_START;

		if (len > mem->high_size - off)
			return NULL;
		return mem->host + mem->low_size + off;
	}
	return NULL;
}
