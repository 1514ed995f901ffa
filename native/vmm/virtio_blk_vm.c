/*
 * virtio-blk in a VM (virtio_blk.c has the device): the root disk in slot 0, over the disk chain the configuration
 * names, and up to VM_MAX_VOLUMES volumes in slots 5 to 8 (docs/disks.md, "Volumes"), each a device of its own
 * ("virtio-blk-N": its own section, its own resource, its own chain). A checkpoint freezes every writable disk's top
 * layer and the VM goes on with a new one over it (docs/disks.md); the state records the frozen layer, which a
 * restore opens (with a new writable layer over it when the VM had one).
 */
#include "device.h"
#include "disk.h"
#include "error.h"
#include "internal.h"
#include "le_codec.h"
#include "snapfile.h"
#include "virtio_dev.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Which disk a device type is: 0 the root disk, n volume n. */
struct blk_unit {
	int index;
	const char *name;	/* the device's name: its section and its resource */
	const char *id;		/* its GET_ID serial */
	int slot;
};

static const struct blk_unit blk_units[1 + VM_MAX_VOLUMES] = {
	{ 0, "virtio-blk", "smol-disk", VIRTIO_SLOT_BLK },
	{ 1, "virtio-blk-1", "smol-vol1", VIRTIO_SLOT_VOLUME(1) },
	{ 2, "virtio-blk-2", "smol-vol2", VIRTIO_SLOT_VOLUME(2) },
	{ 3, "virtio-blk-3", "smol-vol3", VIRTIO_SLOT_VOLUME(3) },
	{ 4, "virtio-blk-4", "smol-vol4", VIRTIO_SLOT_VOLUME(4) },
};

struct blk_dev {
	struct virtio_blk blk;
	const struct blk_unit *unit;
	int writable;		/* the disk has a writable top layer (a checkpoint freezes it) */
};

/* The base image the configuration gives the unit, or NULL. */
static const char *unit_image(const struct vm *vm, const struct blk_unit *u)
{
	return u->index ? vm->devcfg.volumes[u->index - 1] : vm->devcfg.disk;
}

static struct blk_dev *blk_of(void *state)
{
	return ((struct vdev *)state)->dev;
}

static int blk_open(struct vm *vm, struct blk_dev *b, struct vm_error *err)
{
	const char *image = unit_image(vm, b->unit);
	const char *top = vm_resource(vm, b->unit->name);	/* the writable layer; none: read-only */
	char base[PATH_MAX];
	int ret;

	if (!top)
		return disk_open(image, 1, &b->blk.disk, err);
	if (!realpath(image, base))
		return vm_error_set(err, errno, "disk %s: %s", image, strerror(errno));
	if (access(top, F_OK) < 0) {
		ret = disk_layer_create(top, base, err);
		if (ret < 0)
			return ret;
	}
	ret = disk_open(top, 0, &b->blk.disk, err);
	if (ret < 0)
		return ret;
	if (b->blk.disk->read_only)
		return vm_error_set(err, EINVAL, "disk layer %s is frozen (a snapshot uses it): give a new top layer",
				    top);
	if (strcmp(b->blk.disk->base_path, base))
		return vm_error_set(err, EINVAL, "disk layer %s sits on %s, not on %s", top,
				    b->blk.disk->base_path, base);
	return 0;
}

static void blk_free(struct vdev *v, struct blk_dev *b)
{
	if (v)
		vdev_free(v);	/* its thread is stopped before the disk goes */
	disk_close(b->blk.disk);
	free(b);
}

static int blk_setup_unit(struct vm *vm, const struct blk_unit *u, void **state, struct vm_error *err)
{
	struct blk_dev *b;
	struct vdev *v;
	int ret;

	if (!vdev_wanted(vm, u->name, !!unit_image(vm, u)))
		return 1;
	b = calloc(1, sizeof(*b));
	if (!b)
		return vm_error_set(err, ENOMEM, "out of memory for the %s", u->name);
	b->unit = u;
	b->blk.id = u->id;
	/* A restore opens the disk the snapshot names, in blk_load; no request is served before. */
	if (!vm->restoring) {
		ret = blk_open(vm, b, err);
		if (ret < 0) {
			blk_free(NULL, b);
			return ret;
		}
		b->writable = !b->blk.disk->read_only;
	}
	ret = vdev_create(vm, &virtio_blk_ops, u->slot, &b->blk, &v, err);
	if (ret < 0) {
		blk_free(NULL, b);
		return ret;
	}
	v->dev = b;
	*state = v;
	return 0;
}

static void blk_teardown(struct vm *vm, void *state)
{
	(void)vm;
	blk_free(state, blk_of(state));
}

/* With the device quiesced: a writable disk's top layer is frozen and the VM goes on with a new one over it. */
static int blk_quiesce(struct vm *vm, void *state, struct vm_error *err)
{
	struct vdev *v = state;
	struct blk_dev *b = blk_of(state);
	const char *next = vm_next_resource(vm, b->unit->name);	/* the layer it goes on with */
	int ret = 0;

	pthread_mutex_lock(&v->t.lock);
	if (!b->writable)
		return 0;
	if (!next)
		ret = vm_error_set(err, EINVAL, "the VM has a writable %s: a checkpoint needs a \"%s\" "
				   "resource, the path of the disk layer it goes on with",
				   b->unit->index ? "volume" : "disk", b->unit->name);
	else
		ret = disk_freeze_and_stack(b->blk.disk, next, err);
	if (ret < 0)
		pthread_mutex_unlock(&v->t.lock);
	return ret;
}

static int blk_save(struct vm *vm, void *state, struct snap_writer *w)
{
	struct blk_dev *b = blk_of(state);
	struct disk *d = b->blk.disk;
	/* A writable disk was just frozen: its frozen layer is the one below the new top. */
	const char *path = b->writable ? d->top->below->path : disk_top_path(d);
	static __thread struct virtio_blk_state s;	/* 4 KiB of path */
	static __thread uint8_t buf[VIRTIO_BLK_STATE_MAX];
	struct le_writer out;

	(void)vm;
	if (strlen(path) > VIRTIO_BLK_PATH_MAX)
		return -ENAMETOOLONG;
	vdev_get_state(state, &s.dev);
	s.writable = (uint8_t)b->writable;
	s.disk_size = d->size;
	if (b->writable)
		memcpy(s.layer_id, d->top->below->id, DISK_ID_SIZE);
	else
		disk_top_id(d, s.layer_id);
	strcpy(s.path, path);
	le_writer_init(&out, buf, sizeof(buf));
	virtio_blk_state_encode(&s, &out);
	snap_append(w, buf, out.len);
	return 0;
}

static int blk_load(struct vm *vm, void *state, const uint8_t *data, size_t len, struct vm_error *err)
{
	struct blk_dev *b = blk_of(state);
	static __thread struct virtio_blk_state s;
	uint8_t id[DISK_ID_SIZE];
	const char *bad = virtio_blk_state_decode(data, len, &s);
	int ret;

	if (bad)
		return vm_error_set(err, EINVAL, "%s", bad);
	ret = disk_open(s.path, 1, &b->blk.disk, err);
	if (ret < 0)
		return ret;
	disk_top_id(b->blk.disk, id);
	if (memcmp(id, s.layer_id, DISK_ID_SIZE) || b->blk.disk->size != s.disk_size)
		return vm_error_set(err, EINVAL, "disk layer %s is not the one the snapshot froze (replaced?)", s.path);
	if (s.writable) {
		const char *top = vm_resource(vm, b->unit->name);

		if (!top)
			return vm_error_set(err, EINVAL, "the VM had a writable %s: restoring it needs a "
					    "\"%s\" resource, the path of its new disk layer",
					    b->unit->index ? "volume" : "disk", b->unit->name);
		disk_close(b->blk.disk);
		b->blk.disk = NULL;
		ret = disk_layer_create(top, s.path, err);
		if (!ret)
			ret = disk_open(top, 0, &b->blk.disk, err);
		if (ret < 0)
			return ret;
		b->writable = 1;
	}
	return vdev_set_state(state, &s.dev, err);
}

/* One device type per disk, so that each has its own section and resource (the device types' names). */
static int blk_setup_0(struct vm *vm, void **state, struct vm_error *err)
{
	return blk_setup_unit(vm, &blk_units[0], state, err);
}

static int blk_setup_1(struct vm *vm, void **state, struct vm_error *err)
{
	return blk_setup_unit(vm, &blk_units[1], state, err);
}

static int blk_setup_2(struct vm *vm, void **state, struct vm_error *err)
{
	return blk_setup_unit(vm, &blk_units[2], state, err);
}

static int blk_setup_3(struct vm *vm, void **state, struct vm_error *err)
{
	return blk_setup_unit(vm, &blk_units[3], state, err);
}

static int blk_setup_4(struct vm *vm, void **state, struct vm_error *err)
{
	return blk_setup_unit(vm, &blk_units[4], state, err);
}

static struct device_type virtio_blk_device = {
	.name = "virtio-blk",
	.setup = blk_setup_0,
	.teardown = blk_teardown,
	.save = blk_save,
	.load = blk_load,
	.clone = vdev_clone,
	.quiesce = blk_quiesce,
	.resume = vdev_resume,
};
DEVICE_REGISTER(virtio_blk_device, DEV_PRIO_VIRTIO)

static struct device_type virtio_blk_1_device = {
	.name = "virtio-blk-1",
	.setup = blk_setup_1,
	.teardown = blk_teardown,
	.save = blk_save,
	.load = blk_load,
	.clone = vdev_clone,
	.quiesce = blk_quiesce,
	.resume = vdev_resume,
};
DEVICE_REGISTER(virtio_blk_1_device, DEV_PRIO_VIRTIO)

static struct device_type virtio_blk_2_device = {
	.name = "virtio-blk-2",
	.setup = blk_setup_2,
	.teardown = blk_teardown,
	.save = blk_save,
	.load = blk_load,
	.clone = vdev_clone,
	.quiesce = blk_quiesce,
	.resume = vdev_resume,
};
DEVICE_REGISTER(virtio_blk_2_device, DEV_PRIO_VIRTIO)

static struct device_type virtio_blk_3_device = {
	.name = "virtio-blk-3",
	.setup = blk_setup_3,
	.teardown = blk_teardown,
	.save = blk_save,
	.load = blk_load,
	.clone = vdev_clone,
	.quiesce = blk_quiesce,
	.resume = vdev_resume,
};
DEVICE_REGISTER(virtio_blk_3_device, DEV_PRIO_VIRTIO)

static struct device_type virtio_blk_4_device = {
	.name = "virtio-blk-4",
	.setup = blk_setup_4,
	.teardown = blk_teardown,
	.save = blk_save,
	.load = blk_load,
	.clone = vdev_clone,
	.quiesce = blk_quiesce,
	.resume = vdev_resume,
};
DEVICE_REGISTER(virtio_blk_4_device, DEV_PRIO_VIRTIO)

const char *vm_snapshot_disk_section(const uint8_t *data, size_t len, char *out, size_t out_len)
{
	static __thread struct virtio_blk_state s;

	if (virtio_blk_state_decode(data, len, &s) || strlen(s.path) >= out_len)
		return NULL;
	strcpy(out, s.path);
	return out;
}
