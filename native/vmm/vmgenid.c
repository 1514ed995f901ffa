/* The VM generation ID's state codec (vmgenid.h, docs/snapshots.md). */
#include "vmgenid.h"
#include "le_codec.h"

void vmgenid_state_encode(const struct vmgenid_state *s, struct le_writer *w)
{
	le_put_u64(w, s->addr);
	le_put_u32(w, s->gsi);
	le_put_u32(w, 0);
}

const char *vmgenid_state_decode(const uint8_t *data, size_t len, struct vmgenid_state *s)
{
	struct le_reader r;

	le_reader_init(&r, data, len);
	s->addr = le_get_u64(&r);
	s->gsi = le_get_u32(&r);
	le_get_zeros(&r, 4, "the reserved bytes are not zero");
	return le_finish(&r);
}
