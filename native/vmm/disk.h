/*
 * Disks as layer chains (docs/disks.md): a read-only raw base image, shared between VMs, under copy-on-write
 * layers in our own small format. Reads fall through the chain to the first layer that has the cluster; writes go
 * to the top layer, copying a cluster up from below the first time. A layer's map reaches the file only after the
 * data it points at (flush: fdatasync the data, write the map entries, fdatasync again), so a crash at any moment
 * leaves a layer that opens, with every flushed write in it.
 */
#ifndef SMOL_DISK_H
#define SMOL_DISK_H

#include <stddef.h>
#include <stdint.h>

#define DISK_MAGIC "SMOLDISK"
#define DISK_VERSION 1
#define DISK_HEADER_SIZE 4096
#define DISK_CLUSTER_SIZE 65536
#define DISK_SECTOR 512
#define DISK_ID_SIZE 16
#define DISK_PATH_MAX 3968	/* bytes of the parent's path in a header */
#define DISK_MAX_DEPTH 64	/* layers in one chain */
#define DISK_FLAG_FROZEN 1	/* no more writes: a snapshot refers to this layer */

struct vm_error;

struct disk_layer {
	int fd;
	char *path;		/* absolute */
	int frozen;
	uint8_t id[DISK_ID_SIZE], parent_id[DISK_ID_SIZE];
	uint64_t nr_clusters;
	uint64_t *map;		/* per cluster: 0 absent (read below), else the file offset of its data */
	uint8_t *map_dirty;	/* one bit per cluster: set in `map` but not yet in the file */
	uint64_t data_offset;
	uint64_t next_free;	/* where the next new cluster goes */
	struct disk_layer *below;	/* NULL: the base image is next */
};

struct disk {
	uint64_t size;		/* bytes, a multiple of DISK_SECTOR */
	int base_fd;
	char *base_path;	/* absolute */
	struct disk_layer *top;	/* NULL: the base alone */
	int read_only;		/* no writable top layer */
};

/*
 * Creates a new, empty layer at `path` (which must not exist) over `below`: a raw base image or a frozen layer
 * (writes to a layer that has layers over it would change what they read). The file is fsynced before this returns.
 */
int disk_layer_create(const char *path, const char *below, struct vm_error *err);
/*
 * Opens the chain whose top is `path`: a layer (writable unless frozen, or when `read_only`), or a raw image alone
 * (read-only). Each header is checked and every parent link followed and checked by id.
 */
int disk_open(const char *path, int read_only, struct disk **out, struct vm_error *err);
void disk_close(struct disk *d);
int disk_read(struct disk *d, uint64_t off, void *buf, uint64_t len, struct vm_error *err);
int disk_write(struct disk *d, uint64_t off, const void *buf, uint64_t len, struct vm_error *err);
/* Makes every write so far durable: fdatasync the data, then write the map, then fdatasync again. */
int disk_flush(struct disk *d, struct vm_error *err);
/*
 * For a checkpoint: flushes the top layer, marks it frozen (read-only from now on, 0444) and stacks a new writable
 * layer at `new_top` over it, on which the disk goes on. On failure the disk is as it was (still writable).
 */
int disk_freeze_and_stack(struct disk *d, const char *new_top, struct vm_error *err);
/*
 * Rewrites the frozen layer at `path` so that it sits directly on the base image: every cluster its chain has above
 * the base goes into one new file (the highest layer's copy of each), which replaces `path` atomically, frozen and
 * with the same id, so layers stacked on it still open. Reads give exactly what the old chain gave. The layers that
 * were below are not touched (whoever has them open goes on); nothing needs them for `path` any more. Keeps chains
 * under DISK_MAX_DEPTH however many checkpoints a VM takes. Nothing to do for a layer on the base already.
 */
struct disk_flatten_stats {
	int depth_before, depth_after;	/* layers in the chain, the base not counted */
	uint64_t bytes;			/* cluster data written */
};
int disk_flatten(const char *path, struct disk_flatten_stats *st, struct vm_error *err);
/*
 * Writes the disk as the chain at `path` reads it into a new raw file `out` (which must not exist), sparse: clusters
 * no layer has and the base holds as a hole, or that read as zeros, are left as holes. For a reader of the guest's
 * file system that must see one flat image (docs/diff.md); `path` may be a frozen layer, a stopped VM's top or a
 * raw image. The file is removed again on failure.
 */
struct disk_export_stats {
	uint64_t size;		/* bytes of the disk */
	uint64_t bytes;		/* bytes of data written (the rest are holes) */
};
int disk_export(const char *path, const char *out, struct disk_export_stats *st, struct vm_error *err);
/* The path and id of the layer at the top of the chain (the base's path and zero id when there is no layer). */
const char *disk_top_path(const struct disk *d);
void disk_top_id(const struct disk *d, uint8_t id[DISK_ID_SIZE]);

/* Header check, exposed for tests and the fuzzer: parses DISK_HEADER_SIZE bytes; NULL or what is wrong. */
struct disk_header {
	uint32_t cluster_size, flags, parent_path_len;
	uint64_t size, map_offset, nr_clusters, data_offset;
	uint8_t id[DISK_ID_SIZE], parent_id[DISK_ID_SIZE];
	char parent_path[DISK_PATH_MAX + 1];
};
const char *disk_header_parse(const uint8_t *buf, struct disk_header *h);
void disk_header_encode(const struct disk_header *h, uint8_t buf[DISK_HEADER_SIZE]);

#endif
