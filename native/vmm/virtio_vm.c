/*
 * virtio-mmio devices in a VM (docs/vmm.md, "Virtio"): each device has a fixed slot, hence a fixed 4 KiB window in
 * the MMIO gap and a fixed GSI, so a snapshot restores into the same places the guest found at boot. QueueNotify is
 * a KVM ioeventfd per queue (datamatch = queue index) and the interrupt a KVM irqfd, so neither exits to the VMM on
 * the vCPU thread; the device's own thread serves the queues. A vCPU touching the other registers exits to
 * virtio_mmio_access. When KVM refuses an ioeventfd or irqfd the same paths run on an MMIO exit and KVM_IRQ_LINE.
 *
 * Snapshots: the device section is a small header (slot, window, GSI), the transport's registers and queues
 * (virtio_mmio_save) and the device's own part: nothing for virtio-rng; for virtio-blk the disk layer the
 * checkpoint froze (its path and id) and whether the restored VM gets a writable layer over it; for virtio-vsock the
 * guest's CID (its connections are not saved: a restored or forked VM tells the guest they were reset).
 */
#define _GNU_SOURCE
#include "device.h"
#include "disk.h"
#include "error.h"
#include "internal.h"
#include "snapfile.h"
#include "virtio.h"
#include "virtio_vsock.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define VIRTIO_MMIO_BASE 0xc0001000ULL
#define VIRTIO_MMIO_LEN 0x1000
#define VIRTIO_GSI_BASE 5
#define SLOT_BLK 0
#define SLOT_RNG 1
#define SLOT_VSOCK 2
#define SLOT_CONSOLE 3
#define KICK UINT32_C(0x10000)	/* epoll data of a device's kick_fd: the host side has work for every queue */
#define STATE_VERSION 1
#define HEAD_LEN 16		/* u8 version, u8 slot, u16 0, u32 GSI, u64 base */
#define BLK_PART_FIXED 36	/* u8 writable, u8[7] 0, u64 disk size, 16-byte layer id, u16 path length, u16 0 */

struct vdev {
	struct virtio_mmio t;
	struct vm *vm;
	int slot;
	uint64_t base;
	uint32_t gsi;
	int irqfd;
	int qfd[VIRTIO_MAX_QUEUES];
	int stop_fd, epoll_fd;
	pthread_t thread;
	int thread_started;
	struct virtio_blk blk;
	int blk_writable;	/* the disk has a writable top layer (a checkpoint freezes it) */
	struct virtio_vsock vsock;
	int vsock_ready;	/* virtio_vsock_init succeeded: virtio_vsock_exit before the transport goes */
	struct virtio_console vcon;
	int kick_fd;		/* virtio-console: the console's reader made room, or input arrived */
};

static void vdev_raise_irq(void *opaque)
{
	struct vdev *v = opaque;
	uint64_t one = 1;

	if (v->irqfd >= 0 && write(v->irqfd, &one, sizeof(one)) == sizeof(one))
		return;
	vm_irq_line(v->vm, v->gsi, 1);	/* an edge, as the DSDT says */
	vm_irq_line(v->vm, v->gsi, 0);
}

static void vdev_log(void *opaque, const char *msg)
{
	(void)opaque;
	fprintf(stderr, "smol-vmm: %s\n", msg);
}

static void vdev_mmio(struct vm *vm, uint64_t offset, uint8_t *data, uint32_t len, int is_write, void *opaque)
{
	(void)vm;
	virtio_mmio_access(&((struct vdev *)opaque)->t, offset, data, len, is_write);
}

/* The device's thread: serves a queue when its ioeventfd fires, until stop_fd does. */
static void *vdev_thread(void *arg)
{
	struct vdev *v = arg;

	for (;;) {
		struct epoll_event ev[VIRTIO_MAX_QUEUES + 1];
		int n = epoll_wait(v->epoll_fd, ev, VIRTIO_MAX_QUEUES + 1, -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return NULL;
		for (int i = 0; i < n; i++) {
			uint64_t count;
			int q = (int)ev[i].data.u32;

			if (ev[i].data.u32 == KICK) {
				if (read(v->kick_fd, &count, sizeof(count)) == sizeof(count))
					for (uint32_t k = 0; k < v->t.ops->nr_queues; k++)
						virtio_mmio_notify(&v->t, k);
				continue;
			}
			if (q < 0 || q >= VIRTIO_MAX_QUEUES)
				return NULL;	/* stop_fd */
			if (read(v->qfd[q], &count, sizeof(count)) == sizeof(count))
				virtio_mmio_notify(&v->t, (uint32_t)q);
		}
	}
}

static int ioeventfd(struct vdev *v, int q, int assign)
{
	struct kvm_ioeventfd io = {
		.datamatch = (uint64_t)q,
		.addr = v->base + VIRTIO_MMIO_QUEUE_NOTIFY,
		.len = 4,
		.fd = v->qfd[q],
		.flags = KVM_IOEVENTFD_FLAG_DATAMATCH | (assign ? 0 : KVM_IOEVENTFD_FLAG_DEASSIGN),
	};

	return ioctl(v->vm->vm_fd, KVM_IOEVENTFD, &io) < 0 ? -errno : 0;
}

static void vdev_free(struct vdev *v)
{
	uint64_t one = 1;

	if (v->vsock_ready)
		virtio_vsock_exit(&v->vsock);	/* its thread takes the transport's lock: stop it first */
	if (v->thread_started) {
		if (write(v->stop_fd, &one, sizeof(one)) != sizeof(one))
			pthread_cancel(v->thread);
		pthread_join(v->thread, NULL);
	}
	for (int q = 0; q < VIRTIO_MAX_QUEUES; q++)
		if (v->qfd[q] >= 0) {
			ioeventfd(v, q, 0);
			close(v->qfd[q]);
		}
	if (v->irqfd >= 0) {
		struct kvm_irqfd irq = { .fd = (uint32_t)v->irqfd, .gsi = v->gsi, .flags = KVM_IRQFD_FLAG_DEASSIGN };

		ioctl(v->vm->vm_fd, KVM_IRQFD, &irq);
		close(v->irqfd);
	}
	if (v->stop_fd >= 0)
		close(v->stop_fd);
	if (v->kick_fd >= 0)
		close(v->kick_fd);
	free(v->vcon.buf);
	if (v->epoll_fd >= 0)
		close(v->epoll_fd);
	disk_close(v->blk.disk);
	virtio_mmio_exit(&v->t);
	free(v);
}

/* A device in `slot`: its window on the MMIO bus, its irqfd, an ioeventfd per queue and its thread. */
static int vdev_create(struct vm *vm, const struct virtio_dev_ops *ops, int slot, struct vdev **out,
		       struct vm_error *err)
{
	struct vdev *v = calloc(1, sizeof(*v));
	int ret, e;

	if (!v)
		return vm_error_set(err, ENOMEM, "out of memory for a virtio device");
	virtio_mmio_init(&v->t, ops, NULL, &vm->mem);
	/* The device's own state (the rng has none); set before the device thread exists. */
	v->t.dev = slot == SLOT_VSOCK ? (void *)&v->vsock : slot == SLOT_CONSOLE ? (void *)&v->vcon : (void *)&v->blk;
	v->t.raise_irq = vdev_raise_irq;
	v->t.irq_opaque = v;
	v->t.log = vdev_log;
	v->vm = vm;
	v->slot = slot;
	v->base = VIRTIO_MMIO_BASE + (uint64_t)slot * VIRTIO_MMIO_LEN;
	v->gsi = VIRTIO_GSI_BASE + (uint32_t)slot;
	v->irqfd = v->stop_fd = v->epoll_fd = v->kick_fd = -1;
	for (int q = 0; q < VIRTIO_MAX_QUEUES; q++)
		v->qfd[q] = -1;
	if (vm->nr_virtio == BOOT_MAX_VIRTIO) {
		free(v);
		return vm_error_set(err, ENOSPC, "too many virtio devices");
	}
	ret = io_bus_register(&vm->mmio, v->base, VIRTIO_MMIO_LEN, vdev_mmio, v);
	if (ret < 0) {
		uint64_t base = v->base;

		free(v);
		return vm_error_set(err, -ret, "cannot place the %s at 0x%llx", ops->name, (unsigned long long)base);
	}
	v->stop_fd = eventfd(0, EFD_CLOEXEC);
	v->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (v->stop_fd < 0 || v->epoll_fd < 0)
		goto fail_errno;
	{
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = UINT32_MAX };

		if (epoll_ctl(v->epoll_fd, EPOLL_CTL_ADD, v->stop_fd, &ev) < 0)
			goto fail_errno;
	}
	v->irqfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (v->irqfd >= 0) {
		struct kvm_irqfd irq = { .fd = (uint32_t)v->irqfd, .gsi = v->gsi };

		if (ioctl(vm->vm_fd, KVM_IRQFD, &irq) < 0) {
			close(v->irqfd);	/* no irqfd: raise the line with KVM_IRQ_LINE instead */
			v->irqfd = -1;
		}
	}
	for (int q = 0; q < ops->nr_queues; q++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)q };

		v->qfd[q] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (v->qfd[q] < 0)
			goto fail_errno;
		if (ioeventfd(v, q, 1) < 0 || epoll_ctl(v->epoll_fd, EPOLL_CTL_ADD, v->qfd[q], &ev) < 0) {
			close(v->qfd[q]);	/* QueueNotify then exits to vdev_mmio, which serves the queue */
			v->qfd[q] = -1;
		}
	}
	e = pthread_create(&v->thread, NULL, vdev_thread, v);
	if (e) {
		errno = e;
		goto fail_errno;
	}
	v->thread_started = 1;
	vm->virtio[vm->nr_virtio++] = (struct boot_virtio){ .base = v->base, .len = VIRTIO_MMIO_LEN, .gsi = v->gsi };
	*out = v;
	return 0;
fail_errno:
	e = errno;
	vdev_free(v);
	return vm_error_set(err, e, "cannot set up the %s: %s", ops->name, strerror(e));
}

/* During a restore: the snapshot's section for device `name`, or NULL. */
static const struct snap_section *restoring_section(struct vm *vm, const char *name)
{
	size_t len = strlen(name);

	for (uint32_t i = 0; vm->restoring && i < vm->restoring->nr_sections; i++) {
		const struct snap_section *s = &vm->restoring->sections[i];

		if (s->kind == SNAP_DEVICE && s->len > len && s->data[0] == len && !memcmp(s->data + 1, name, len))
			return s;
	}
	return NULL;
}

static int vdev_save_common(struct vdev *v, struct snap_writer *w)
{
	uint8_t head[HEAD_LEN] = { STATE_VERSION, (uint8_t)v->slot }, state[VIRTIO_MMIO_STATE_LEN];

	memcpy(head + 4, &v->gsi, 4);
	memcpy(head + 8, &v->base, 8);
	snap_append(w, head, sizeof(head));
	virtio_mmio_save(&v->t, state);
	snap_append(w, state, sizeof(state));
	return 0;
}

/* Checks the header and returns where the device's own part starts, or -1 with err set. */
static long vdev_load_head(struct vdev *v, const uint8_t *data, size_t len, struct vm_error *err)
{
	uint32_t gsi;
	uint64_t base;

	if (len < HEAD_LEN + VIRTIO_MMIO_STATE_LEN)
		return vm_error_set(err, EINVAL, "%zu bytes is too short", len);
	memcpy(&gsi, data + 4, 4);
	memcpy(&base, data + 8, 8);
	if (data[0] != STATE_VERSION)
		return vm_error_set(err, EINVAL, "unknown version %u", data[0]);
	if (data[1] != v->slot || data[2] || data[3] || gsi != v->gsi || base != v->base)
		return vm_error_set(err, EINVAL, "the guest found the device at 0x%llx on GSI %u; this VMM puts it at "
				    "0x%llx on GSI %u", (unsigned long long)base, gsi, (unsigned long long)v->base, v->gsi);
	return HEAD_LEN;
}

static int vdev_load_transport(struct vdev *v, const uint8_t *data, struct vm_error *err)
{
	const char *bad = virtio_mmio_load(&v->t, data + HEAD_LEN, VIRTIO_MMIO_STATE_LEN);

	return bad ? vm_error_set(err, EINVAL, "%s", bad) : 0;
}

/* After a restore or fork, before any vCPU runs: interrupts that were pending, and requests never served. */
static void vdev_clone(struct vm *vm, void *state)
{
	struct vdev *v = state;

	(void)vm;
	pthread_mutex_lock(&v->t.lock);
	if (v->t.int_status)
		vdev_raise_irq(v);
	virtio_mmio_kick_all_locked(&v->t);	/* a notification the snapshot caught in an eventfd is lost */
	pthread_mutex_unlock(&v->t.lock);
}

static void vdev_resume(struct vm *vm, void *state)
{
	(void)vm;
	pthread_mutex_unlock(&((struct vdev *)state)->t.lock);
}

static void vdev_teardown(struct vm *vm, void *state)
{
	(void)vm;
	vdev_free(state);
}

/* ---- virtio-rng ---- */

static int rng_setup(struct vm *vm, void **state, struct vm_error *err)
{
	struct vdev *v;
	int ret;

	if (vm->restoring ? !restoring_section(vm, "virtio-rng") : !vm->devcfg.rng)
		return 1;
	ret = vdev_create(vm, &virtio_rng_ops, SLOT_RNG, &v, err);
	if (ret < 0)
		return ret;
	*state = v;
	return 0;
}

/* Devices whose section is the transport alone: virtio-rng and virtio-console. */
static int transport_save(struct vm *vm, void *state, struct snap_writer *w)
{
	(void)vm;
	return vdev_save_common(state, w);
}

static int transport_load(struct vm *vm, void *state, const uint8_t *data, size_t len, struct vm_error *err)
{
	long at = vdev_load_head(state, data, len, err);

	(void)vm;
	if (at < 0)
		return (int)at;
	if ((size_t)at + VIRTIO_MMIO_STATE_LEN != len)
		return vm_error_set(err, EINVAL, "%zu bytes, not %zu", len, (size_t)at + VIRTIO_MMIO_STATE_LEN);
	return vdev_load_transport(state, data, err);
}

static int vdev_quiesce(struct vm *vm, void *state, struct vm_error *err)
{
	(void)vm;
	(void)err;
	pthread_mutex_lock(&((struct vdev *)state)->t.lock);
	return 0;
}

static struct device_type virtio_rng_device = {
	.name = "virtio-rng",
	.setup = rng_setup,
	.teardown = vdev_teardown,
	.save = transport_save,
	.load = transport_load,
	.clone = vdev_clone,
	.quiesce = vdev_quiesce,
	.resume = vdev_resume,
};

/* ---- virtio-blk ---- */

static int blk_open(struct vm *vm, struct vdev *v, struct vm_error *err)
{
	const struct vm_device_config *c = &vm->devcfg;
	char base[PATH_MAX];
	int ret;

	if (!c->disk_top)
		return disk_open(c->disk, 1, &v->blk.disk, err);
	if (!realpath(c->disk, base))
		return vm_error_set(err, errno, "disk %s: %s", c->disk, strerror(errno));
	if (access(c->disk_top, F_OK) < 0) {
		ret = disk_layer_create(c->disk_top, base, err);
		if (ret < 0)
			return ret;
	}
	ret = disk_open(c->disk_top, 0, &v->blk.disk, err);
	if (ret < 0)
		return ret;
	if (v->blk.disk->read_only)
		return vm_error_set(err, EINVAL, "disk layer %s is frozen (a snapshot uses it): give a new top layer",
				    c->disk_top);
	if (strcmp(v->blk.disk->base_path, base))
		return vm_error_set(err, EINVAL, "disk layer %s sits on %s, not on %s", c->disk_top,
				    v->blk.disk->base_path, base);
	return 0;
}

static int blk_setup(struct vm *vm, void **state, struct vm_error *err)
{
	struct vdev *v;
	int ret;

	if (vm->restoring ? !restoring_section(vm, "virtio-blk") : !vm->devcfg.disk)
		return 1;
	ret = vdev_create(vm, &virtio_blk_ops, SLOT_BLK, &v, err);
	if (ret < 0)
		return ret;
	if (!vm->restoring) {	/* a restore opens the disk the snapshot names, in blk_load */
		ret = blk_open(vm, v, err);
		if (ret < 0) {
			vdev_free(v);
			return ret;
		}
		v->blk_writable = !v->blk.disk->read_only;
	}
	*state = v;
	return 0;
}

/* With the device quiesced: a writable disk's top layer is frozen and the VM goes on with a new one over it. */
static int blk_quiesce(struct vm *vm, void *state, struct vm_error *err)
{
	struct vdev *v = state;
	int ret = 0;

	pthread_mutex_lock(&v->t.lock);
	if (!v->blk_writable)
		return 0;
	if (!vm->devcfg.next_disk_top)
		ret = vm_error_set(err, EINVAL, "the VM has a writable disk: a checkpoint needs a path for the disk "
				   "layer it goes on with (diskTop)");
	else
		ret = disk_freeze_and_stack(v->blk.disk, vm->devcfg.next_disk_top, err);
	if (ret < 0)
		pthread_mutex_unlock(&v->t.lock);
	return ret;
}

static int blk_save(struct vm *vm, void *state, struct snap_writer *w)
{
	struct vdev *v = state;
	struct disk *d = v->blk.disk;
	/* A writable disk was just frozen: its frozen layer is the one below the new top. */
	const char *path = v->blk_writable ? d->top->below->path : disk_top_path(d);
	uint8_t part[BLK_PART_FIXED] = { (uint8_t)v->blk_writable };
	uint16_t len = (uint16_t)strlen(path);

	(void)vm;
	if (strlen(path) > DISK_PATH_MAX)
		return -ENAMETOOLONG;
	memcpy(part + 8, &d->size, 8);
	if (v->blk_writable)
		memcpy(part + 16, d->top->below->id, DISK_ID_SIZE);
	else
		disk_top_id(d, part + 16);
	memcpy(part + 32, &len, 2);
	vdev_save_common(v, w);
	snap_append(w, part, sizeof(part));
	snap_append(w, path, len);
	return 0;
}

static int blk_load(struct vm *vm, void *state, const uint8_t *data, size_t len, struct vm_error *err)
{
	struct vdev *v = state;
	const uint8_t *part;
	uint8_t want_id[DISK_ID_SIZE], id[DISK_ID_SIZE];
	char path[DISK_PATH_MAX + 1];
	uint64_t size;
	uint16_t path_len;
	long at = vdev_load_head(v, data, len, err);
	int ret;

	if (at < 0)
		return (int)at;
	if (len < (size_t)at + VIRTIO_MMIO_STATE_LEN + BLK_PART_FIXED)
		return vm_error_set(err, EINVAL, "%zu bytes is too short", len);
	part = data + at + VIRTIO_MMIO_STATE_LEN;
	memcpy(&size, part + 8, 8);
	memcpy(want_id, part + 16, DISK_ID_SIZE);
	memcpy(&path_len, part + 32, 2);
	if (part[0] > 1 || part[1] || part[2] || part[3] || part[4] || part[5] || part[6] || part[7] || part[34] ||
	    part[35])
		return vm_error_set(err, EINVAL, "the disk's flags are out of range");
	if (!path_len || path_len > DISK_PATH_MAX ||
	    len != (size_t)at + VIRTIO_MMIO_STATE_LEN + BLK_PART_FIXED + path_len)
		return vm_error_set(err, EINVAL, "the disk's path length does not match the section");
	memcpy(path, part + BLK_PART_FIXED, path_len);
	path[path_len] = 0;
	if (strlen(path) != path_len)
		return vm_error_set(err, EINVAL, "the disk's path has a NUL in it");
	ret = disk_open(path, 1, &v->blk.disk, err);
	if (ret < 0)
		return ret;
	disk_top_id(v->blk.disk, id);
	if (memcmp(id, want_id, DISK_ID_SIZE) || v->blk.disk->size != size)
		return vm_error_set(err, EINVAL, "disk layer %s is not the one the snapshot froze (replaced?)", path);
	if (part[0]) {
		if (!vm->devcfg.disk_top)
			return vm_error_set(err, EINVAL, "the VM had a writable disk: restoring it needs a path for its "
					    "new disk layer (diskTop)");
		disk_close(v->blk.disk);
		v->blk.disk = NULL;
		ret = disk_layer_create(vm->devcfg.disk_top, path, err);
		if (!ret)
			ret = disk_open(vm->devcfg.disk_top, 0, &v->blk.disk, err);
		if (ret < 0)
			return ret;
		v->blk_writable = 1;
	}
	return vdev_load_transport(v, data, err);
}

static struct device_type virtio_blk_device = {
	.name = "virtio-blk",
	.setup = blk_setup,
	.teardown = vdev_teardown,
	.save = blk_save,
	.load = blk_load,
	.clone = vdev_clone,
	.quiesce = blk_quiesce,
	.resume = vdev_resume,
};

/* ---- virtio-vsock ---- */

#define VSOCK_PART_LEN 8	/* u64 guest CID */

static int vsock_setup(struct vm *vm, void **state, struct vm_error *err)
{
	struct vdev *v;
	int ret;

	if (vm->restoring ? !restoring_section(vm, "virtio-vsock") : !vm->devcfg.vsock_path)
		return 1;
	if (!vm->devcfg.vsock_path)
		return vm_error_set(err, EINVAL, "the VM had a vsock device: restoring it needs a path for its socket "
				    "(vsockPath)");
	ret = vdev_create(vm, &virtio_vsock_ops, SLOT_VSOCK, &v, err);
	if (ret < 0)
		return ret;
	/* A restore's CID comes from the snapshot (vsock_load); until then the configured one stands in. */
	ret = virtio_vsock_init(&v->vsock, vm->restoring ? 3 : vm->devcfg.vsock_cid, vm->devcfg.vsock_path, err);
	if (ret < 0) {
		vdev_free(v);
		return ret;
	}
	v->vsock_ready = 1;
	ret = virtio_vsock_start(&v->vsock, &v->t, err);
	if (ret < 0) {
		vdev_free(v);
		return ret;
	}
	*state = v;
	return 0;
}

static int vsock_save(struct vm *vm, void *state, struct snap_writer *w)
{
	struct vdev *v = state;

	(void)vm;
	vdev_save_common(v, w);
	snap_append(w, &v->vsock.guest_cid, VSOCK_PART_LEN);
	return 0;
}

static int vsock_load(struct vm *vm, void *state, const uint8_t *data, size_t len, struct vm_error *err)
{
	struct vdev *v = state;
	long at = vdev_load_head(v, data, len, err);
	uint64_t cid;

	(void)vm;
	if (at < 0)
		return (int)at;
	if ((size_t)at + VIRTIO_MMIO_STATE_LEN + VSOCK_PART_LEN != len)
		return vm_error_set(err, EINVAL, "%zu bytes, not %zu", len,
				    (size_t)at + VIRTIO_MMIO_STATE_LEN + VSOCK_PART_LEN);
	memcpy(&cid, data + at + VIRTIO_MMIO_STATE_LEN, sizeof(cid));
	if (cid < 3 || cid > UINT32_MAX)
		return vm_error_set(err, EINVAL, "guest CID %llu is out of range", (unsigned long long)cid);
	pthread_mutex_lock(&v->t.lock);
	v->vsock.guest_cid = cid;
	pthread_mutex_unlock(&v->t.lock);
	return vdev_load_transport(v, data, err);
}

/* A restored or forked VM: the connections the guest had belong to the VM that was captured. */
static void vsock_clone(struct vm *vm, void *state)
{
	struct vdev *v = state;

	vdev_clone(vm, state);
	virtio_vsock_transport_reset(&v->vsock);
}

static struct device_type virtio_vsock_device = {
	.name = "virtio-vsock",
	.setup = vsock_setup,
	.teardown = vdev_teardown,
	.save = vsock_save,
	.load = vsock_load,
	.clone = vsock_clone,
	.quiesce = vdev_quiesce,	/* the transport's lock held: no packet moves while the state is captured */
	.resume = vdev_resume,
};

/* ---- virtio-console ---- */

static void console_kick(void *opaque)
{
	struct vdev *v = opaque;
	uint64_t one = 1;

	if (write(v->kick_fd, &one, sizeof(one)) != sizeof(one))
		return;	/* the counter is already non-zero: the thread will look */
}

static int console_takes_input(void *opaque)
{
	return virtio_console_takes_input(&((struct vdev *)opaque)->t);
}

static int console_setup(struct vm *vm, void **state, struct vm_error *err)
{
	struct vdev *v;
	int ret;

	if (vm->restoring ? !restoring_section(vm, "virtio-console") : !vm->devcfg.virtio_console)
		return 1;
	ret = vdev_create(vm, &virtio_console_ops, SLOT_CONSOLE, &v, err);
	if (ret < 0)
		return ret;
	v->vcon.con = &vm->console;
	v->vcon.buf = malloc(VIRTIO_CONSOLE_MAX_BUFFER);
	v->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!v->vcon.buf || v->kick_fd < 0) {
		vdev_free(v);
		return vm_error_set(err, ENOMEM, "cannot set up the virtio-console: out of memory or file descriptors");
	}
	{
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = KICK };

		if (epoll_ctl(v->epoll_fd, EPOLL_CTL_ADD, v->kick_fd, &ev) < 0) {
			int e = errno;

			vdev_free(v);
			return vm_error_set(err, e, "cannot set up the virtio-console: %s", strerror(e));
		}
	}
	/*
	 * Linux's hvc0 spins, interrupts off, until the device has taken each buffer: its transmit queue is served on
	 * the notifying vCPU's MMIO exit, so the buffer is done before the guest runs again, instead of waiting for
	 * this device's thread to be woken and scheduled.
	 */
	if (v->qfd[VIRTIO_CONSOLE_TX] >= 0) {
		ioeventfd(v, VIRTIO_CONSOLE_TX, 0);
		epoll_ctl(v->epoll_fd, EPOLL_CTL_DEL, v->qfd[VIRTIO_CONSOLE_TX], NULL);
		close(v->qfd[VIRTIO_CONSOLE_TX]);
		v->qfd[VIRTIO_CONSOLE_TX] = -1;
	}
	console_set_space_hook(&vm->console, console_kick, v);
	vm->hvc_dev = v;
	vm->hvc_input_ready = console_kick;
	vm->hvc_takes_input = console_takes_input;
	*state = v;
	return 0;
}

static void console_teardown(struct vm *vm, void *state)
{
	console_set_space_hook(&vm->console, NULL, NULL);
	vm->hvc_input_ready = NULL;
	vm->hvc_takes_input = NULL;
	vm->hvc_dev = NULL;
	vdev_free(state);
}

static struct device_type virtio_console_device = {
	.name = "virtio-console",
	.setup = console_setup,
	.teardown = console_teardown,
	.save = transport_save,	/* queued input is the console's, saved with the VM */
	.load = transport_load,
	.clone = vdev_clone,
	.quiesce = vdev_quiesce,
	.resume = vdev_resume,
};

/* The disk first: its slot is 0, and Linux names it vda whichever it probes first. */
DEVICE_REGISTER(virtio_blk_device)
DEVICE_REGISTER(virtio_rng_device)
DEVICE_REGISTER(virtio_vsock_device)
DEVICE_REGISTER(virtio_console_device)

const char *vm_snapshot_disk_section(const uint8_t *data, size_t len, char *out, size_t out_len)
{
	uint16_t path_len;
	size_t at = HEAD_LEN + VIRTIO_MMIO_STATE_LEN;

	if (len < at + BLK_PART_FIXED)
		return NULL;
	memcpy(&path_len, data + at + 32, 2);
	if (len != at + BLK_PART_FIXED + path_len || path_len >= out_len)
		return NULL;
	memcpy(out, data + at + BLK_PART_FIXED, path_len);
	out[path_len] = 0;
	return out;
}
