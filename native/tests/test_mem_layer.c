/* Memory layers without KVM: chains of memfds mapped copy-on-write, copied out, flattened, moved to files. */
#define _GNU_SOURCE
#include "test.h"
#include "error.h"
#include "guest_mem.h"
#include "mem_layer.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MIB (1ULL << 20)
#define PAGE 4096ULL
#define SIZE (4 * MIB)
#define PAGES (SIZE / PAGE)

/* A memfd of SIZE where each page p in `pages` starts with the value `tag * 1000 + p`. */
static int layer_fd(uint64_t tag, const uint64_t *pages, int n)
{
	int fd = memfd_create("test-layer", MFD_CLOEXEC);

	if (fd < 0 || ftruncate(fd, SIZE) < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		uint64_t v = tag * 1000 + pages[i];

		if (pwrite(fd, &v, sizeof(v), (off_t)(pages[i] * PAGE)) != sizeof(v))
			return -1;
	}
	return fd;
}

static struct mem_layer *diff(struct mem_layer *parent, uint64_t tag, const uint64_t *pages, int n)
{
	uint8_t bitmap[PAGES / 8] = { 0 };
	struct vm_error err = { 0 };

	for (int i = 0; i < n; i++)
		mem_layer_set(bitmap, pages[i]);
	return mem_layer_new(layer_fd(tag, pages, n), MEM_LAYER_DIFF, SIZE, 0, bitmap, parent, &err);
}

/* Open fds of this process (the runner's own stay open throughout a test). */
static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n - 3;	/* ".", ".." and the directory's own fd */
}

static uint64_t word(const uint8_t *ram, uint64_t page)
{
	uint64_t v;

	memcpy(&v, ram + page * PAGE, sizeof(v));
	return v;
}

/* full: pages 1, 2, 3 tagged 1; diff a: 2, 5 tagged 2; diff b: 3, 5 tagged 3. */
static struct mem_layer *three_layers(struct mem_layer **full_out)
{
	static const uint64_t full_pages[] = { 1, 2, 3 }, a_pages[] = { 2, 5 }, b_pages[] = { 3, 5 };
	struct vm_error err = { 0 };
	struct mem_layer *full = mem_layer_new(layer_fd(1, full_pages, 3), MEM_LAYER_FULL, SIZE, 0, NULL, NULL, &err);
	struct mem_layer *a = diff(full, 2, a_pages, 2), *b = diff(a, 3, b_pages, 2);

	mem_layer_put(a);
	*full_out = full;
	return b;
}

static void check_three(const uint8_t *ram)
{
	CHECK_EQ_INT(word(ram, 0), 0);
	CHECK_EQ_INT(word(ram, 1), 1001);
	CHECK_EQ_INT(word(ram, 2), 2002);	/* a over full */
	CHECK_EQ_INT(word(ram, 3), 3003);	/* b over full */
	CHECK_EQ_INT(word(ram, 5), 3005);	/* b over a */
	CHECK_EQ_INT(word(ram, PAGES - 1), 0);
}

TEST(a_chain_maps_with_the_newest_layer_on_top_and_writes_stay_private)
{
	struct vm_error err = { 0 };
	struct mem_layer *full, *top = three_layers(&full);
	uint8_t *ram = mem_layer_map(top, &err), *again;

	REQUIRE(ram);
	CHECK_EQ_INT(top->depth, 3);
	check_three(ram);
	memset(ram + 2 * PAGE, 0xee, PAGE);	/* a private write: no layer and no other mapping sees it */
	again = mem_layer_map(top, &err);
	REQUIRE(again);
	check_three(again);
	munmap(ram, SIZE);
	munmap(again, SIZE);
	mem_layer_put(top);
	mem_layer_put(full);
}

TEST(copying_a_chain_gives_its_contents_full_or_above_a_base)
{
	struct vm_error err = { 0 };
	struct mem_layer *full, *top = three_layers(&full);
	uint8_t bitmap[PAGES / 8];
	uint64_t pages = 0, bytes = 0;
	int out = memfd_create("test-out", MFD_CLOEXEC);
	uint8_t *copy;

	REQUIRE(out >= 0 && ftruncate(out, SIZE + PAGE) == 0);
	REQUIRE(mem_layer_copy(top, NULL, out, PAGE, NULL, &pages, &bytes, NULL, NULL, &err) == 0);
	CHECK_EQ_INT(pages, PAGES);
	copy = mmap(NULL, SIZE + PAGE, PROT_READ, MAP_SHARED, out, 0);
	REQUIRE(copy != MAP_FAILED);
	check_three(copy + PAGE);
	munmap(copy, SIZE + PAGE);
	close(out);

	/* Above the full layer: only the diffs' pages (2, 3, 5), newest winning. */
	out = memfd_create("test-out", MFD_CLOEXEC);
	REQUIRE(out >= 0 && ftruncate(out, SIZE) == 0);
	REQUIRE(mem_layer_copy(top, full, out, 0, bitmap, &pages, &bytes, NULL, NULL, &err) == 0);
	CHECK_EQ_INT(pages, 3);
	CHECK(mem_layer_test(bitmap, 2) && mem_layer_test(bitmap, 3) && mem_layer_test(bitmap, 5));
	CHECK(!mem_layer_test(bitmap, 1));
	copy = mmap(NULL, SIZE, PROT_READ, MAP_SHARED, out, 0);
	REQUIRE(copy != MAP_FAILED);
	CHECK_EQ_INT(word(copy, 1), 0);
	CHECK_EQ_INT(word(copy, 2), 2002);
	CHECK_EQ_INT(word(copy, 5), 3005);
	munmap(copy, SIZE);
	close(out);
	CHECK(mem_layer_copy(full, top, out, 0, NULL, NULL, NULL, NULL, NULL, &err) < 0);	/* top is not below */
	mem_layer_put(top);
	mem_layer_put(full);
}

TEST(a_chain_deeper_than_eight_is_flattened_in_the_background)
{
	struct vm_error err = { 0 };
	struct mem_layer *full, *top = three_layers(&full), *flat;
	uint8_t *ram;

	for (uint64_t gen = 4; gen <= 12; gen++) {
		uint64_t page = 10 + gen;
		struct mem_layer *next = diff(top, gen, &page, 1);

		mem_layer_put(top);
		top = next;
		mem_layer_flatten_async(top);
	}
	CHECK_EQ_INT(top->depth, 12);
	/* Some layer deeper than 8 gets a flat copy (which one depends on timing: once one has, those above it are
	 * no longer deep and are left alone). */
	flat = NULL;
	for (int i = 0; i < 2000 && !flat; i++) {	/* up to 10 s */
		for (struct mem_layer *l = mem_layer_get(top), *below; l && !flat; l = below) {
			pthread_mutex_lock(&l->lock);
			flat = l->flat;
			pthread_mutex_unlock(&l->lock);
			below = flat ? NULL : mem_layer_parent(l);
			if (flat)
				CHECK(!mem_layer_parent(l));	/* flattened: its chain below was let go */
			mem_layer_put(l);
		}
		if (!flat)
			nanosleep(&(struct timespec){ .tv_nsec = 5000000 }, NULL);
	}
	REQUIRE(flat);
	CHECK_EQ_INT(flat->kind, MEM_LAYER_FULL);
	ram = mem_layer_map(top, &err);	/* now one mapping of the flat layer */
	REQUIRE(ram);
	check_three(ram);
	CHECK_EQ_INT(word(ram, 22), 12022);
	CHECK_EQ_INT(word(ram, 14), 4014);
	munmap(ram, SIZE);
	mem_layer_put(top);
	mem_layer_put(full);
}

TEST(a_layer_moved_to_a_file_reads_the_same)
{
	struct vm_error err = { 0 };
	struct mem_layer *full, *top = three_layers(&full);
	char path[] = "/tmp/smol-test-layer-XXXXXX";
	int file = mkstemp(path);
	uint8_t *ram;

	REQUIRE(file >= 0);
	unlink(path);
	REQUIRE(ftruncate(file, 2 * PAGE + SIZE) == 0);
	REQUIRE(mem_layer_copy(top, NULL, file, 2 * PAGE, NULL, NULL, NULL, NULL, NULL, &err) == 0);
	mem_layer_adopt_file(top, file, 2 * PAGE);	/* top's pages now come from the file, at its offset */
	ram = mem_layer_map(top, &err);
	REQUIRE(ram);
	check_three(ram);
	munmap(ram, SIZE);
	mem_layer_put(top);
	mem_layer_put(full);
}

TEST(the_vmm_marks_the_pages_it_writes_dirty)
{
	struct vm_error err = { 0 };
	struct mem_layer *full, *top = three_layers(&full);
	struct guest_mem mem;

	REQUIRE(guest_mem_init_layer(&mem, top, &err) == 0);
	check_three(mem.host);
	guest_mem_mark_dirty(&mem, 5 * PAGE + 100, 2 * PAGE);	/* pages 5, 6 and 7 */
	guest_mem_mark_dirty(&mem, SIZE + 5, 10);			/* not RAM: ignored */
	CHECK_EQ_INT(mem.vmm_dirty[0], (1u << 5) | (1u << 6) | (1u << 7));
	CHECK_EQ_INT(guest_mem_page(&mem, SIZE), -1);
	guest_mem_exit(&mem);
	mem_layer_put(top);
	mem_layer_put(full);
}

TEST(a_chain_the_vm_keeps_adding_to_stays_bounded_in_layers_and_fds)
{
	struct vm_error err = { 0 };
	struct mem_layer *full, *top = three_layers(&full);
	int fds;
	uint8_t *ram;

	mem_layer_put(full);	/* as a VM holds it: only its top */
	fds = open_fds();
	for (uint64_t gen = 4; gen <= 300; gen++) {
		uint64_t page = 10 + gen % 200;
		struct mem_layer *next = diff(top, gen, &page, 1);

		REQUIRE(next);
		mem_layer_put(top);
		top = next;
		mem_layer_flatten_async(top);
		if (gen % 50 == 0)	/* let the flattening catch up now and then, as checkpoints a second apart do */
			for (int i = 0; i < 2000 && mem_layer_chain_depth(top) > MEM_LAYER_MAX_DEPTH; i++)
				nanosleep(&(struct timespec){ .tv_nsec = 5000000 }, NULL);
	}
	for (int i = 0; i < 2000 && mem_layer_chain_depth(top) > MEM_LAYER_MAX_DEPTH + 1; i++)
		nanosleep(&(struct timespec){ .tv_nsec = 5000000 }, NULL);
	CHECK(mem_layer_chain_depth(top) <= MEM_LAYER_MAX_DEPTH + 1);
	/*
	 * The layers below the newest flat copy were freed: a few memfds open, not 300. Flatten threads still running
	 * (a busy host: CI ran this beside other work) hold their layers until they end, so wait for them, 10 s at most.
	 */
	for (int i = 0; i < 2000 && open_fds() > fds + 2 * MEM_LAYER_MAX_DEPTH + 4; i++)
		nanosleep(&(struct timespec){ .tv_nsec = 5000000 }, NULL);
	CHECK(open_fds() <= fds + 2 * MEM_LAYER_MAX_DEPTH + 4);
	ram = mem_layer_map(top, &err);
	REQUIRE(ram);
	CHECK_EQ_INT(word(ram, 1), 1001);
	CHECK_EQ_INT(word(ram, 5), 3005);
	for (uint64_t gen = 101; gen <= 300; gen++)	/* the newest write of each page 10 + gen % 200 */
		CHECK_EQ_INT(word(ram, 10 + gen % 200), gen * 1000 + 10 + gen % 200);
	munmap(ram, SIZE);
	mem_layer_put(top);
}

TEST(a_layer_written_full_becomes_its_own_flat_copy_and_lets_its_chain_go)
{
	struct vm_error err = { 0 };
	struct mem_layer *full, *top = three_layers(&full), *parent;
	struct mem_layer_base b;
	char path[] = "/tmp/smol-test-full-XXXXXX";
	int file = mkstemp(path), fds;
	uint8_t *ram;

	REQUIRE(file >= 0);
	unlink(path);
	REQUIRE(ftruncate(file, PAGE + SIZE) == 0);
	mem_layer_find_base(top, &b);	/* nothing on disk: full */
	CHECK(!b.base);
	CHECK_EQ_INT(b.n, 0);
	REQUIRE(mem_layer_copy(top, NULL, file, PAGE, NULL, NULL, NULL, NULL, NULL, &err) == 0);
	mem_layer_put(full);
	fds = open_fds();
	mem_layer_adopt_full_file(top, file, PAGE, "/snapshots/sn-1", (const uint8_t *)"0123456789abcdef");
	CHECK(!mem_layer_parent(top));
	CHECK_EQ_INT(open_fds(), fds - 2);	/* full's and a's memfds closed; the file is now top's flat */
	CHECK_EQ_INT(mem_layer_chain_depth(top), 1);
	ram = mem_layer_map(top, &err);
	REQUIRE(ram);
	check_three(ram);
	munmap(ram, SIZE);

	/* The next diff goes over it, its chain on disk two long. */
	{
		uint64_t page = 40;
		struct mem_layer *next = diff(top, 4, &page, 1);

		mem_layer_find_base(next, &b);
		CHECK(b.base == top);
		CHECK_EQ_INT(b.n, 1);
		CHECK(b.above[0] == next);
		CHECK_EQ_INT(b.disk_depth, 1);
		CHECK_STR_CONTAINS(b.dir, "/snapshots/sn-1");
		mem_layer_base_put(&b);

		/* Its chain on disk as long as a diff may make it: the next write is full, not over an older base. */
		pthread_mutex_lock(&top->lock);
		top->disk_depth = MEM_LAYER_MAX_DEPTH;
		pthread_mutex_unlock(&top->lock);
		mem_layer_find_base(next, &b);
		CHECK(!b.base);
		CHECK_EQ_INT(b.n, 0);
		mem_layer_base_put(&b);
		parent = mem_layer_parent(next);
		CHECK(parent == top);
		mem_layer_put(parent);
		mem_layer_put(next);
	}
	mem_layer_put(top);
}
