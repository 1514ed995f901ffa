/*
 * Memory layers (docs/snapshots.md): immutable images of guest RAM, full or a diff over a parent layer, in a memfd
 * (made by a checkpoint or a fork in this process) or in a snapshot's `memory` file. Guest RAM made from a layer
 * chain is a private mapping of it: nothing is read until the guest touches a page, and writes stay private.
 */
#ifndef SMOL_MEM_LAYER_H
#define SMOL_MEM_LAYER_H

#include <pthread.h>
#include <stdint.h>

#include "snapfile.h"

#define MEM_LAYER_MAX_DEPTH 8	/* a deeper chain is flattened (in memory) or written full (on disk) */

struct vm_error;

struct mem_layer {
	int refs;			/* atomic */
	int fd;				/* owned; with data_offset, changed only by mem_layer_adopt_file, under lock */
	uint32_t kind;			/* MEM_LAYER_FULL or MEM_LAYER_DIFF */
	uint64_t mem_size, data_offset;	/* page p of guest RAM is at data_offset + p * 4096 in fd */
	uint8_t *bitmap;		/* diff: the pages this layer holds; NULL for a full layer */
	uint64_t pages;			/* how many */
	int depth;			/* layers in the chain as it was made, this one included */

	pthread_mutex_t lock;		/* guards what follows */
	struct mem_layer *parent;	/* diff: the layer below (a reference); NULL once cut (flat is then set) */
	struct mem_layer *flat;		/* a full layer with the same contents as the chain, once one was made */
	int flattening;
	char *dir;			/* the snapshot directory this layer's pages are in (newest), or NULL */
	uint8_t snap_id[SNAP_ID_SIZE];	/* that snapshot's id */
	int disk_depth;			/* the length of its chain on disk */
};

/*
 * What a diff of a chain's top layer is written over (vm_snapshot_write): the nearest layer already on disk, when
 * it is at most MEM_LAYER_MAX_DEPTH layers down and its own chain on disk is shorter than MEM_LAYER_MAX_DEPTH; else
 * none, and the snapshot is written full. Everything is referenced or copied, so a chain cut meanwhile (a flat copy
 * made, a full write) does not change what the diff holds.
 */
struct mem_layer_base {
	struct mem_layer *base;		/* referenced, or NULL: write full; may be top itself (an empty diff) */
	struct mem_layer *above[MEM_LAYER_MAX_DEPTH];	/* top first, base excluded; referenced */
	int n;
	char *dir;			/* base's directory, its snapshot id and its chain's length on disk */
	uint8_t snap_id[SNAP_ID_SIZE];
	int disk_depth;
};

/* Takes ownership of fd. bitmap (diff only) is copied. parent is referenced. */
struct mem_layer *mem_layer_new(int fd, uint32_t kind, uint64_t mem_size, uint64_t data_offset,
				const uint8_t *bitmap, struct mem_layer *parent, struct vm_error *err);
struct mem_layer *mem_layer_get(struct mem_layer *l);
void mem_layer_put(struct mem_layer *l);

/* The layer below l, referenced (put it), read under l's lock; NULL for a full layer or a diff whose chain was cut. */
struct mem_layer *mem_layer_parent(struct mem_layer *l);

/* Fills b for a write of top (see struct mem_layer_base); put it with mem_layer_base_put. */
void mem_layer_find_base(struct mem_layer *top, struct mem_layer_base *b);
void mem_layer_base_put(struct mem_layer_base *b);

/* Maps the chain private and writable: guest RAM of mem_size bytes. Returns MAP_FAILED-free pointer or NULL. */
void *mem_layer_map(struct mem_layer *top, struct vm_error *err);

/*
 * Writes the contents the chain `top` has (over `base`, exclusive; NULL for everything) into fd at data_offset:
 * with base, only the pages the layers between hold (their union goes to *bitmap_out when not NULL); without,
 * every non-zero page. Zero pages of a full write are left as holes. progress may be NULL.
 */
int mem_layer_copy(struct mem_layer *top, struct mem_layer *base, int fd, uint64_t data_offset, uint8_t *bitmap_out,
		   uint64_t *pages_out, uint64_t *bytes_out, void (*progress)(void *, uint64_t, uint64_t),
		   void *opaque, struct vm_error *err);
/* The same for a diff over b->base (b from mem_layer_find_base, with a base): the pages of b->above. */
int mem_layer_copy_diff(const struct mem_layer_base *b, int fd, uint64_t data_offset, uint8_t *bitmap_out,
			uint64_t *pages_out, uint64_t *bytes_out, void (*progress)(void *, uint64_t, uint64_t),
			void *opaque, struct vm_error *err);

/*
 * The layer's pages are now also in a snapshot file (at data_offset, same page numbering): read them from there and
 * close the memfd, so a checkpoint's copy of guest memory lives in the page cache, which the kernel can reclaim,
 * instead of in memory nothing but the VM's end frees. Takes ownership of fd.
 */
void mem_layer_adopt_file(struct mem_layer *l, int fd, uint64_t data_offset);

/*
 * l's whole contents are now also a full layer in a snapshot file, fd (owned) at data_offset, written to dir with
 * id: that file becomes l's flat copy (freeing a memfd one), l's chain below is cut (the layers only it needed are
 * freed, their fds closed) and l is on disk as that snapshot, its chain there one layer long.
 */
void mem_layer_adopt_full_file(struct mem_layer *l, int fd, uint64_t data_offset, const char *dir,
			       const uint8_t id[SNAP_ID_SIZE]);

/*
 * Starts a background thread that builds l->flat when l's chain is deeper than MEM_LAYER_MAX_DEPTH. Once built, l's
 * chain below is cut: a chain the VM keeps adding to stays bounded, in layers, fds and memory.
 */
void mem_layer_flatten_async(struct mem_layer *l);

/* The layer to map for l: l->flat once it exists. Referenced; put it when done. */
/* The length of l's chain as it is mapped (flat copies used): 1 for a full or flattened layer. */
int mem_layer_chain_depth(struct mem_layer *l);
struct mem_layer *mem_layer_resolve(struct mem_layer *l);

static inline int mem_layer_test(const uint8_t *bitmap, uint64_t page)
{
	return bitmap[page / 8] >> (page % 8) & 1;
}

static inline void mem_layer_set(uint8_t *bitmap, uint64_t page)
{
	bitmap[page / 8] |= (uint8_t)(1u << (page % 8));
}

/*
 * The next run of set bits at or after `from` in a bitmap of `pages` bits: returns its first page and puts its
 * length in *run, or returns `pages` when there is none. Skips clear bits eight bytes at a time, so walking the
 * bitmap of a large, mostly clean guest costs little.
 */
uint64_t mem_layer_next_run(const uint8_t *bitmap, uint64_t pages, uint64_t from, uint64_t *run);
/* Set bits in a bitmap of `pages` bits. */
uint64_t mem_layer_count(const uint8_t *bitmap, uint64_t pages);

#endif
