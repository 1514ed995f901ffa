/*
 * virtio-console in a VM (virtio_console.c has the device): slot 3, on the VM's console. It is the console's
 * first input front end: once its driver is up it takes the input COM1 otherwise gets (vm_console_input_owner).
 * Its state is the virtio device's alone; queued input is the console's, saved with the VM.
 */
#include "device.h"
#include "error.h"
#include "internal.h"
#include "virtio_dev.h"

#include <errno.h>
#include <stdlib.h>

static struct virtio_console *vcon_of(void *state)
{
	return ((struct vdev *)state)->dev;
}

static void console_kick(void *state)
{
	vdev_kick(state);
}

static int console_takes_input(void *state)
{
	return virtio_console_takes_input(&((struct vdev *)state)->t);
}

static const struct console_frontend virtio_console_frontend = {
	.name = "virtio-console",
	.takes_input = console_takes_input,
	.input_ready = console_kick,
};

static void console_free(struct vdev *v, struct virtio_console *c)
{
	if (v)
		vdev_free(v);
	free(c->buf);
	free(c);
}

static int console_setup(struct vm *vm, void **state, struct vm_error *err)
{
	struct virtio_console *c;
	struct vdev *v;
	int ret;

	if (!vdev_wanted(vm, "virtio-console", vm->devcfg.virtio_console))
		return 1;
	c = calloc(1, sizeof(*c));
	if (!c || !(c->buf = malloc(VIRTIO_CONSOLE_MAX_BUFFER))) {
		free(c);
		return vm_error_set(err, ENOMEM, "out of memory for the virtio-console");
	}
	c->con = &vm->console;
	ret = vdev_create(vm, &virtio_console_ops, VIRTIO_SLOT_CONSOLE, c, &v, err);
	if (ret < 0) {
		console_free(NULL, c);
		return ret;
	}
	ret = vdev_add_kick(v, err);
	if (ret == 0)
		ret = vm_console_frontend_add(vm, &virtio_console_frontend, v, CONSOLE_RANK_FIRST, err);
	if (ret < 0) {
		console_free(v, c);
		return ret;
	}
	/*
	 * Linux's hvc0 spins, interrupts off, until the device has taken each buffer: its transmit queue is served on
	 * the notifying vCPU's MMIO exit, so the buffer is done before the guest runs again, instead of waiting for
	 * this device's thread to be woken and scheduled.
	 */
	vdev_serve_on_exit(v, VIRTIO_CONSOLE_TX);
	console_set_space_hook(&vm->console, console_kick, v);
	*state = v;
	return 0;
}

static void console_teardown(struct vm *vm, void *state)
{
	console_set_space_hook(&vm->console, NULL, NULL);
	vm_console_frontend_remove(vm, state);
	console_free(state, vcon_of(state));
}

static struct device_type virtio_console_device = {
	.name = "virtio-console",
	.setup = console_setup,
	.teardown = console_teardown,
	.save = vdev_save,
	.load = vdev_load,
	.clone = vdev_clone,
	.quiesce = vdev_quiesce,
	.resume = vdev_resume,
};
DEVICE_REGISTER(virtio_console_device, DEV_PRIO_VIRTIO)
