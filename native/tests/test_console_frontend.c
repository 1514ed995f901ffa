/*
 * Console input routing (console_frontend.c): input goes to the first front end, in rank order, that takes it,
 * whatever order the devices were set up in, and to COM1 (which always takes it) when the virtio-console does not.
 */
#include "test.h"
#include "error.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static int driver_up;	/* the "virtio-console" takes input while this is set */

static int hvc_takes_input(void *dev)
{
	(void)dev;
	return driver_up;
}

static void nothing(void *dev)
{
	(void)dev;
}

static const struct console_frontend com1 = { .name = "com1", .input_ready = nothing };
static const struct console_frontend hvc = { .name = "virtio-console", .takes_input = hvc_takes_input,
					     .input_ready = nothing };

TEST(console_input_goes_to_the_virtio_console_once_its_driver_is_up_and_to_com1_otherwise)
{
	struct vm *vm = calloc(1, sizeof(*vm));
	struct vm_error err = { 0 };
	int a, b;

	REQUIRE(vm);
	CHECK(vm_console_input_owner(vm) == NULL);	/* no front end: the input waits in the host queue */
	/* COM1 is set up first (DEV_PRIO_CORE), the virtio-console later; rank, not setup order, decides. */
	CHECK_OK(vm_console_frontend_add(vm, &com1, &a, CONSOLE_RANK_LAST, &err), err.msg);
	CHECK(vm_console_input_owner(vm) == &com1);
	CHECK_OK(vm_console_frontend_add(vm, &hvc, &b, CONSOLE_RANK_FIRST, &err), err.msg);
	driver_up = 0;
	CHECK(vm_console_input_owner(vm) == &com1);
	driver_up = 1;
	CHECK(vm_console_input_owner(vm) == &hvc);
	/* A virtio-console that goes away (its teardown) hands input back to COM1. */
	vm_console_frontend_remove(vm, &b);
	CHECK(vm_console_input_owner(vm) == &com1);
	CHECK_EQ_INT(vm->nr_frontends, 1);
	driver_up = 0;
	free(vm);
}

TEST(console_front_ends_beyond_the_table_are_refused_by_name)
{
	struct vm *vm = calloc(1, sizeof(*vm));
	struct vm_error err = { 0 };
	int devs[VM_MAX_CONSOLE_FRONTENDS + 1];

	REQUIRE(vm);
	for (int i = 0; i < VM_MAX_CONSOLE_FRONTENDS; i++)
		CHECK_OK(vm_console_frontend_add(vm, &com1, &devs[i], CONSOLE_RANK_LAST, &err), err.msg);
	CHECK(vm_console_frontend_add(vm, &hvc, &devs[VM_MAX_CONSOLE_FRONTENDS], CONSOLE_RANK_FIRST, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "too many console devices for virtio-console");
	free(vm);
}
