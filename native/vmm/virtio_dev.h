/*
 * A virtio-mmio device in a VM (docs/vmm.md, "Virtio"; docs/devices.md): the wiring every virtio device shares,
 * used by each device's own *_vm.c. Each device has a fixed slot, hence a fixed 4 KiB window in the MMIO gap and a
 * fixed GSI, so a snapshot restores into the same places the guest found at boot. QueueNotify is a KVM ioeventfd
 * per queue (datamatch = queue index) and the interrupt a KVM irqfd, so neither exits to the VMM on the vCPU
 * thread; the device's own thread serves the queues. A vCPU touching the other registers exits to
 * virtio_mmio_access. When KVM refuses an ioeventfd or irqfd the same paths run on an MMIO exit and KVM_IRQ_LINE.
 */
#ifndef SMOL_VIRTIO_DEV_H
#define SMOL_VIRTIO_DEV_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "virtio.h"

struct vm;
struct vm_error;
struct snap_writer;

/* Slots: a device's place on the bus, and its order on the kernel command line (the disk first: vda). */
#define VIRTIO_SLOT_BLK 0
#define VIRTIO_SLOT_RNG 1
#define VIRTIO_SLOT_VSOCK 2
#define VIRTIO_SLOT_CONSOLE 3
#define VIRTIO_SLOT_NET 4
#define VIRTIO_SLOT_VOLUME(n) (4 + (n))	/* volume n, 1 to VM_MAX_VOLUMES: slots 5 to 8, GSIs 10 to 13 */

struct vdev {
	struct virtio_mmio t;
	struct vm *vm;
	void *dev;		/* the device's own state (also t.dev), owned by its *_vm.c */
	int slot;
	uint64_t base;
	uint32_t gsi;
	int irqfd;
	int qfd[VIRTIO_MAX_QUEUES];
	int stop_fd, epoll_fd;
	int kick_fd;		/* -1 until vdev_add_kick: the host side has work for every queue */
	pthread_t thread;
	int thread_started;
};

/*
 * Whether the VM gets the device called `name`: a restore has it when its snapshot has a section for it, a boot
 * when the configuration asks for it (`configured`).
 */
int vdev_wanted(struct vm *vm, const char *name, int configured);
/* A device in `slot` with state `dev`: its window on the MMIO bus, its irqfd, an ioeventfd per queue, its thread. */
int vdev_create(struct vm *vm, const struct virtio_dev_ops *ops, int slot, void *dev, struct vdev **out,
		struct vm_error *err);
/* Stops the thread, takes the window's eventfds back and frees the vdev (not its device's state). */
void vdev_free(struct vdev *v);
/* An eventfd the host side writes (vdev_kick) when it has work for the device: every queue is served. */
int vdev_add_kick(struct vdev *v, struct vm_error *err);
void vdev_kick(struct vdev *v);
/* Queue `q`'s notifications exit to the notifying vCPU, which serves the queue there (no ioeventfd). */
void vdev_serve_on_exit(struct vdev *v, int q);

/* The device's place and transport, for its state; vdev_set_state refuses another place than this VMM's. */
void vdev_get_state(struct vdev *v, struct virtio_dev_state *s);
int vdev_set_state(struct vdev *v, const struct virtio_dev_state *s, struct vm_error *err);

/* device_type hooks every virtio device uses as they are or calls from its own. */
void vdev_clone(struct vm *vm, void *state);
int vdev_quiesce(struct vm *vm, void *state, struct vm_error *err);
void vdev_resume(struct vm *vm, void *state);
/* save and load of a device whose state is the virtio device's alone (virtio-rng, virtio-console). */
int vdev_save(struct vm *vm, void *state, struct snap_writer *w);
int vdev_load(struct vm *vm, void *state, const uint8_t *data, size_t len, struct vm_error *err);

#endif
