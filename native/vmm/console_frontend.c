/*
 * Console front ends (internal.h, struct console_frontend): the devices a guest reads its console from, in rank
 * order. Which one gets console input is decided here and nowhere else: the first that takes it now.
 */
#include "error.h"
#include "internal.h"

#include <errno.h>
#include <string.h>

int vm_console_frontend_add(struct vm *vm, const struct console_frontend *fe, void *dev, int rank,
			    struct vm_error *err)
{
	int i = vm->nr_frontends;

	if (i == VM_MAX_CONSOLE_FRONTENDS)
		return vm_error_set(err, ENOSPC, "too many console devices for %s", fe->name);
	for (; i > 0 && vm->frontends[i - 1].rank > rank; i--)
		vm->frontends[i] = vm->frontends[i - 1];
	vm->frontends[i] = (struct console_input){ .fe = fe, .dev = dev, .rank = rank };
	vm->nr_frontends++;
	return 0;
}

void vm_console_frontend_remove(struct vm *vm, void *dev)
{
	for (int i = 0; i < vm->nr_frontends; i++)
		if (vm->frontends[i].dev == dev) {
			memmove(&vm->frontends[i], &vm->frontends[i + 1],
				(size_t)(vm->nr_frontends - i - 1) * sizeof(vm->frontends[0]));
			vm->nr_frontends--;
			return;
		}
}

const struct console_frontend *vm_console_input_owner(struct vm *vm)
{
	for (int i = 0; i < vm->nr_frontends; i++) {
		const struct console_input *in = &vm->frontends[i];

		if (!in->fe->takes_input || in->fe->takes_input(in->dev))
			return in->fe;
	}
	return NULL;
}
