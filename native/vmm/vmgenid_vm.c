/*
 * VM generation ID: 16 random bytes at VMGENID_ADDR in guest RAM, described in the DSDT as \_SB_.VGEN (acpi.c).
 * Linux's vmgenid driver reads them at boot; a restored or forked VM gets new ones and an edge on VMGENID_GSI,
 * which the DSDT's Generic Event Device turns into Notify (VGEN, 0x80): the driver sees the ID changed and reseeds
 * the kernel's RNG ("crng reseeded due to virtual machine fork"), so two forks never share their random numbers.
 *
 * The ID itself lives in guest RAM, which a snapshot carries. The device's state is where the ID is and which GSI
 * signals it: the guest learned both from the DSDT at boot, so a snapshot must be restored by a VMM that uses the
 * same ones.
 */
#include "acpi.h"
#include "device.h"
#include "error.h"
#include "guest_mem.h"
#include "internal.h"
#include "le_codec.h"
#include "snapfile.h"
#include "vmgenid.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

/*
 * Writes a new random ID into guest RAM. Once one call has succeeded (setup) the host's pool is initialized, and
 * getrandom(2) then returns reads of up to 256 bytes in full, signals or not: a failure here is not expected.
 */
static int vmgenid_write(struct vm *vm, struct vm_error *err)
{
	uint8_t *id = guest_mem_ptr(&vm->mem, VMGENID_ADDR, VMGENID_LEN);
	uint8_t fresh[VMGENID_LEN];
	ssize_t n;

	if (!id)
		return vm_error_set(err, EINVAL, "no guest RAM for the VM generation ID at 0x%llx",
				    (unsigned long long)VMGENID_ADDR);
	do
		n = getrandom(fresh, sizeof(fresh), 0);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(fresh))
		return vm_error_set(err, n < 0 ? errno : EIO, "cannot draw a VM generation ID: %s",
				    n < 0 ? strerror(errno) : "short read");
	memcpy(id, fresh, sizeof(fresh));
	guest_mem_mark_dirty(&vm->mem, VMGENID_ADDR, VMGENID_LEN);
	return 0;
}

/* At boot, and first thing in a restore (where clone then writes another). */
static int vmgenid_setup(struct vm *vm, void **state, struct vm_error *err)
{
	*state = NULL;
	return vmgenid_write(vm, err);
}

static int vmgenid_save(struct vm *vm, void *state, struct snap_writer *w)
{
	struct vmgenid_state s = { .addr = VMGENID_ADDR, .gsi = VMGENID_GSI };
	uint8_t buf[VMGENID_STATE_LEN];
	struct le_writer out;

	(void)vm;
	(void)state;
	le_writer_init(&out, buf, sizeof(buf));
	vmgenid_state_encode(&s, &out);
	snap_append(w, buf, out.len);
	return 0;
}

static int vmgenid_load(struct vm *vm, void *state, const uint8_t *data, size_t len, struct vm_error *err)
{
	struct vmgenid_state s;
	const char *bad = vmgenid_state_decode(data, len, &s);

	(void)vm;
	(void)state;
	if (bad)
		return vm_error_set(err, EINVAL, "%s", bad);
	if (s.addr != VMGENID_ADDR || s.gsi != VMGENID_GSI)
		return vm_error_set(err, EINVAL,
				    "the guest expects its generation ID at 0x%llx and its signal on GSI %u; this VMM "
				    "puts them at 0x%llx and on GSI %u",
				    (unsigned long long)s.addr, s.gsi, (unsigned long long)VMGENID_ADDR, VMGENID_GSI);
	return 0;
}

/* After a restore or fork, before any vCPU runs: a new ID, then an edge on the GED's interrupt. */
static void vmgenid_clone(struct vm *vm, void *state)
{
	struct vm_error err = { 0 };

	(void)state;
	if (vmgenid_write(vm, &err) < 0) {
		/* Running on with the old ID would give this VM the random numbers of its siblings. */
		vm_end(vm, VM_EXIT_ERROR, 0, "%s", err.msg);
		return;
	}
	vm_irq_line(vm, VMGENID_GSI, 1);
	vm_irq_line(vm, VMGENID_GSI, 0);
}

static struct device_type vmgenid_device = {
	.name = "vmgenid",
	.setup = vmgenid_setup,
	.save = vmgenid_save,
	.load = vmgenid_load,
	.clone = vmgenid_clone,
};
DEVICE_REGISTER(vmgenid_device, DEV_PRIO_PLATFORM)
