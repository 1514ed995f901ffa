/*
 * virtio 1.x over MMIO (the "virtio-mmio" transport, version 2) and split virtqueues (docs/vmm.md, "Virtio").
 * This part is independent of KVM so the unit tests and the fuzzer drive it exactly as a driver would: the
 * transport's registers, the queues in guest memory, and the device's requests. virtio_dev.c wires it to a VM, and each
 * device's *_vm.c puts the device there
 * (MMIO window, ioeventfd, irqfd, event thread, snapshots).
 *
 * Everything in a queue is guest input: every address and length is checked through guest_mem_ptr, every index
 * against the queue size, and a chain may not be longer than the queue. A queue that breaks a rule is marked broken
 * and the device sets DEVICE_NEEDS_RESET; the driver has to reset the device to use it again.
 */
#ifndef SMOL_VIRTIO_H
#define SMOL_VIRTIO_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct guest_mem;

/* MMIO register offsets (virtio 1.2, 4.2.2) */
#define VIRTIO_MMIO_MAGIC_VALUE 0x000
#define VIRTIO_MMIO_VERSION 0x004
#define VIRTIO_MMIO_DEVICE_ID 0x008
#define VIRTIO_MMIO_VENDOR_ID 0x00c
#define VIRTIO_MMIO_DEVICE_FEATURES 0x010
#define VIRTIO_MMIO_DEVICE_FEATURES_SEL 0x014
#define VIRTIO_MMIO_DRIVER_FEATURES 0x020
#define VIRTIO_MMIO_DRIVER_FEATURES_SEL 0x024
#define VIRTIO_MMIO_QUEUE_SEL 0x030
#define VIRTIO_MMIO_QUEUE_NUM_MAX 0x034
#define VIRTIO_MMIO_QUEUE_NUM 0x038
#define VIRTIO_MMIO_QUEUE_READY 0x044
#define VIRTIO_MMIO_QUEUE_NOTIFY 0x050
#define VIRTIO_MMIO_INTERRUPT_STATUS 0x060
#define VIRTIO_MMIO_INTERRUPT_ACK 0x064
#define VIRTIO_MMIO_STATUS 0x070
#define VIRTIO_MMIO_QUEUE_DESC_LOW 0x080
#define VIRTIO_MMIO_QUEUE_DESC_HIGH 0x084
#define VIRTIO_MMIO_QUEUE_DRIVER_LOW 0x090
#define VIRTIO_MMIO_QUEUE_DRIVER_HIGH 0x094
#define VIRTIO_MMIO_QUEUE_DEVICE_LOW 0x0a0
#define VIRTIO_MMIO_QUEUE_DEVICE_HIGH 0x0a4
#define VIRTIO_MMIO_CONFIG_GENERATION 0x0fc
#define VIRTIO_MMIO_CONFIG 0x100

#define VIRTIO_MMIO_MAGIC 0x74726976	/* "virt" */
#define VIRTIO_MMIO_VERSION_2 2
#define VIRTIO_VENDOR_ID 0x4c4f4d53	/* "SMOL" */

/* Device status bits */
#define VIRTIO_STATUS_ACKNOWLEDGE 1
#define VIRTIO_STATUS_DRIVER 2
#define VIRTIO_STATUS_DRIVER_OK 4
#define VIRTIO_STATUS_FEATURES_OK 8
#define VIRTIO_STATUS_NEEDS_RESET 64
#define VIRTIO_STATUS_FAILED 128

#define VIRTIO_INT_USED 1
#define VIRTIO_INT_CONFIG 2

#define VIRTIO_F_VERSION_1 32

/* Split virtqueue descriptor flags */
#define VIRTQ_DESC_F_NEXT 1
#define VIRTQ_DESC_F_WRITE 2
#define VIRTQ_DESC_F_INDIRECT 4	/* VIRTIO_F_INDIRECT_DESC is not offered: a descriptor with it breaks the queue */

#define VIRTQ_MAX_SIZE 256		/* QueueNumMax of every queue */
#define VIRTIO_MAX_QUEUES 3		/* virtio-vsock has three */

struct virtq {
	uint16_t num;		/* size the driver chose: a power of two, 1..VIRTQ_MAX_SIZE */
	uint8_t ready;
	uint8_t broken;		/* broke a rule; nothing more is taken from it until the device is reset */
	uint64_t desc, avail, used;	/* guest-physical addresses of the three parts */
	uint16_t last_avail;	/* next avail ring entry the device takes */
	uint16_t used_idx;	/* next used ring entry the device fills (the used ring's idx as last published) */
};

/* One buffer of a chain: a guest range already checked to be RAM. */
struct virtq_buf {
	uint64_t gpa;
	uint32_t len;
	uint8_t write;		/* device-writable */
};

/* A descriptor chain taken from the avail ring: readable buffers first, then writable ones (the spec's order). */
struct virtq_chain {
	uint16_t head;
	uint16_t n;
	uint64_t out_len, in_len;	/* bytes readable by the device, bytes it may write */
	struct virtq_buf buf[VIRTQ_MAX_SIZE];
};

/*
 * Takes the next chain from the avail ring. Returns 1 with `chain` filled, 0 when the ring is empty, or -1 when the
 * queue broke a rule (the reason goes to `why`, and the queue is marked broken).
 */
int virtq_pop(struct virtq *q, struct guest_mem *mem, struct virtq_chain *chain, const char **why);
/* Puts a finished chain on the used ring (`len` bytes written into its writable buffers). -1: the ring vanished. */
int virtq_push(struct virtq *q, struct guest_mem *mem, uint16_t head, uint32_t len);
/* The parts of the queue lie in guest RAM and are aligned (checked when the driver sets QueueReady). */
const char *virtq_check_layout(const struct virtq *q, const struct guest_mem *mem);
/*
 * Copies between a chain and host memory, treating the readable buffers as one stream and the writable ones as
 * another. Both return the bytes copied (less than asked at the end of the stream). Writes mark the pages dirty.
 */
uint64_t virtq_chain_read(const struct virtq_chain *c, struct guest_mem *mem, uint64_t off, void *dst, uint64_t len);
uint64_t virtq_chain_write(const struct virtq_chain *c, struct guest_mem *mem, uint64_t off, const void *src,
			   uint64_t len);

struct virtio_mmio;

/* What a device type gives the transport. */
struct virtio_dev_ops {
	const char *name;
	uint32_t device_id;		/* 2 block, 4 entropy */
	uint16_t nr_queues;
	uint32_t config_len;		/* bytes of device config space */
	uint64_t (*features)(void *dev);
	/* [off, off + len) lies inside config_len (the transport checked). */
	void (*config_read)(void *dev, uint32_t off, uint8_t *data, uint32_t len);
	/*
	 * Serves what the driver put on queue `q`: pop chains, push them used. Returns 1 when something was put on
	 * the used ring (the transport raises the interrupt), 0 when not, -1 when the queue broke a rule (`why` says
	 * which; the transport marks the device as needing a reset). Called with the transport's lock held.
	 */
	int (*queue_work)(struct virtio_mmio *t, int q, const char **why);
	void (*reset)(void *dev);	/* optional */
};

struct virtio_mmio {
	pthread_mutex_t lock;
	const struct virtio_dev_ops *ops;
	void *dev;
	struct guest_mem *mem;
	void (*raise_irq)(void *opaque);	/* an edge on the device's interrupt line */
	void *irq_opaque;
	void (*log)(void *opaque, const char *msg);	/* optional: a queue broke (for the host's log) */
	int logged;

	uint32_t status;
	uint32_t dev_features_sel, drv_features_sel;
	uint64_t drv_features;
	uint32_t queue_sel;
	uint32_t int_status;
	uint32_t config_gen;
	struct virtq q[VIRTIO_MAX_QUEUES];
};

void virtio_mmio_init(struct virtio_mmio *t, const struct virtio_dev_ops *ops, void *dev, struct guest_mem *mem);
void virtio_mmio_exit(struct virtio_mmio *t);
/* A guest access to the window: `offset` from its base, `len` 1, 2, 4 or 8. Takes the lock. */
void virtio_mmio_access(struct virtio_mmio *t, uint64_t offset, uint8_t *data, uint32_t len, int is_write);
/* Serves queue `q` (a QueueNotify write or its ioeventfd). Takes the lock. */
void virtio_mmio_notify(struct virtio_mmio *t, uint32_t q);
/* The lock already held: serves every ready queue (after a restore, when notifications may have been lost). */
void virtio_mmio_kick_all_locked(struct virtio_mmio *t);

/*
 * State, as plain data (docs/snapshots.md, "virtio devices"). A virtio device's state is where it sits (slot, GSI,
 * window: the guest found it there at boot) and its transport: registers and every queue's position.
 * virtio_dev_state_encode writes VIRTIO_DEV_STATE_LEN bytes; virtio_dev_state_decode reads them from untrusted
 * input and checks what holds without a device (bits, ranges, unused queues zero), failing the reader with the
 * reason. virtio_mmio_set_state checks the rest against the device and guest RAM, and returns what is wrong or NULL.
 * get and set are called with the transport's lock held (or before its device runs).
 */
struct le_reader;
struct le_writer;

struct virtq_state {
	uint16_t num, last_avail, used_idx;
	uint8_t ready, broken;
	uint64_t desc, avail, used;
};

struct virtio_mmio_state {
	uint8_t nr_queues;
	uint32_t status, dev_features_sel, drv_features_sel, queue_sel, int_status, config_gen;
	uint64_t drv_features;
	struct virtq_state q[VIRTIO_MAX_QUEUES];
};

struct virtio_dev_state {
	uint8_t slot;
	uint32_t gsi;
	uint64_t base;
	struct virtio_mmio_state transport;
};

#define VIRTIO_DEV_STATE_LEN (48 + VIRTIO_MAX_QUEUES * 32)
void virtio_dev_state_encode(const struct virtio_dev_state *s, struct le_writer *w);
void virtio_dev_state_decode(struct le_reader *r, struct virtio_dev_state *s);
/* A section that is the device state alone (virtio-rng, virtio-console): what is wrong, or NULL. */
const char *virtio_dev_state_parse(const uint8_t *data, size_t len, struct virtio_dev_state *s);
void virtio_mmio_get_state(struct virtio_mmio *t, struct virtio_mmio_state *s);
const char *virtio_mmio_set_state(struct virtio_mmio *t, const struct virtio_mmio_state *s);

/* ---- devices (virtio_blk.c, virtio_rng.c, virtio_console.c; virtio_vsock.h); each *_vm.c puts its own in a VM ---- */

#define VIRTIO_ID_BLOCK 2
#define VIRTIO_ID_CONSOLE 3
#define VIRTIO_ID_ENTROPY 4

/* virtio-blk: one request queue over a disk layer chain (disk.h). */
#define VIRTIO_BLK_T_IN 0
#define VIRTIO_BLK_T_OUT 1
#define VIRTIO_BLK_T_FLUSH 4
#define VIRTIO_BLK_T_GET_ID 8
#define VIRTIO_BLK_S_OK 0
#define VIRTIO_BLK_S_IOERR 1
#define VIRTIO_BLK_S_UNSUPP 2
#define VIRTIO_BLK_F_SEG_MAX 2
#define VIRTIO_BLK_F_RO 5
#define VIRTIO_BLK_F_FLUSH 9
#define VIRTIO_BLK_ID_BYTES 20
#define VIRTIO_BLK_SEG_MAX (VIRTQ_MAX_SIZE - 2)	/* data segments besides the header and the status byte */

struct disk;

struct virtio_blk {
	struct disk *disk;
	const char *id;		/* what GET_ID answers (the guest's /sys/block/vdX/serial); NULL: "smol-disk" */
	uint64_t io_errors;	/* requests answered with VIRTIO_BLK_S_IOERR (host I/O errors, out-of-range sectors) */
};

extern const struct virtio_dev_ops virtio_blk_ops;

/*
 * Its state: the device's, then the disk layer a checkpoint froze (its absolute path, id and size; zeros for a raw
 * image's id) and whether the VM had a writable layer over it (a restore then stacks a new one). Decoding checks
 * the bytes alone and returns what is wrong, or NULL; whether the layer is still that one is the VM's to check.
 */
#define VIRTIO_BLK_PATH_MAX 3968	/* DISK_PATH_MAX */
struct virtio_blk_state {
	struct virtio_dev_state dev;
	uint8_t writable;
	uint64_t disk_size;
	uint8_t layer_id[16];
	char path[VIRTIO_BLK_PATH_MAX + 1];
};

#define VIRTIO_BLK_STATE_MAX (VIRTIO_DEV_STATE_LEN + 36 + VIRTIO_BLK_PATH_MAX)
void virtio_blk_state_encode(const struct virtio_blk_state *s, struct le_writer *w);
const char *virtio_blk_state_decode(const uint8_t *data, size_t len, struct virtio_blk_state *s);

/* virtio-rng: one request queue, filled from getrandom(2); at most VIRTIO_RNG_MAX_REQUEST bytes per request. */
#define VIRTIO_RNG_MAX_REQUEST 65536
extern const struct virtio_dev_ops virtio_rng_ops;

/*
 * virtio-console: one port (/dev/hvc0 in a Linux guest) on the VM's console (console.h). Transmit buffers larger
 * than VIRTIO_CONSOLE_MAX_BUFFER keep their first VIRTIO_CONSOLE_MAX_BUFFER bytes (the rest is counted in
 * `dropped`); Linux's are a page at most.
 */
#define VIRTIO_CONSOLE_RX 0
#define VIRTIO_CONSOLE_TX 1
#define VIRTIO_CONSOLE_CONFIG_LEN 12
#define VIRTIO_CONSOLE_MAX_BUFFER (256u * 1024)

struct console;

struct virtio_console {
	struct console *con;
	uint64_t dropped;
	uint8_t *buf;			/* VIRTIO_CONSOLE_MAX_BUFFER bytes */
	struct virtq_chain chain;
};

extern const struct virtio_dev_ops virtio_console_ops;
/* The driver is up (DRIVER_OK, not broken): console input goes to this device instead of the UART. */
int virtio_console_takes_input(const struct virtio_mmio *t);

#endif
