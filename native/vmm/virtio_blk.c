/*
 * virtio-blk (virtio 1.2, 5.2) over a disk layer chain: reads, writes, flush and the device id. A request the
 * device cannot carry out (an I/O error on the host, sectors past the end, a write to a read-only disk, a length
 * that is not whole sectors) is answered IOERR; a request without a header or a status byte breaks the queue.
 * Data moves straight between the disk files and guest RAM, one checked guest buffer at a time.
 */
#include "disk.h"
#include "error.h"
#include "guest_mem.h"
#include "le_codec.h"
#include "virtio.h"

#include <string.h>

#define BLK_HEADER 16

_Static_assert(VIRTIO_BLK_PATH_MAX == DISK_PATH_MAX && sizeof(((struct virtio_blk_state *)0)->layer_id) ==
	       DISK_ID_SIZE, "a virtio-blk state holds a disk layer's path and id");

static uint64_t blk_features(void *dev)
{
	struct virtio_blk *b = dev;

	return (1ULL << VIRTIO_BLK_F_SEG_MAX) | (1ULL << VIRTIO_BLK_F_FLUSH) |
	       (b->disk->read_only ? 1ULL << VIRTIO_BLK_F_RO : 0);
}

/* Config space: capacity (u64, 512-byte sectors), size_max (u32, 0: none), seg_max (u32). */
static void blk_config_read(void *dev, uint32_t off, uint8_t *data, uint32_t len)
{
	struct virtio_blk *b = dev;
	uint8_t config[16] = { 0 };
	uint64_t capacity = b->disk->size / DISK_SECTOR;
	uint32_t seg_max = VIRTIO_BLK_SEG_MAX;

	memcpy(config, &capacity, 8);
	memcpy(config + 12, &seg_max, 4);
	memcpy(data, config + off, len);
}

/*
 * Moves the part [start, start + len) of a chain's readable (`write` 0) or writable stream between guest RAM and
 * the disk at `disk_off`. Returns 0, or -1 on a disk error.
 */
static int blk_transfer(struct virtio_blk *b, struct guest_mem *mem, const struct virtq_chain *c, int write,
			uint64_t start, uint64_t len, uint64_t disk_off)
{
	struct vm_error err = { 0 };
	uint64_t pos = 0;

	for (uint16_t i = 0; i < c->n && len; i++) {
		const struct virtq_buf *buf = &c->buf[i];
		uint64_t skip, n;
		uint8_t *p;
		int ret;

		if (buf->write != write)
			continue;
		if (pos + buf->len <= start) {
			pos += buf->len;
			continue;
		}
		skip = start > pos ? start - pos : 0;
		n = buf->len - skip < len ? buf->len - skip : len;
		p = guest_mem_ptr(mem, buf->gpa + skip, n);	/* virtq_pop checked it; the mapping may have moved */
		if (!p)
			return -1;
		if (write) {
			ret = disk_read(b->disk, disk_off, p, n, &err);
			guest_mem_mark_dirty(mem, buf->gpa + skip, n);
		} else {
			ret = disk_write(b->disk, disk_off, p, n, &err);
		}
		if (ret < 0)
			return -1;
		disk_off += n;
		len -= n;
		pos += buf->len;
		start = pos;
	}
	return 0;
}

static int sectors_ok(const struct virtio_blk *b, uint64_t sector, uint64_t bytes)
{
	uint64_t sectors = b->disk->size / DISK_SECTOR;

	return bytes % DISK_SECTOR == 0 && sector <= sectors && bytes / DISK_SECTOR <= sectors - sector;
}

/* Serves one request; returns the status byte to write, and in `*used` the bytes written into the chain. */
static uint8_t blk_request(struct virtio_blk *b, struct guest_mem *mem, const struct virtq_chain *c, uint32_t *used)
{
	uint8_t hdr[BLK_HEADER], id[VIRTIO_BLK_ID_BYTES] = "smol-disk";
	uint32_t type;
	uint64_t sector, data;
	struct vm_error err = { 0 };

	virtq_chain_read(c, mem, 0, hdr, sizeof(hdr));
	memcpy(&type, hdr, 4);
	memcpy(&sector, hdr + 8, 8);
	*used = 1;
	switch (type) {
	case VIRTIO_BLK_T_IN:
		data = c->in_len - 1;
		if (!sectors_ok(b, sector, data) || blk_transfer(b, mem, c, 1, 0, data, sector * DISK_SECTOR) < 0)
			return VIRTIO_BLK_S_IOERR;
		*used = (uint32_t)(data + 1 > UINT32_MAX ? UINT32_MAX : data + 1);
		return VIRTIO_BLK_S_OK;
	case VIRTIO_BLK_T_OUT:
		data = c->out_len - BLK_HEADER;
		if (b->disk->read_only || !sectors_ok(b, sector, data) ||
		    blk_transfer(b, mem, c, 0, BLK_HEADER, data, sector * DISK_SECTOR) < 0)
			return VIRTIO_BLK_S_IOERR;
		return VIRTIO_BLK_S_OK;
	case VIRTIO_BLK_T_FLUSH:
		return disk_flush(b->disk, &err) < 0 ? VIRTIO_BLK_S_IOERR : VIRTIO_BLK_S_OK;
	case VIRTIO_BLK_T_GET_ID:
		if (b->id) {
			memset(id, 0, sizeof(id));
			memcpy(id, b->id, strnlen(b->id, sizeof(id)));
		}
		data = c->in_len - 1 < sizeof(id) ? c->in_len - 1 : sizeof(id);
		*used = (uint32_t)virtq_chain_write(c, mem, 0, id, data) + 1;
		return VIRTIO_BLK_S_OK;
	}
	return VIRTIO_BLK_S_UNSUPP;
}

static int blk_queue_work(struct virtio_mmio *t, int qi, const char **why)
{
	struct virtio_blk *b = t->dev;
	struct virtq *q = &t->q[qi];
	struct virtq_chain *c = &(struct virtq_chain){ 0 };
	int done = 0, ret;

	while ((ret = virtq_pop(q, t->mem, c, why)) > 0) {
		uint32_t used;
		uint8_t status;

		if (c->out_len < BLK_HEADER || c->in_len < 1) {
			*why = "a block request without its 16-byte header or its status byte";
			return -1;
		}
		status = blk_request(b, t->mem, c, &used);
		if (status == VIRTIO_BLK_S_IOERR)
			b->io_errors++;
		virtq_chain_write(c, t->mem, c->in_len - 1, &status, 1);	/* the status is the last byte */
		if (virtq_push(q, t->mem, c->head, used) < 0) {
			*why = "the used ring is not in guest RAM";
			return -1;
		}
		done = 1;
	}
	return ret < 0 ? -1 : done;
}

const struct virtio_dev_ops virtio_blk_ops = {
	.name = "virtio-blk",
	.device_id = VIRTIO_ID_BLOCK,
	.nr_queues = 1,
	.config_len = 16,
	.features = blk_features,
	.config_read = blk_config_read,
	.queue_work = blk_queue_work,
};

/* ---- state (docs/snapshots.md, "virtio devices") ---- */

void virtio_blk_state_encode(const struct virtio_blk_state *s, struct le_writer *w)
{
	size_t path_len = strlen(s->path);

	virtio_dev_state_encode(&s->dev, w);
	le_put_u8(w, s->writable);
	le_put_zeros(w, 7);
	le_put_u64(w, s->disk_size);
	le_put_bytes(w, s->layer_id, DISK_ID_SIZE);
	le_put_u16(w, (uint16_t)path_len);
	le_put_u16(w, 0);
	le_put_bytes(w, s->path, path_len);
}

const char *virtio_blk_state_decode(const uint8_t *data, size_t len, struct virtio_blk_state *s)
{
	struct le_reader r;
	uint16_t path_len;

	le_reader_init(&r, data, len);
	virtio_dev_state_decode(&r, &s->dev);
	s->writable = le_get_u8(&r);
	if (s->writable > 1)
		le_fail(&r, "the disk's writable flag is not 0 or 1");
	le_get_zeros(&r, 7, "the disk's reserved bytes are not zero");
	s->disk_size = le_get_u64(&r);
	le_get_bytes(&r, s->layer_id, DISK_ID_SIZE);
	path_len = le_get_u16(&r);
	le_get_zeros(&r, 2, "the disk's reserved bytes are not zero");
	if (!path_len || path_len > VIRTIO_BLK_PATH_MAX || path_len != le_remaining(&r))
		le_fail(&r, "the disk's path length does not match the section");
	s->path[0] = 0;
	if (r.error || r.truncated)
		return le_finish(&r);
	le_get_bytes(&r, s->path, path_len);
	s->path[path_len] = 0;
	if (strlen(s->path) != path_len)
		le_fail(&r, "the disk's path has a NUL in it");
	return le_finish(&r);
}
