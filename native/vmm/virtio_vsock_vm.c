/*
 * virtio-vsock in a VM (virtio_vsock.c has the device and its Unix-socket multiplexer): slot 2, when the
 * configuration gives a socket path. The state is the guest's CID; a restored or forked VM tells the guest its
 * connections were reset, since they belong to the VM that was captured.
 */
#include "device.h"
#include "error.h"
#include "internal.h"
#include "le_codec.h"
#include "snapfile.h"
#include "virtio_dev.h"
#include "virtio_vsock.h"

#include <errno.h>
#include <stdlib.h>

struct vsock_dev {
	struct virtio_vsock vsock;
	int ready;		/* virtio_vsock_init succeeded: virtio_vsock_exit before the transport goes */
};

static struct vsock_dev *vsock_of(void *state)
{
	return ((struct vdev *)state)->dev;
}

static void vsock_free(struct vdev *v, struct vsock_dev *d)
{
	if (d->ready)
		virtio_vsock_exit(&d->vsock);	/* its thread takes the transport's lock: stop it first */
	if (v)
		vdev_free(v);
	free(d);
}

static int vsock_setup(struct vm *vm, void **state, struct vm_error *err)
{
	const char *path = vm_resource(vm, "virtio-vsock");	/* the host side's socket */
	struct vsock_dev *d;
	struct vdev *v;
	int ret;

	if (!vdev_wanted(vm, "virtio-vsock", !!path))
		return 1;
	if (!path)
		return vm_error_set(err, EINVAL, "the VM had a vsock device: restoring it needs a \"virtio-vsock\" "
				    "resource, the path of its socket");
	d = calloc(1, sizeof(*d));
	if (!d)
		return vm_error_set(err, ENOMEM, "out of memory for the virtio-vsock");
	ret = vdev_create(vm, &virtio_vsock_ops, VIRTIO_SLOT_VSOCK, &d->vsock, &v, err);
	if (ret < 0) {
		free(d);
		return ret;
	}
	v->dev = d;
	/* A restore's CID comes from the snapshot (vsock_load); until then the configured one stands in. */
	ret = virtio_vsock_init(&d->vsock, vm->restoring ? 3 : vm->devcfg.vsock_cid, path, err);
	if (ret == 0) {
		d->ready = 1;
		ret = virtio_vsock_start(&d->vsock, &v->t, err);
	}
	if (ret < 0) {
		vsock_free(v, d);
		return ret;
	}
	*state = v;
	return 0;
}

static void vsock_teardown(struct vm *vm, void *state)
{
	(void)vm;
	vsock_free(state, vsock_of(state));
}

static int vsock_save(struct vm *vm, void *state, struct snap_writer *w)
{
	struct virtio_vsock_state s;
	uint8_t buf[VIRTIO_VSOCK_STATE_LEN];
	struct le_writer out;

	(void)vm;
	vdev_get_state(state, &s.dev);
	s.guest_cid = vsock_of(state)->vsock.guest_cid;
	le_writer_init(&out, buf, sizeof(buf));
	virtio_vsock_state_encode(&s, &out);
	snap_append(w, buf, out.len);
	return 0;
}

static int vsock_load(struct vm *vm, void *state, const uint8_t *data, size_t len, struct vm_error *err)
{
	struct vdev *v = state;
	struct virtio_vsock_state s;
	const char *bad = virtio_vsock_state_decode(data, len, &s);

	(void)vm;
	if (bad)
		return vm_error_set(err, EINVAL, "%s", bad);
	pthread_mutex_lock(&v->t.lock);
	vsock_of(state)->vsock.guest_cid = s.guest_cid;
	pthread_mutex_unlock(&v->t.lock);
	return vdev_set_state(v, &s.dev, err);
}

/* A restored or forked VM: the connections the guest had belong to the VM that was captured. */
static void vsock_clone(struct vm *vm, void *state)
{
	vdev_clone(vm, state);
	virtio_vsock_transport_reset(&vsock_of(state)->vsock);
}

static struct device_type virtio_vsock_device = {
	.name = "virtio-vsock",
	.setup = vsock_setup,
	.teardown = vsock_teardown,
	.save = vsock_save,
	.load = vsock_load,
	.clone = vsock_clone,
	.quiesce = vdev_quiesce,	/* the transport's lock held: no packet moves while the state is captured */
	.resume = vdev_resume,
};
DEVICE_REGISTER(virtio_vsock_device, DEV_PRIO_VIRTIO)
