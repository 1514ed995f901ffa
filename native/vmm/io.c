#include "io.h"

#include <errno.h>

int io_bus_register(struct io_bus *bus, uint64_t base, uint64_t len, io_handler_fn fn, void *opaque)
{
	if (!len || base + len < base)
		return -EINVAL;
	for (int i = 0; i < bus->nr; i++) {
		const struct io_range *r = &bus->ranges[i];

		if (base < r->base + r->len && r->base < base + len)
			return -EEXIST;
	}
	if (bus->nr == IO_BUS_MAX_RANGES)
		return -ENOSPC;
	bus->ranges[bus->nr++] = (struct io_range){ .base = base, .len = len, .fn = fn, .opaque = opaque };
	return 0;
}

int io_bus_dispatch(struct io_bus *bus, struct vm *vm, uint64_t addr, uint8_t *data, uint32_t len, int is_write)
{
	for (int i = 0; i < bus->nr; i++) {
		const struct io_range *r = &bus->ranges[i];

		if (addr >= r->base && addr - r->base < r->len) {
			r->fn(vm, addr - r->base, data, len, is_write, r->opaque);
			return 1;
		}
	}
	return 0;
}
