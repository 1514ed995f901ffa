/*
 * virtio-rng in a VM (virtio_rng.c has the device): a virtio-mmio device in slot 1 when the configuration asks
 * for it. Its state is the virtio device's alone.
 */
#include "device.h"
#include "internal.h"
#include "virtio_dev.h"

static int rng_setup(struct vm *vm, void **state, struct vm_error *err)
{
	struct vdev *v;
	int ret;

	if (!vdev_wanted(vm, "virtio-rng", vm->devcfg.rng))
		return 1;
	ret = vdev_create(vm, &virtio_rng_ops, VIRTIO_SLOT_RNG, NULL, &v, err);
	if (ret < 0)
		return ret;
	*state = v;
	return 0;
}

static void rng_teardown(struct vm *vm, void *state)
{
	(void)vm;
	vdev_free(state);
}

static struct device_type virtio_rng_device = {
	.name = "virtio-rng",
	.setup = rng_setup,
	.teardown = rng_teardown,
	.save = vdev_save,
	.load = vdev_load,
	.clone = vdev_clone,
	.quiesce = vdev_quiesce,
	.resume = vdev_resume,
};
DEVICE_REGISTER(virtio_rng_device, DEV_PRIO_VIRTIO)
