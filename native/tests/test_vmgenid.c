/*
 * The VM generation ID device (vmgenid.c) on a VM without KVM: guest RAM and the device's hooks, with the two VM
 * functions it calls (vm_irq_line, vm_end) recorded here instead.
 */
#include "test.h"
#include "acpi.h"
#include "device.h"
#include "error.h"
#include "guest_mem.h"
#include "internal.h"
#include "snapfile.h"

#include <stdlib.h>
#include <string.h>

#define RAM (16ULL << 20)

/* What the device did to the VM's interrupt lines and whether it ended the VM. */
static struct {
	unsigned irq[8];
	int level[8];
	int n;
	int ended;
} seen;

int vm_irq_line(struct vm *vm, unsigned irq, int level)
{
	(void)vm;
	if (seen.n < 8) {
		seen.irq[seen.n] = irq;
		seen.level[seen.n] = level;
	}
	seen.n++;
	return 0;
}

void vm_end(struct vm *vm, enum vm_exit_reason reason, int code, const char *fmt, ...)
{
	(void)vm;
	(void)reason;
	(void)code;
	(void)fmt;
	seen.ended = 1;
}

static const struct device_type *vmgenid_type(void)
{
	for (const struct device_type *t = device_types(); t; t = t->next)
		if (strcmp(t->name, "vmgenid") == 0)
			return t;
	return NULL;
}

/* A VM with RAM whose every page starts clean in the VMM's dirty map, as after a checkpoint froze it. */
static struct vm *vm_with_ram(void)
{
	struct vm_error err = { 0 };
	struct vm *vm = calloc(1, sizeof(*vm));

	if (!vm || guest_mem_init(&vm->mem, RAM, &err) < 0) {
		test_fail(__FILE__, __LINE__, "no guest memory: %s", err.msg);
		free(vm);
		return NULL;
	}
	vm->mem.vmm_dirty = calloc(RAM / 4096 / 8, 1);
	memset(&seen, 0, sizeof(seen));
	return vm;
}

static void vm_free(struct vm *vm)
{
	guest_mem_exit(&vm->mem);	/* frees vmm_dirty too */
	free(vm);
}

static int page_dirty(const struct vm *vm, uint64_t gpa)
{
	uint64_t p = gpa / 4096;

	return (vm->mem.vmm_dirty[p / 8] >> (p % 8)) & 1;
}

TEST(a_booted_vm_has_a_random_generation_id_at_the_address_the_dsdt_gives)
{
	static const uint8_t zero[VMGENID_LEN];
	const struct device_type *t = vmgenid_type();
	struct vm_error err = { 0 };
	struct vm *a, *b;
	void *state = NULL;
	const uint8_t *id_a, *id_b;

	REQUIRE(t && t->setup);
	a = vm_with_ram();
	b = vm_with_ram();
	REQUIRE(a && b);
	CHECK_OK(t->setup(a, &state, &err), err.msg);
	CHECK_OK(t->setup(b, &state, &err), err.msg);
	id_a = guest_mem_ptr(&a->mem, VMGENID_ADDR, VMGENID_LEN);
	id_b = guest_mem_ptr(&b->mem, VMGENID_ADDR, VMGENID_LEN);
	REQUIRE(id_a && id_b);
	CHECK(memcmp(id_a, zero, VMGENID_LEN) != 0);
	CHECK(memcmp(id_a, id_b, VMGENID_LEN) != 0);		/* two VMs, two IDs */
	CHECK_EQ_INT(seen.n, 0);				/* nothing to signal at boot */
	vm_free(a);
	vm_free(b);
}

/*
 * After a restore or fork the guest must find a different ID, the page that holds it must be in the next diff
 * (the guest never wrote it, so KVM's dirty log does not have it), and the GED's GSI must see an edge.
 */
TEST(a_fork_gets_a_new_generation_id_in_a_dirty_page_and_an_edge_on_the_ged_gsi)
{
	const struct device_type *t = vmgenid_type();
	struct vm_error err = { 0 };
	struct vm *vm;
	void *state = NULL;
	uint8_t before[VMGENID_LEN];
	const uint8_t *id;

	REQUIRE(t && t->setup && t->clone);
	vm = vm_with_ram();
	REQUIRE(vm);
	CHECK_OK(t->setup(vm, &state, &err), err.msg);
	id = guest_mem_ptr(&vm->mem, VMGENID_ADDR, VMGENID_LEN);
	REQUIRE(id);
	memcpy(before, id, VMGENID_LEN);
	memset(vm->mem.vmm_dirty, 0, RAM / 4096 / 8);		/* a checkpoint froze memory here */

	t->clone(vm, state);
	CHECK(memcmp(before, id, VMGENID_LEN) != 0);
	CHECK(page_dirty(vm, VMGENID_ADDR));
	CHECK(!page_dirty(vm, ACPI_RSDP_ADDR));			/* only the ID's page */
	CHECK_EQ_INT(seen.n, 2);
	CHECK_EQ_INT(seen.irq[0], VMGENID_GSI);
	CHECK_EQ_INT(seen.level[0], 1);
	CHECK_EQ_INT(seen.irq[1], VMGENID_GSI);
	CHECK_EQ_INT(seen.level[1], 0);				/* an edge: the line is low again */
	CHECK(!seen.ended);
	vm_free(vm);
}

static size_t saved_state(const struct device_type *t, struct vm *vm, uint8_t *out, size_t max)
{
	struct snap_writer w;
	size_t start, len;

	snap_writer_init(&w);
	start = w.len;						/* past the blob's header */
	CHECK_OK(t->save(vm, NULL, &w), "save");
	len = w.len - start < max ? w.len - start : max;
	memcpy(out, w.buf + start, len);
	snap_writer_free(&w);
	return len;
}

/* The guest read the address and GSI from the DSDT when it booted: a snapshot remembers them and must match. */
TEST(a_snapshot_whose_generation_id_is_elsewhere_is_refused)
{
	const struct device_type *t = vmgenid_type();
	struct vm_error err = { 0 };
	struct vm *vm;
	uint8_t buf[64];
	size_t len;

	REQUIRE(t && t->save && t->load);
	vm = vm_with_ram();
	REQUIRE(vm);
	len = saved_state(t, vm, buf, sizeof(buf));
	CHECK_EQ_INT(len, 16);
	CHECK_EQ_INT(test_rd64(buf), VMGENID_ADDR);
	CHECK_EQ_INT(test_rd32(buf + 8), VMGENID_GSI);
	CHECK_OK(t->load(vm, NULL, buf, len, &err), err.msg);

	CHECK(t->load(vm, NULL, buf, len - 1, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "15 bytes is too short");
	buf[1] ^= 0x10;						/* another address */
	CHECK(t->load(vm, NULL, buf, len, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "generation ID at 0x");
	buf[1] ^= 0x10;
	buf[8] = 5;						/* another GSI */
	CHECK(t->load(vm, NULL, buf, len, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "GSI 5");
	buf[8] = VMGENID_GSI;
	buf[15] = 1;						/* reserved bits set */
	CHECK(t->load(vm, NULL, buf, len, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "reserved");
	buf[15] = 0;
	CHECK(t->load(vm, NULL, buf, len + 1, &err) < 0);		/* a byte too many */
	CHECK_STR_CONTAINS(err.msg, "1 bytes left over");
	vm_free(vm);
}

/* The ID must lie in guest RAM: a VM too small for it is refused at setup rather than booted without one. */
TEST(a_vm_without_ram_at_the_generation_id_is_refused)
{
	const struct device_type *t = vmgenid_type();
	struct vm_error err = { 0 };
	struct vm vm;
	void *state = NULL;

	REQUIRE(t && t->setup);
	memset(&vm, 0, sizeof(vm));
	REQUIRE(guest_mem_init(&vm.mem, VMGENID_ADDR, &err) == 0);
	CHECK(t->setup(&vm, &state, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "no guest RAM for the VM generation ID");
	guest_mem_exit(&vm.mem);
}
