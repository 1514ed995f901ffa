/* How much of a VM's guest RAM is resident, and how much of that is its own or shared with a layer (vm.h). */
#include "error.h"
#include "file_io.h"
#include "internal.h"
#include "snapfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAGEMAP_PRESENT (1ULL << 63)
#define PAGEMAP_FILE_OR_SHARED (1ULL << 61)

int vm_memory_stats(struct vm *vm, struct vm_memory_stats *out, struct vm_error *err)
{
	const uint64_t chunk = 65536;
	uint64_t pages = vm->mem.size / SNAP_PAGE_SIZE, host_page = (uint64_t)(uintptr_t)vm->mem.host / SNAP_PAGE_SIZE;
	uint64_t *buf = malloc(chunk * sizeof(uint64_t));
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	int own_memfd = vm->mem.layer == NULL;

	memset(out, 0, sizeof(*out));
	out->guest_bytes = vm->mem.size;
	if (fd < 0 || !buf) {
		free(buf);
		if (fd >= 0)
			close(fd);
		return vm_error_set(err, fd < 0 ? errno : ENOMEM, "cannot read /proc/self/pagemap: %s",
				    fd < 0 ? strerror(errno) : "out of memory");
	}
	for (uint64_t p = 0; p < pages; p += chunk) {
		uint64_t n = pages - p < chunk ? pages - p : chunk;
		int ret = file_pread_all(fd, buf, n * 8, (host_page + p) * 8);

		if (ret < 0) {
			free(buf);
			close(fd);
			return vm_error_set(err, -ret, "cannot read /proc/self/pagemap: %s", strerror(-ret));
		}
		for (uint64_t i = 0; i < n; i++) {
			if (!(buf[i] & PAGEMAP_PRESENT))
				continue;
			out->resident_bytes += SNAP_PAGE_SIZE;
			/* A VM on its own memfd owns every page; over a layer, anonymous pages are its own writes. */
			if (own_memfd || !(buf[i] & PAGEMAP_FILE_OR_SHARED))
				out->private_bytes += SNAP_PAGE_SIZE;
			else
				out->shared_bytes += SNAP_PAGE_SIZE;
		}
	}
	free(buf);
	close(fd);
	return 0;
}
