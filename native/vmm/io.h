/* Port-I/O and MMIO dispatch: one table per bus, one callback signature for every device. */
#ifndef SMOL_IO_H
#define SMOL_IO_H

#include <stdint.h>

struct vm;

/* `offset` is relative to the range's base; `len` is 1, 2, 4 or 8. */
typedef void (*io_handler_fn)(struct vm *vm, uint64_t offset, uint8_t *data, uint32_t len, int is_write,
			      void *opaque);

#define IO_BUS_MAX_RANGES 32

struct io_range {
	uint64_t base, len;
	io_handler_fn fn;
	void *opaque;
};

struct io_bus {
	struct io_range ranges[IO_BUS_MAX_RANGES];
	int nr;
};

/* Returns -EEXIST when the range overlaps one already registered, -ENOSPC when the table is full. */
int io_bus_register(struct io_bus *bus, uint64_t base, uint64_t len, io_handler_fn fn, void *opaque);

/* Returns 1 when a device handled the access, 0 when nothing lives there. */
int io_bus_dispatch(struct io_bus *bus, struct vm *vm, uint64_t addr, uint8_t *data, uint32_t len, int is_write);

#endif
