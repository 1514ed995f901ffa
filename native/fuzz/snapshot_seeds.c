/*
 * Writes the seed corpus of fuzz_snapshot into DIR: valid state blobs (1 and 2 vCPUs, with and without a parent,
 * UART FIFO on and off, every device's section together and each alone) and valid memory layer headers (full, small diff, diff with a bitmap past the first page).
 * Usage: snapshot_seeds DIR
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snap_sample.h"
#include "snapfile.h"

#define MIB (1ULL << 20)

static int write_file(const char *dir, const char *name, const uint8_t *data, size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
		fprintf(stderr, "snapshot_seeds: cannot write %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

static int write_state(const char *dir, const char *name, struct snap_sample *sp)
{
	size_t len;
	uint8_t *blob = sample_build(sp, &len);
	int r = blob ? write_file(dir, name, blob, len) : -1;

	free(blob);
	sample_free(sp);
	return r;
}

static int write_layer(const char *dir, const char *name, uint32_t kind, uint64_t mem_size, uint64_t step)
{
	struct mem_layer_header h = { .kind = kind, .mem_size = mem_size };
	uint64_t pages = mem_size / SNAP_PAGE_SIZE;
	uint8_t *bitmap = calloc(1, (size_t)(pages / 8)), *buf;
	int r = -1;

	h.data_offset = mem_layer_data_offset(kind, mem_size);
	h.pages = kind == MEM_LAYER_FULL ? pages : 0;
	memset(h.id, 0x44, sizeof(h.id));
	for (uint64_t p = 0; kind == MEM_LAYER_DIFF && p < pages; p += step) {
		bitmap[p / 8] |= (uint8_t)(1 << (p % 8));
		h.pages++;
	}
	buf = malloc((size_t)h.data_offset);
	if (bitmap && buf) {
		mem_layer_header_encode(&h, bitmap, buf);
		r = write_file(dir, name, buf, (size_t)h.data_offset);
	}
	free(buf);
	free(bitmap);
	return r;
}

int main(int argc, char **argv)
{
	/* com1 with the FIFO off and one byte received, as a 16450-mode driver leaves it. */
	static const uint8_t fifo_off[] = { 4, 'c', 'o', 'm', '1', 0x01, 0x03, 0x08, 0x02, 0, 12, 0, 0x00, 0, 1, 'x' };
	struct snap_sample sp;
	int r = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: snapshot_seeds DIR\n");
		return 2;
	}
	sample_init(&sp, 1, 64 * MIB, NULL);
	r |= write_state(argv[1], "state-1-vcpu", &sp);
	sample_init(&sp, 2, 256 * MIB, "../base");
	r |= write_state(argv[1], "state-2-vcpus-parent", &sp);
	sample_init(&sp, 1, 1 * MIB, NULL);
	sample_set(&sp, SNAP_DEVICE, 0, fifo_off, sizeof(fifo_off));
	r |= write_state(argv[1], "state-uart-fifo-off", &sp);
	/* Every device's section: all in one blob, and each alone (com1 is in every blob). */
	sample_init(&sp, 1, 64 * MIB, NULL);
	sample_add_devices(&sp);
	r |= write_state(argv[1], "state-every-device", &sp);
	for (int i = 0; i < SAMPLE_NR_DEVICES; i++) {
		char name[64];

		if (!strcmp(sample_device_names[i], "com1"))
			continue;
		sample_init(&sp, 1, 64 * MIB, NULL);
		sample_add_device_state(&sp, sample_device_names[i]);
		snprintf(name, sizeof(name), "state-device-%s", sample_device_names[i]);
		r |= write_state(argv[1], name, &sp);
	}
	r |= write_layer(argv[1], "layer-full", MEM_LAYER_FULL, 64 * MIB, 1);
	r |= write_layer(argv[1], "layer-diff-1-mib", MEM_LAYER_DIFF, 1 * MIB, 3);
	r |= write_layer(argv[1], "layer-diff-256-mib", MEM_LAYER_DIFF, 256 * MIB, 4099);
	return r ? 1 : 0;
}
