/* The VM wiring every virtio-mmio device shares (virtio_dev.h). */
#define _GNU_SOURCE
#include "virtio_dev.h"
#include "error.h"
#include "internal.h"
#include "le_codec.h"
#include "snapfile.h"

#include <errno.h>
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
#define KICK UINT32_C(0x10000)	/* epoll data of kick_fd */

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

/* The device's thread: serves a queue when its ioeventfd fires, every queue on a kick, until stop_fd fires. */
static void *vdev_thread(void *arg)
{
	struct vdev *v = arg;

	for (;;) {
		struct epoll_event ev[VIRTIO_MAX_QUEUES + 2];
		int n = epoll_wait(v->epoll_fd, ev, VIRTIO_MAX_QUEUES + 2, -1);

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

	return kvm_ioctl(v->vm->vm_fd, KVM_IOEVENTFD, &io) < 0 ? -errno : 0;
}

void vdev_free(struct vdev *v)
{
	uint64_t one = 1;

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

		kvm_ioctl(v->vm->vm_fd, KVM_IRQFD, &irq);
		close(v->irqfd);
	}
	if (v->stop_fd >= 0)
		close(v->stop_fd);
	if (v->kick_fd >= 0)
		close(v->kick_fd);
	if (v->epoll_fd >= 0)
		close(v->epoll_fd);
	virtio_mmio_exit(&v->t);
	free(v);
}

/* vm->virtio stays in slot order: that is the order of the kernel command line (vda is the disk). */
static void announce(struct vm *vm, const struct vdev *v)
{
	int i = vm->nr_virtio++;

	while (i > 0 && vm->virtio[i - 1].base > v->base) {
		vm->virtio[i] = vm->virtio[i - 1];
		i--;
	}
	vm->virtio[i] = (struct boot_virtio){ .base = v->base, .len = VIRTIO_MMIO_LEN, .gsi = v->gsi };
}

int vdev_create(struct vm *vm, const struct virtio_dev_ops *ops, int slot, void *dev, struct vdev **out,
		struct vm_error *err)
{
	struct vdev *v;
	int ret, e;

	if (vm->nr_virtio == BOOT_MAX_VIRTIO)
		return vm_error_set(err, ENOSPC, "too many virtio devices");
	v = calloc(1, sizeof(*v));
	if (!v)
		return vm_error_set(err, ENOMEM, "out of memory for a virtio device");
	virtio_mmio_init(&v->t, ops, dev, &vm->mem);	/* the device's state is set before its thread exists */
	v->t.raise_irq = vdev_raise_irq;
	v->t.irq_opaque = v;
	v->t.log = vdev_log;
	v->vm = vm;
	v->dev = dev;
	v->slot = slot;
	v->base = VIRTIO_MMIO_BASE + (uint64_t)slot * VIRTIO_MMIO_LEN;
	v->gsi = VIRTIO_GSI_BASE + (uint32_t)slot;
	v->irqfd = v->stop_fd = v->epoll_fd = v->kick_fd = -1;
	for (int q = 0; q < VIRTIO_MAX_QUEUES; q++)
		v->qfd[q] = -1;
	ret = io_bus_register(&vm->mmio, v->base, VIRTIO_MMIO_LEN, vdev_mmio, v);
	if (ret < 0) {
		uint64_t base = v->base;

		virtio_mmio_exit(&v->t);
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

		if (kvm_ioctl(vm->vm_fd, KVM_IRQFD, &irq) < 0) {
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
	announce(vm, v);
	*out = v;
	return 0;
fail_errno:
	e = errno;
	vdev_free(v);
	return vm_error_set(err, e, "cannot set up the %s: %s", ops->name, strerror(e));
}

int vdev_add_kick(struct vdev *v, struct vm_error *err)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = KICK };
	int e;

	v->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (v->kick_fd >= 0 && epoll_ctl(v->epoll_fd, EPOLL_CTL_ADD, v->kick_fd, &ev) == 0)
		return 0;
	e = errno;
	return vm_error_set(err, e, "cannot set up the %s: %s", v->t.ops->name, strerror(e));
}

void vdev_kick(struct vdev *v)
{
	uint64_t one = 1;

	if (write(v->kick_fd, &one, sizeof(one)) != sizeof(one))
		return;	/* the counter is already non-zero: the thread will look */
}

void vdev_serve_on_exit(struct vdev *v, int q)
{
	if (v->qfd[q] < 0)
		return;
	ioeventfd(v, q, 0);
	epoll_ctl(v->epoll_fd, EPOLL_CTL_DEL, v->qfd[q], NULL);
	close(v->qfd[q]);
	v->qfd[q] = -1;
}

int vdev_wanted(struct vm *vm, const char *name, int configured)
{
	size_t len = strlen(name);

	if (!vm->restoring)
		return configured;
	for (uint32_t i = 0; i < vm->restoring->nr_sections; i++) {
		const struct snap_section *s = &vm->restoring->sections[i];

		if (s->kind == SNAP_DEVICE && s->len > len && s->data[0] == len && !memcmp(s->data + 1, name, len))
			return 1;
	}
	return 0;
}

void vdev_get_state(struct vdev *v, struct virtio_dev_state *s)
{
	s->slot = (uint8_t)v->slot;
	s->gsi = v->gsi;
	s->base = v->base;
	virtio_mmio_get_state(&v->t, &s->transport);
}

int vdev_set_state(struct vdev *v, const struct virtio_dev_state *s, struct vm_error *err)
{
	const char *bad;

	if (s->slot != v->slot || s->gsi != v->gsi || s->base != v->base)
		return vm_error_set(err, EINVAL, "the guest found the device at 0x%llx on GSI %u; this VMM puts it at "
				    "0x%llx on GSI %u", (unsigned long long)s->base, s->gsi,
				    (unsigned long long)v->base, v->gsi);
	bad = virtio_mmio_set_state(&v->t, &s->transport);
	return bad ? vm_error_set(err, EINVAL, "%s", bad) : 0;
}

/* After a restore or fork, before any vCPU runs: interrupts that were pending, and requests never served. */
void vdev_clone(struct vm *vm, void *state)
{
	struct vdev *v = state;

	(void)vm;
	pthread_mutex_lock(&v->t.lock);
	if (v->t.int_status)
		vdev_raise_irq(v);
	virtio_mmio_kick_all_locked(&v->t);	/* a notification the snapshot caught in an eventfd is lost */
	pthread_mutex_unlock(&v->t.lock);
}

/* The transport's lock held from quiesce to resume: no request moves while the state is captured. */
int vdev_quiesce(struct vm *vm, void *state, struct vm_error *err)
{
	(void)vm;
	(void)err;
	pthread_mutex_lock(&((struct vdev *)state)->t.lock);
	return 0;
}

void vdev_resume(struct vm *vm, void *state)
{
	(void)vm;
	pthread_mutex_unlock(&((struct vdev *)state)->t.lock);
}

int vdev_save(struct vm *vm, void *state, struct snap_writer *w)
{
	struct virtio_dev_state s;
	uint8_t buf[VIRTIO_DEV_STATE_LEN];
	struct le_writer out;

	(void)vm;
	vdev_get_state(state, &s);
	le_writer_init(&out, buf, sizeof(buf));
	virtio_dev_state_encode(&s, &out);
	snap_append(w, buf, out.len);
	return 0;
}

int vdev_load(struct vm *vm, void *state, const uint8_t *data, size_t len, struct vm_error *err)
{
	struct virtio_dev_state s;
	const char *bad = virtio_dev_state_parse(data, len, &s);

	(void)vm;
	return bad ? vm_error_set(err, EINVAL, "%s", bad) : vdev_set_state(state, &s, err);
}
