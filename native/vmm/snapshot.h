/*
 * What the snapshot modules share (not the library's API, which is vm.h): a snapshot in memory, and the steps
 * snapshot.c orchestrates. memory_freeze (mem_freeze.c) freezes guest RAM into a layer with every vCPU parked; the
 * directory's writer and reader are snapshot_write.c and snapshot_open.c; the KVM state is kvm_state.h.
 */
#ifndef SMOL_SNAPSHOT_H
#define SMOL_SNAPSHOT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "snapfile.h"

struct mem_layer;
struct vm;
struct vm_checkpoint_stats;
struct vm_error;

struct vm_snapshot {
	uint8_t *blob;			/* a finished state blob (ids as written, or in-memory ones) */
	size_t blob_len;
	struct snap_blob parsed;
	struct snap_vm_info info;
	struct mem_layer *layer;
	char *dir;			/* where it was opened from, or NULL */
	char disk[PATH_MAX];		/* the frozen disk layer (or read-only image) its virtio-blk section names */
};

/* Finds the disk layer the snapshot's virtio-blk section names (s->disk stays empty without one). */
void snapshot_find_disk(struct vm_snapshot *s);
void snapshot_hex_id(const uint8_t id[SNAP_ID_SIZE], char out[2 * SNAP_ID_SIZE + 1]);

/*
 * Freezes guest RAM into a layer, with every vCPU parked. The first time, the VM's memfd becomes a full layer and
 * RAM is remapped private over it (no copy). After that, the pages dirtied since go into a new diff layer.
 */
int memory_freeze(struct vm *vm, struct vm_checkpoint_stats *st, struct vm_error *err);

#endif
