/*
 * Memory layers: reference counting, mapping a chain copy-on-write, copying a chain out, flattening. A layer's
 * parent link is cut once the layer has a flat copy (made in memory, or the full snapshot file it was written to):
 * whatever reads the chain takes each parent under the layer's lock, with a reference, and uses the flat copy where
 * the link is gone, so a VM's chain stays bounded however many checkpoints it takes.
 */
#define _GNU_SOURCE
#include "mem_layer.h"
#include "error.h"
#include "file_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define CHAIN_MAX 64		/* deeper than any chain flattening or writing lets happen */
#define COPY_CHUNK (1u << 20)

struct mem_layer *mem_layer_new(int fd, uint32_t kind, uint64_t mem_size, uint64_t data_offset,
				const uint8_t *bitmap, struct mem_layer *parent, struct vm_error *err)
{
	struct mem_layer *l = calloc(1, sizeof(*l));
	size_t bitmap_len = (size_t)((mem_size / SNAP_PAGE_SIZE + 7) / 8);

	if (!l) {
		close(fd);
		vm_error_set(err, ENOMEM, "out of memory for a memory layer");
		return NULL;
	}
	l->refs = 1;
	l->fd = fd;
	l->kind = kind;
	l->mem_size = mem_size;
	l->data_offset = data_offset;
	l->depth = 1;
	pthread_mutex_init(&l->lock, NULL);
	if (kind == MEM_LAYER_DIFF) {
		l->bitmap = malloc(bitmap_len);
		if (!l->bitmap) {
			mem_layer_put(l);
			vm_error_set(err, ENOMEM, "out of memory for a memory layer's bitmap");
			return NULL;
		}
		memcpy(l->bitmap, bitmap, bitmap_len);
		l->pages = mem_layer_count(l->bitmap, mem_size / SNAP_PAGE_SIZE);
		l->parent = mem_layer_get(parent);
		l->depth = parent->depth + 1;
	} else {
		l->pages = mem_size / SNAP_PAGE_SIZE;
	}
	return l;
}

uint64_t mem_layer_next_run(const uint8_t *bitmap, uint64_t pages, uint64_t from, uint64_t *run)
{
	uint64_t p = from, n = 0;

	while (p < pages) {
		uint64_t word;

		if (p % 64 == 0 && p + 64 <= pages) {
			memcpy(&word, bitmap + p / 8, 8);
			if (!word) {
				p += 64;
				continue;
			}
		}
		if (mem_layer_test(bitmap, p))
			break;
		p++;
	}
	while (p + n < pages && mem_layer_test(bitmap, p + n))
		n++;
	*run = n;
	return p < pages ? p : pages;
}

uint64_t mem_layer_count(const uint8_t *bitmap, uint64_t pages)
{
	uint64_t count = 0, i = 0;

	for (; i + 64 <= pages; i += 64) {
		uint64_t word;

		memcpy(&word, bitmap + i / 8, 8);
		count += (uint64_t)__builtin_popcountll(word);
	}
	for (; i < pages; i++)
		count += mem_layer_test(bitmap, i);
	return count;
}

struct mem_layer *mem_layer_get(struct mem_layer *l)
{
	if (l)
		__atomic_add_fetch(&l->refs, 1, __ATOMIC_RELAXED);
	return l;
}

void mem_layer_put(struct mem_layer *l)
{
	while (l && __atomic_sub_fetch(&l->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		struct mem_layer *parent = l->parent;

		mem_layer_put(l->flat);
		if (l->fd >= 0)
			close(l->fd);
		free(l->bitmap);
		free(l->dir);
		pthread_mutex_destroy(&l->lock);
		free(l);
		l = parent;
	}
}

struct mem_layer *mem_layer_parent(struct mem_layer *l)
{
	struct mem_layer *p;

	pthread_mutex_lock(&l->lock);
	p = mem_layer_get(l->parent);
	pthread_mutex_unlock(&l->lock);
	return p;
}

/* Drops l's link to its parent once l has a flat copy (under the lock: a reader sees the link or the flat). */
static void cut_below(struct mem_layer *l)
{
	struct mem_layer *parent = NULL;

	pthread_mutex_lock(&l->lock);
	if (l->flat) {
		parent = l->parent;
		l->parent = NULL;
	}
	pthread_mutex_unlock(&l->lock);
	mem_layer_put(parent);
}

struct mem_layer *mem_layer_resolve(struct mem_layer *l)
{
	struct mem_layer *r;

	pthread_mutex_lock(&l->lock);
	r = mem_layer_get(l->flat ? l->flat : l);
	pthread_mutex_unlock(&l->lock);
	return r;
}

/* Where l's pages are now: a duplicate of its fd (close it) and the data offset, read together under the lock. */
static int source(struct mem_layer *l, uint64_t *data_offset, struct vm_error *err)
{
	int fd;

	pthread_mutex_lock(&l->lock);
	fd = fcntl(l->fd, F_DUPFD_CLOEXEC, 0);
	*data_offset = l->data_offset;
	pthread_mutex_unlock(&l->lock);
	if (fd < 0)
		return vm_error_set(err, errno, "cannot use a memory layer: %s", strerror(errno));
	return fd;
}

void mem_layer_adopt_file(struct mem_layer *l, int fd, uint64_t data_offset)
{
	int old;

	pthread_mutex_lock(&l->lock);
	old = l->fd;
	l->fd = fd;
	l->data_offset = data_offset;
	pthread_mutex_unlock(&l->lock);
	close(old);	/* a memfd's pages go once no fd and no mapping holds them */
}

void mem_layer_adopt_full_file(struct mem_layer *l, int fd, uint64_t data_offset, const char *dir,
			       const uint8_t id[SNAP_ID_SIZE])
{
	struct vm_error err;
	struct mem_layer *full = mem_layer_new(fd, MEM_LAYER_FULL, l->mem_size, data_offset, NULL, NULL, &err), *old;
	char *copy = strdup(dir);

	pthread_mutex_lock(&l->lock);
	old = full ? l->flat : NULL;
	if (full)
		l->flat = full;
	if (copy) {
		free(l->dir);
		l->dir = copy;
		memcpy(l->snap_id, id, SNAP_ID_SIZE);
		l->disk_depth = 1;
	}
	pthread_mutex_unlock(&l->lock);
	mem_layer_put(old);	/* a memfd flat: a reader still mapping it holds its own reference */
	if (full)
		cut_below(l);
	else
		free(copy);	/* out of memory: l stays as it was, which is still right */
}

static void chain_put(struct mem_layer **chain, int n)
{
	for (int i = 0; i < n; i++)
		mem_layer_put(chain[i]);
}

/* The chain from top down to its full layer, flattened layers used where they exist; newest first. */
static int chain_collect(struct mem_layer *top, struct mem_layer *chain[CHAIN_MAX], struct vm_error *err)
{
	struct mem_layer *l = mem_layer_get(top);
	int n = 0;

	for (;;) {
		struct mem_layer *flat, *parent = NULL;

		pthread_mutex_lock(&l->lock);
		flat = mem_layer_get(l->flat);
		if (!flat)
			parent = mem_layer_get(l->parent);
		pthread_mutex_unlock(&l->lock);
		if (flat) {	/* a flat layer is full */
			mem_layer_put(l);
			l = flat;
		}
		chain[n++] = l;
		if (l->kind == MEM_LAYER_FULL)
			return n;
		if (!parent || n == CHAIN_MAX) {
			mem_layer_put(parent);
			chain_put(chain, n);
			if (!parent)
				return vm_error_set(err, EINVAL, "internal: a diff memory layer without its parent");
			return vm_error_set(err, ELOOP, "memory layer chain deeper than %d", CHAIN_MAX);
		}
		l = parent;
	}
}

int mem_layer_chain_depth(struct mem_layer *l)
{
	struct mem_layer *chain[CHAIN_MAX];
	struct vm_error err;
	int depth = chain_collect(l, chain, &err);

	if (depth > 0)
		chain_put(chain, depth);
	return depth < 0 ? CHAIN_MAX : depth;
}

void mem_layer_find_base(struct mem_layer *top, struct mem_layer_base *b)
{
	struct mem_layer *l = mem_layer_get(top);

	memset(b, 0, sizeof(*b));
	while (l) {
		struct mem_layer *parent;
		int on_disk;

		pthread_mutex_lock(&l->lock);
		on_disk = l->dir != NULL;
		if (on_disk && l->disk_depth < MEM_LAYER_MAX_DEPTH) {
			b->dir = strdup(l->dir);
			memcpy(b->snap_id, l->snap_id, SNAP_ID_SIZE);
			b->disk_depth = l->disk_depth;
		}
		parent = on_disk ? NULL : mem_layer_get(l->parent);
		pthread_mutex_unlock(&l->lock);
		if (on_disk) {
			/* The nearest layer on disk, or none: an older base would make the diff's walk grow by one a
			 * checkpoint once the nearest ones are deep on disk. */
			if (b->dir)	/* out of memory for it: written full */
				b->base = l;
			else
				mem_layer_put(l);
			break;
		}
		if (b->n == MEM_LAYER_MAX_DEPTH) {	/* too far down: a diff would be most of a full write */
			mem_layer_put(parent);
			mem_layer_put(l);
			break;
		}
		b->above[b->n++] = l;
		l = parent;	/* NULL: a full layer or a cut chain, not on disk; the write is full */
	}
	if (!b->base) {	/* a full write needs none of them */
		chain_put(b->above, b->n);
		b->n = 0;
	}
}

void mem_layer_base_put(struct mem_layer_base *b)
{
	chain_put(b->above, b->n);
	mem_layer_put(b->base);
	free(b->dir);
	memset(b, 0, sizeof(*b));
}

void *mem_layer_map(struct mem_layer *top, struct vm_error *err)
{
	struct mem_layer *chain[CHAIN_MAX];
	uint64_t pages = top->mem_size / SNAP_PAGE_SIZE;
	uint8_t *base;
	uint64_t off;
	int n = chain_collect(top, chain, err), fd;

	if (n < 0)
		return NULL;
	fd = source(chain[n - 1], &off, err);
	if (fd < 0) {
		chain_put(chain, n);
		return NULL;
	}
	base = mmap(NULL, top->mem_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, (off_t)off);
	close(fd);
	if (base == MAP_FAILED) {
		vm_error_set(err, errno, "cannot map guest memory from its snapshot layer: %s", strerror(errno));
		chain_put(chain, n);
		return NULL;
	}
	for (int i = n - 2; i >= 0; i--) {
		struct mem_layer *d = chain[i];

		fd = source(d, &off, err);
		if (fd < 0) {
			munmap(base, top->mem_size);
			chain_put(chain, n);
			return NULL;
		}

		for (uint64_t p = 0, run; (p = mem_layer_next_run(d->bitmap, pages, p, &run)) < pages;) {
			if (mmap(base + p * SNAP_PAGE_SIZE, run * SNAP_PAGE_SIZE, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_FIXED | MAP_NORESERVE, fd, (off_t)(off + p * SNAP_PAGE_SIZE)) == MAP_FAILED) {
				vm_error_set(err, errno, "cannot map a diff layer of guest memory: %s", strerror(errno));
				close(fd);
				munmap(base, top->mem_size);
				chain_put(chain, n);
				return NULL;
			}
			p += run;
		}
		close(fd);
	}
	chain_put(chain, n);	/* the mappings keep the files */
	return base;
}

static int is_zero(const uint8_t *p, size_t len)
{
	const uint64_t *q = (const uint64_t *)(const void *)p;

	for (size_t i = 0; i < len / 8; i++)
		if (q[i])
			return 0;
	return 1;
}

struct copy {
	int out;
	uint64_t out_offset;
	uint8_t *buf;
	uint64_t done, total, written;
	void (*progress)(void *, uint64_t, uint64_t);
	void *opaque;
};

/* A layer's pages where they are now, for reading; map, when not NULL, is all of them mapped read-only. */
struct layer_src {
	int fd;
	uint64_t data_offset, mem_size;
	const uint8_t *map;
};

/* Copies [off, off + len) of guest RAM from layer l; zero pages are skipped when skip_zero. */
static int copy_range(struct copy *c, const struct layer_src *l, uint64_t off, uint64_t len, int skip_zero,
		      struct vm_error *err)
{
	while (len && l->map && !skip_zero) {
		/* Straight from the layer's pages, no copy through the buffer (an O_DIRECT output reads them itself). */
		size_t n = len > COPY_CHUNK ? COPY_CHUNK : (size_t)len;
		int ret = file_pwrite_all(c->out, l->map + off, n, c->out_offset + off);

		if (ret < 0)
			return vm_error_set(err, -ret, "cannot write a memory layer: %s", strerror(-ret));
		c->written += n;
		off += n;
		len -= n;
		c->done += n;
		if (c->progress)
			c->progress(c->opaque, c->done, c->total);
	}
	while (len) {
		size_t n = len > COPY_CHUNK ? COPY_CHUNK : (size_t)len;
		int ret = file_pread_all(l->fd, c->buf, n, l->data_offset + off);

		if (ret < 0)
			return vm_error_set(err, -ret, "cannot read a memory layer: %s",
					    ret == -EIO ? "it ends early" : strerror(-ret));
		for (size_t at = 0; at < n; at += SNAP_PAGE_SIZE) {
			size_t run = 0;

			while (at + run < n && !(skip_zero && is_zero(c->buf + at + run, SNAP_PAGE_SIZE)))
				run += SNAP_PAGE_SIZE;
			if (run) {
				ret = file_pwrite_all(c->out, c->buf + at, run, c->out_offset + off + at);
				if (ret < 0)
					return vm_error_set(err, -ret, "cannot write a memory layer: %s", strerror(-ret));
				c->written += run;
				at += run - SNAP_PAGE_SIZE;	/* the page after the run was zero or past the end */
			}
		}
		off += n;
		len -= n;
		c->done += n;
		if (c->progress)
			c->progress(c->opaque, c->done, c->total);
	}
	return 0;
}

/* The data extents of a full layer (holes in a memfd or a sparse file are zero and skipped). */
static int copy_full(struct copy *c, const struct layer_src *l, struct vm_error *err)
{
	uint64_t off = 0;

	while (off < l->mem_size) {
		off_t data = lseek(l->fd, (off_t)(l->data_offset + off), SEEK_DATA), hole;
		uint64_t start, end;

		if (data < 0) {
			if (errno == ENXIO)
				break;		/* nothing but holes from here */
			return vm_error_set(err, errno, "cannot read a memory layer: %s", strerror(errno));
		}
		hole = lseek(l->fd, data, SEEK_HOLE);
		if (hole < 0)
			return vm_error_set(err, errno, "cannot read a memory layer: %s", strerror(errno));
		start = ((uint64_t)data - l->data_offset) & ~(SNAP_PAGE_SIZE - 1);
		end = (uint64_t)hole - l->data_offset;
		if (end > l->mem_size)
			end = l->mem_size;
		end = (end + SNAP_PAGE_SIZE - 1) & ~(SNAP_PAGE_SIZE - 1);
		if (end <= start)
			break;
		if (copy_range(c, l, start, end - start, 1, err) < 0)
			return -1;
		off = end;
	}
	return 0;
}

/* Copies the layers chain[0..n) (newest first; a full one only last) into fd; see mem_layer_copy. */
static int copy_layers(struct mem_layer *const *chain, int n, int fd, uint64_t data_offset, uint8_t *bitmap_out,
		       uint64_t *pages_out, uint64_t *bytes_out, void (*progress)(void *, uint64_t, uint64_t),
		       void *opaque, struct vm_error *err)
{
	uint64_t pages = chain[0]->mem_size / SNAP_PAGE_SIZE;
	struct copy c = { .out = fd, .out_offset = data_offset, .progress = progress, .opaque = opaque };
	int ret = 0;

	c.buf = aligned_alloc(SNAP_PAGE_SIZE, COPY_CHUNK);	/* page-aligned: the output may be O_DIRECT */
	if (!c.buf)
		return vm_error_set(err, ENOMEM, "out of memory for copying a memory layer");
	for (int i = 0; i < n; i++)
		c.total += chain[i]->kind == MEM_LAYER_FULL ? chain[i]->mem_size : chain[i]->pages * SNAP_PAGE_SIZE;
	if (bitmap_out)
		memset(bitmap_out, 0, (size_t)((pages + 7) / 8));

	for (int i = n - 1; i >= 0 && !ret; i--) {	/* oldest first: newer layers overwrite */
		struct mem_layer *l = chain[i];
		struct layer_src src = { .mem_size = l->mem_size };
		void *map;

		src.fd = source(l, &src.data_offset, err);
		if (src.fd < 0) {
			ret = -1;
			break;
		}
		if (l->kind == MEM_LAYER_FULL) {
			ret = copy_full(&c, &src, err);
			close(src.fd);
			continue;
		}
		/* A diff's pages are all there (its bitmap says which): mapped, they are written without a copy. */
		map = mmap(NULL, (size_t)l->mem_size, PROT_READ, MAP_SHARED, src.fd, (off_t)src.data_offset);
		src.map = map == MAP_FAILED ? NULL : map;	/* else read through the buffer */
		for (uint64_t p = 0, run; !ret && (p = mem_layer_next_run(l->bitmap, pages, p, &run)) < pages;) {
			for (uint64_t k = 0; bitmap_out && k < run; k++)
				mem_layer_set(bitmap_out, p + k);
			ret = copy_range(&c, &src, p * SNAP_PAGE_SIZE, run * SNAP_PAGE_SIZE, 0, err);
			p += run;
		}
		if (src.map)
			munmap(map, (size_t)l->mem_size);
		close(src.fd);
	}
	free(c.buf);
	if (ret < 0)
		return ret;
	if (pages_out) {
		*pages_out = pages;
		if (bitmap_out)
			*pages_out = mem_layer_count(bitmap_out, pages);
	}
	if (bytes_out)
		*bytes_out = c.written;
	return 0;
}

int mem_layer_copy(struct mem_layer *top, struct mem_layer *base, int fd, uint64_t data_offset, uint8_t *bitmap_out,
		   uint64_t *pages_out, uint64_t *bytes_out, void (*progress)(void *, uint64_t, uint64_t),
		   void *opaque, struct vm_error *err)
{
	struct mem_layer *chain[CHAIN_MAX];
	int n = 0, ret;

	if (base) {
		/* The layers strictly above base, on the chain as it was made (flattening would hide base). */
		for (struct mem_layer *l = mem_layer_get(top); l != base; l = mem_layer_parent(l)) {
			if (!l || l->kind != MEM_LAYER_DIFF || n == CHAIN_MAX) {
				mem_layer_put(l);
				chain_put(chain, n);
				return vm_error_set(err, EINVAL, "internal: the base layer is not below the top layer");
			}
			chain[n++] = l;
		}
		mem_layer_put(base);	/* the walk's reference to it */
		if (!n)
			return vm_error_set(err, EINVAL, "internal: the base layer is the top layer");
	} else {
		n = chain_collect(top, chain, err);
		if (n < 0)
			return -1;
	}
	ret = copy_layers(chain, n, fd, data_offset, bitmap_out, pages_out, bytes_out, progress, opaque, err);
	chain_put(chain, n);
	return ret;
}

int mem_layer_copy_diff(const struct mem_layer_base *b, int fd, uint64_t data_offset, uint8_t *bitmap_out,
			uint64_t *pages_out, uint64_t *bytes_out, void (*progress)(void *, uint64_t, uint64_t),
			void *opaque, struct vm_error *err)
{
	if (!b->base || !b->n)
		return vm_error_set(err, EINVAL, "internal: a diff without a base or without layers above it");
	return copy_layers(b->above, b->n, fd, data_offset, bitmap_out, pages_out, bytes_out, progress, opaque, err);
}

static void *flatten_thread(void *arg)
{
	struct mem_layer *l = arg, *flat;
	struct vm_error err;
	int fd = memfd_create("smol-guest-ram-flat", MFD_CLOEXEC);

	if (fd >= 0 && ftruncate(fd, (off_t)l->mem_size) == 0 &&
	    mem_layer_copy(l, NULL, fd, 0, NULL, NULL, NULL, NULL, NULL, &err) == 0) {
		flat = mem_layer_new(fd, MEM_LAYER_FULL, l->mem_size, 0, NULL, NULL, &err);
		fd = -1;
		pthread_mutex_lock(&l->lock);
		if (flat && !l->flat)
			l->flat = flat;
		else
			mem_layer_put(flat);
		pthread_mutex_unlock(&l->lock);
		cut_below(l);	/* the layers below now serve only whoever else holds them */
	}
	if (fd >= 0)
		close(fd);	/* out of memory: the chain stays as it is, only slower to map */
	pthread_mutex_lock(&l->lock);
	l->flattening = 0;
	pthread_mutex_unlock(&l->lock);
	mem_layer_put(l);
	return NULL;
}

void mem_layer_flatten_async(struct mem_layer *l)
{
	pthread_t thread;
	pthread_attr_t attr;

	if (mem_layer_chain_depth(l) <= MEM_LAYER_MAX_DEPTH)
		return;
	pthread_mutex_lock(&l->lock);
	if (l->flat || l->flattening) {
		pthread_mutex_unlock(&l->lock);
		return;
	}
	l->flattening = 1;
	pthread_mutex_unlock(&l->lock);
	mem_layer_get(l);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&thread, &attr, flatten_thread, l)) {
		pthread_mutex_lock(&l->lock);
		l->flattening = 0;
		pthread_mutex_unlock(&l->lock);
		mem_layer_put(l);
	}
	pthread_attr_destroy(&attr);
}
