/* Split virtqueues (virtio 1.2, 2.7): taking descriptor chains from the avail ring and returning them used. */
#include "guest_mem.h"
#include "virtio.h"

#include <string.h>

struct virtq_desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags;
	uint16_t next;
};

_Static_assert(sizeof(struct virtq_desc) == 16, "virtq_desc is 16 bytes");

static uint64_t desc_bytes(const struct virtq *q)
{
	return 16ULL * q->num;
}

static uint64_t avail_bytes(const struct virtq *q)
{
	return 6 + 2ULL * q->num;	/* flags, idx, ring[num], used_event */
}

static uint64_t used_bytes(const struct virtq *q)
{
	return 6 + 8ULL * q->num;	/* flags, idx, ring[num] of {id, len}, avail_event */
}

const char *virtq_check_layout(const struct virtq *q, const struct guest_mem *mem)
{
	if (!q->num || q->num > VIRTQ_MAX_SIZE || (q->num & (q->num - 1)))
		return "queue size is not a power of two up to 256";
	if ((q->desc & 15) || (q->avail & 1) || (q->used & 3))
		return "a ring is not aligned (descriptors 16, driver area 2, device area 4 bytes)";
	if (!guest_mem_ptr(mem, q->desc, desc_bytes(q)))
		return "the descriptor table is not in guest RAM";
	if (!guest_mem_ptr(mem, q->avail, avail_bytes(q)))
		return "the driver area (avail ring) is not in guest RAM";
	if (!guest_mem_ptr(mem, q->used, used_bytes(q)))
		return "the device area (used ring) is not in guest RAM";
	return NULL;
}

static int broken(struct virtq *q, const char **why, const char *reason)
{
	q->broken = 1;
	if (why)
		*why = reason;
	return -1;
}

int virtq_pop(struct virtq *q, struct guest_mem *mem, struct virtq_chain *c, const char **why)
{
	const struct virtq_desc *table;
	const uint8_t *avail;
	uint16_t avail_idx, pending, head, idx, ring;
	const char *layout;

	if (q->broken)
		return broken(q, why, "the queue is broken");
	if (!q->ready)
		return 0;
	layout = virtq_check_layout(q, mem);
	if (layout)
		return broken(q, why, layout);
	table = guest_mem_ptr(mem, q->desc, desc_bytes(q));
	avail = guest_mem_ptr(mem, q->avail, avail_bytes(q));
	avail_idx = __atomic_load_n((const uint16_t *)(const void *)(avail + 2), __ATOMIC_ACQUIRE);
	pending = (uint16_t)(avail_idx - q->last_avail);	/* free-running u16 indices: wrap-around is normal */
	if (!pending)
		return 0;
	if (pending > q->num)
		return broken(q, why, "the avail index ran more than the queue size ahead");
	memcpy(&ring, avail + 4 + 2 * (q->last_avail % q->num), 2);
	head = ring;
	if (head >= q->num)
		return broken(q, why, "an avail ring entry names a descriptor past the end of the table");

	c->head = head;
	c->n = 0;
	c->out_len = c->in_len = 0;
	idx = head;
	for (;;) {
		struct virtq_desc d;

		if (c->n == q->num)	/* more descriptors than the table has: the chain loops */
			return broken(q, why, "a descriptor chain is longer than the queue (a loop?)");
		memcpy(&d, &table[idx], sizeof(d));
		if (d.flags & VIRTQ_DESC_F_INDIRECT)
			return broken(q, why, "an indirect descriptor (not offered)");
		if (!guest_mem_ptr(mem, d.addr, d.len))
			return broken(q, why, "a descriptor's buffer is not in guest RAM");
		if (d.flags & VIRTQ_DESC_F_WRITE) {
			c->in_len += d.len;
		} else {
			if (c->in_len)
				return broken(q, why, "a device-readable descriptor follows a writable one");
			c->out_len += d.len;
		}
		c->buf[c->n++] = (struct virtq_buf){ .gpa = d.addr, .len = d.len, .write = !!(d.flags & VIRTQ_DESC_F_WRITE) };
		if (!(d.flags & VIRTQ_DESC_F_NEXT))
			break;
		if (d.next >= q->num)
			return broken(q, why, "a descriptor's next is past the end of the table");
		idx = d.next;
	}
	q->last_avail++;
	return 1;
}

int virtq_push(struct virtq *q, struct guest_mem *mem, uint16_t head, uint32_t len)
{
	uint8_t *used = guest_mem_ptr(mem, q->used, used_bytes(q));
	uint32_t elem[2] = { head, len };

	if (!used || !q->num)
		return -1;
	memcpy(used + 4 + 8 * (q->used_idx % q->num), elem, sizeof(elem));
	q->used_idx++;
	/* The element before the index: the driver reads the index, then the element. */
	__atomic_store_n((uint16_t *)(void *)(used + 2), q->used_idx, __ATOMIC_RELEASE);
	guest_mem_mark_dirty(mem, q->used, used_bytes(q));
	return 0;
}

static uint64_t chain_copy(const struct virtq_chain *c, struct guest_mem *mem, int write, uint64_t off, uint8_t *host,
			   uint64_t len)
{
	uint64_t done = 0;

	for (uint16_t i = 0; i < c->n && done < len; i++) {
		const struct virtq_buf *b = &c->buf[i];
		uint64_t n;
		uint8_t *p;

		if (b->write != write)
			continue;
		if (off >= b->len) {
			off -= b->len;
			continue;
		}
		n = b->len - off < len - done ? b->len - off : len - done;
		p = guest_mem_ptr(mem, b->gpa + off, n);
		if (!p)
			break;
		if (write) {
			memcpy(p, host + done, n);
			guest_mem_mark_dirty(mem, b->gpa + off, n);
		} else {
			memcpy(host + done, p, n);
		}
		done += n;
		off = 0;
	}
	return done;
}

uint64_t virtq_chain_read(const struct virtq_chain *c, struct guest_mem *mem, uint64_t off, void *dst, uint64_t len)
{
	return chain_copy(c, mem, 0, off, dst, len);
}

uint64_t virtq_chain_write(const struct virtq_chain *c, struct guest_mem *mem, uint64_t off, const void *src,
			   uint64_t len)
{
	return chain_copy(c, mem, 1, off, (uint8_t *)(uintptr_t)src, len);
}
