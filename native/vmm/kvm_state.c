/*
 * The KVM state of a VM in snapshot sections (docs/snapshots.md, "Sections"): capture with every vCPU parked, and set
 * back on a new VM, each in Firecracker's order of ioctls. vCPU registers, MSRs (Firecracker's allow-list), XSAVE,
 * XCRs, debug registers, LAPIC, vCPU events, MP state and CPUID; the irqchip, the PIT and kvmclock.
 */
#define _GNU_SOURCE
#include "error.h"
#include "internal.h"
#include "kvm_state.h"
#include "snapfile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#define MSR_IA32_TSC 0x10
#define MSR_IA32_TSC_DEADLINE 0x6e0
#define APIC_LVTT 0x320
#define APIC_LVT_TIMER_MODE_MASK (3u << 17)
#define APIC_LVT_TIMER_TSCDEADLINE (2u << 17)
#define APIC_LVT_MASKED (1u << 16)

/* ---- MSRs: Firecracker's allow-list, intersected with what this KVM lists and can read ---- */

static int msr_allowed(uint32_t i)
{
	switch (i) {
	case 0x10: case 0x1b: case 0x3b: case 0x48: case 0xfe: case 0x122:	/* TSC, APICBASE, TSC_ADJUST, ... */
	case 0x174: case 0x175: case 0x176: case 0x179: case 0x17a: case 0x17b:	/* SYSENTER, MCG */
	case 0x1a0: case 0x6e0: case 0xda0: case 0x11: case 0x12:		/* MISC_ENABLE, TSC_DEADLINE, XSS, kvmclock */
	case 0xc0000080: case 0xc0000081: case 0xc0000082: case 0xc0000083: case 0xc0000084:
	case 0xc0000100: case 0xc0000101: case 0xc0000102: case 0xc0000103:
		return 1;
	}
	return (i >= 0x200 && i <= 0x2ff) || (i >= 0x400 && i <= 0x47f) || (i >= 0x4b564d00 && i <= 0x4b564dff);
}

static pthread_mutex_t msr_list_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t *msr_list;
static uint32_t nr_msr_list;

/* The MSRs to save, probed once per process on the first vCPU saved. */
static int msr_list_get(struct vcpu *cpu, const uint32_t **list, uint32_t *n, struct vm_error *err)
{
	struct kvm_msr_list probe = { .nmsrs = 0 }, *all = NULL;
	struct kvm_msrs *msrs = NULL;
	int ret = 0;

	pthread_mutex_lock(&msr_list_lock);
	if (msr_list)
		goto out;
	if (kvm_ioctl(cpu->vm->kvm_fd, KVM_GET_MSR_INDEX_LIST, &probe) < 0 && errno != E2BIG) {
		ret = vm_error_set(err, errno, "KVM_GET_MSR_INDEX_LIST: %s", strerror(errno));
		goto out;
	}
	all = calloc(1, sizeof(*all) + probe.nmsrs * sizeof(uint32_t));
	msrs = calloc(1, sizeof(*msrs) + (probe.nmsrs + 1) * sizeof(struct kvm_msr_entry));
	msr_list = calloc(probe.nmsrs + 1, sizeof(uint32_t));
	if (!all || !msrs || !msr_list) {
		ret = vm_error_set(err, ENOMEM, "out of memory for the MSR list");
		goto fail;
	}
	all->nmsrs = probe.nmsrs;
	if (kvm_ioctl(cpu->vm->kvm_fd, KVM_GET_MSR_INDEX_LIST, all) < 0) {
		ret = vm_error_set(err, errno, "KVM_GET_MSR_INDEX_LIST: %s", strerror(errno));
		goto fail;
	}
	for (uint32_t i = 0; i < all->nmsrs; i++)
		if (msr_allowed(all->indices[i]))
			msrs->entries[msrs->nmsrs++].index = all->indices[i];
	/* KVM_GET_MSRS stops at the first MSR it cannot read: drop that one and go on. */
	for (uint32_t done = 0; done < msrs->nmsrs;) {
		struct kvm_msrs *rest = calloc(1, sizeof(*rest) + (msrs->nmsrs - done) * sizeof(struct kvm_msr_entry));
		int got;

		if (!rest) {
			ret = vm_error_set(err, ENOMEM, "out of memory for the MSR list");
			goto fail;
		}
		rest->nmsrs = msrs->nmsrs - done;
		memcpy(rest->entries, msrs->entries + done, rest->nmsrs * sizeof(struct kvm_msr_entry));
		got = kvm_ioctl(cpu->fd, KVM_GET_MSRS, rest);
		free(rest);
		if (got < 0) {
			ret = vm_error_set(err, errno, "KVM_GET_MSRS: %s", strerror(errno));
			goto fail;
		}
		for (int i = 0; i < got; i++)
			msr_list[nr_msr_list++] = msrs->entries[done + i].index;
		done += (uint32_t)got + 1;	/* skip the one that failed (past the end when all were read) */
	}
	goto out;
fail:
	free(msr_list);
	msr_list = NULL;
	nr_msr_list = 0;
out:
	free(all);
	free(msrs);
	*list = msr_list;
	*n = nr_msr_list;
	pthread_mutex_unlock(&msr_list_lock);
	return ret;
}

/* ---- capture ---- */

static int get(int fd, unsigned long req, void *arg, const char *name, struct vm_error *err)
{
	if (kvm_ioctl(fd, req, arg) < 0)
		return vm_error_set(err, errno, "%s: %s", name, strerror(errno));
	return 0;
}

static int xsave_size(struct vm *vm)
{
	int size = kvm_ioctl(vm->vm_fd, KVM_CHECK_EXTENSION, KVM_CAP_XSAVE2);

	return size > (int)sizeof(struct kvm_xsave) ? size : (int)sizeof(struct kvm_xsave);
}

/*
 * CPUID and MSR lists: KVM's struct kvm_cpuid2 and struct kvm_msrs are both a u32 count, 4 bytes of padding and the
 * entries; their sections are the count and the entries.
 */
static void put_counted(struct snap_writer *w, uint32_t kind, uint32_t index, uint32_t count, const void *entries,
			size_t entry_size)
{
	size_t at = snap_begin(w, kind, index);

	snap_append(w, &count, 4);
	snap_append(w, entries, count * entry_size);
	snap_end(w, at);
}

/* The KVM structure for a counted section (snap_validate checked its size); free it. */
static void *get_counted(const struct snap_section *sec, size_t entry_size, uint32_t *count)
{
	uint8_t *buf;

	memcpy(count, sec->data, 4);
	buf = calloc(1, 8 + *count * entry_size);
	if (buf) {
		memcpy(buf, count, 4);
		memcpy(buf + 8, sec->data + 4, *count * entry_size);
	}
	return buf;
}

static int vcpu_save(struct vcpu *cpu, struct snap_writer *w, struct vm_error *err)
{
	struct kvm_mp_state mp;
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct kvm_xcrs xcrs;
	struct kvm_debugregs dregs;
	struct kvm_lapic_state lapic;
	struct kvm_vcpu_events events;
	struct kvm_cpuid2 *cpuid = NULL;
	struct kvm_msrs *msrs = NULL;
	const uint32_t *list;
	uint32_t nr_list, id = (uint32_t)cpu->id, lvtt;
	int xsize = xsave_size(cpu->vm), ret;
	void *xsave = calloc(1, (size_t)xsize);

	if (!xsave)
		return vm_error_set(err, ENOMEM, "out of memory for XSAVE state");
	/* MP state first: reading it makes KVM accept pending INIT/SIPI events, which changes the LAPIC. */
	ret = get(cpu->fd, KVM_GET_MP_STATE, &mp, "KVM_GET_MP_STATE", err);
	if (!ret)
		ret = get(cpu->fd, KVM_GET_REGS, &regs, "KVM_GET_REGS", err);
	if (!ret)
		ret = get(cpu->fd, KVM_GET_SREGS, &sregs, "KVM_GET_SREGS", err);
	if (!ret)
		ret = get(cpu->fd, xsize > (int)sizeof(struct kvm_xsave) ? KVM_GET_XSAVE2 : KVM_GET_XSAVE, xsave,
			  "KVM_GET_XSAVE", err);
	if (!ret)
		ret = get(cpu->fd, KVM_GET_XCRS, &xcrs, "KVM_GET_XCRS", err);
	if (!ret)
		ret = get(cpu->fd, KVM_GET_DEBUGREGS, &dregs, "KVM_GET_DEBUGREGS", err);
	if (!ret)
		ret = get(cpu->fd, KVM_GET_LAPIC, &lapic, "KVM_GET_LAPIC", err);
	for (uint32_t n = 64; !ret; n *= 2) {
		free(cpuid);
		cpuid = calloc(1, sizeof(*cpuid) + n * sizeof(struct kvm_cpuid_entry2));
		if (!cpuid) {
			ret = vm_error_set(err, ENOMEM, "out of memory for CPUID");
			break;
		}
		cpuid->nent = n;
		if (kvm_ioctl(cpu->fd, KVM_GET_CPUID2, cpuid) == 0)
			break;
		if (errno != E2BIG || n >= SNAP_MAX_CPUID)
			ret = vm_error_set(err, errno, "KVM_GET_CPUID2: %s", strerror(errno));
	}
	if (!ret)
		ret = msr_list_get(cpu, &list, &nr_list, err);
	if (!ret) {
		msrs = calloc(1, sizeof(*msrs) + nr_list * sizeof(struct kvm_msr_entry));
		if (!msrs)
			ret = vm_error_set(err, ENOMEM, "out of memory for MSRs");
	}
	if (!ret) {
		int got;

		msrs->nmsrs = nr_list;
		for (uint32_t i = 0; i < nr_list; i++)
			msrs->entries[i].index = list[i];
		got = kvm_ioctl(cpu->fd, KVM_GET_MSRS, msrs);
		if (got != (int)nr_list)
			ret = vm_error_set(err, got < 0 ? errno : EIO, "KVM_GET_MSRS: %s", got < 0 ? strerror(errno) :
					   "KVM read fewer MSRs than it did before");
	}
	/* VCPU_EVENTS last: it is only consistent once nothing else will touch the vCPU. */
	if (!ret)
		ret = get(cpu->fd, KVM_GET_VCPU_EVENTS, &events, "KVM_GET_VCPU_EVENTS", err);
	if (!ret) {
		/*
		 * KVM zeroes TSC_DEADLINE when the deadline timer fires; if that interrupt had not reached the LAPIC
		 * yet, a restored guest would wait for it forever. Arm the timer at "now" instead (as Firecracker).
		 */
		memcpy(&lvtt, lapic.regs + APIC_LVTT, sizeof(lvtt));
		if ((lvtt & APIC_LVT_TIMER_MODE_MASK) == APIC_LVT_TIMER_TSCDEADLINE && !(lvtt & APIC_LVT_MASKED)) {
			uint64_t tsc = 0;

			for (uint32_t i = 0; i < nr_list; i++)
				if (msrs->entries[i].index == MSR_IA32_TSC)
					tsc = msrs->entries[i].data;
			for (uint32_t i = 0; i < nr_list; i++)
				if (msrs->entries[i].index == MSR_IA32_TSC_DEADLINE && msrs->entries[i].data == 0)
					msrs->entries[i].data = tsc;
		}
		put_counted(w, SNAP_CPUID, id, cpuid->nent, cpuid->entries, sizeof(struct kvm_cpuid_entry2));
		snap_put(w, SNAP_MP_STATE, id, &mp, sizeof(mp));
		snap_put(w, SNAP_REGS, id, &regs, sizeof(regs));
		snap_put(w, SNAP_SREGS, id, &sregs, sizeof(sregs));
		snap_put(w, SNAP_XSAVE, id, xsave, (size_t)xsize);
		snap_put(w, SNAP_XCRS, id, &xcrs, sizeof(xcrs));
		snap_put(w, SNAP_DEBUGREGS, id, &dregs, sizeof(dregs));
		snap_put(w, SNAP_LAPIC, id, &lapic, sizeof(lapic));
		put_counted(w, SNAP_MSRS, id, msrs->nmsrs, msrs->entries, sizeof(struct kvm_msr_entry));
		snap_put(w, SNAP_VCPU_EVENTS, id, &events, sizeof(events));
	}
	free(xsave);
	free(cpuid);
	free(msrs);
	return ret;
}


int kvm_state_save(struct vm *vm, struct snap_writer *w, struct vm_error *err)
{
	struct kvm_clock_data clock;
	struct kvm_pit_state2 pit;
	uint8_t vm_section[24] = { 0 };
	uint64_t mem_size = vm->mem.size, tsc_khz;
	uint32_t nr = (uint32_t)vm->nr_cpus;
	int khz = kvm_ioctl(vm->cpus[0].fd, KVM_GET_TSC_KHZ, 0);
	int ret;

	tsc_khz = khz > 0 ? (uint64_t)khz : 0;
	memcpy(vm_section, &mem_size, 8);
	memcpy(vm_section + 8, &nr, 4);
	memcpy(vm_section + 16, &tsc_khz, 8);
	snap_put(w, SNAP_VM, 0, vm_section, sizeof(vm_section));
	ret = get(vm->vm_fd, KVM_GET_CLOCK, &clock, "KVM_GET_CLOCK", err);
	if (!ret)
		ret = get(vm->vm_fd, KVM_GET_PIT2, &pit, "KVM_GET_PIT2", err);
	if (ret)
		return ret;
	snap_put(w, SNAP_CLOCK, 0, &clock, sizeof(clock));
	snap_put(w, SNAP_PIT, 0, &pit, sizeof(pit));
	for (uint32_t chip = 0; chip < 3; chip++) {
		struct kvm_irqchip ic = { .chip_id = chip };

		ret = get(vm->vm_fd, KVM_GET_IRQCHIP, &ic, "KVM_GET_IRQCHIP", err);
		if (ret)
			return ret;
		snap_put(w, SNAP_IRQCHIP, chip, &ic, sizeof(ic));
	}
	for (int i = 0; i < vm->nr_cpus; i++) {
		ret = vcpu_save(&vm->cpus[i], w, err);
		if (ret)
			return ret;
	}
	return 0;
}

/* ---- restore ---- */

static const struct snap_section *section(const struct snap_blob *s, uint32_t kind, uint32_t index)
{
	return snap_find(s, kind, index);	/* snap_validate made sure it is there with its size */
}

static int set(int fd, unsigned long req, const void *arg, const char *name, int cpu, struct vm_error *err)
{
	if (kvm_ioctl(fd, req, arg) < 0) {
		if (cpu >= 0)
			return vm_error_set(err, errno, "restoring vCPU %d: %s: %s", cpu, name, strerror(errno));
		return vm_error_set(err, errno, "restoring the VM: %s: %s", name, strerror(errno));
	}
	return 0;
}

static int vcpu_restore(struct vcpu *cpu, const struct snap_blob *s, uint64_t tsc_khz, struct vm_error *err)
{
	const struct snap_section *sec;
	uint32_t id = (uint32_t)cpu->id, count;
	int xsize = xsave_size(cpu->vm), ret, n;
	void *buf;

	if (tsc_khz) {
		int khz = kvm_ioctl(cpu->fd, KVM_GET_TSC_KHZ, 0);

		/* A different TSC rate (another host) is scaled when KVM can; otherwise kvmclock copes. */
		if (khz > 0 && ((uint64_t)khz > tsc_khz + tsc_khz / 4000 || (uint64_t)khz + tsc_khz / 4000 < tsc_khz))
			kvm_ioctl(cpu->fd, KVM_SET_TSC_KHZ, (unsigned long)tsc_khz);
	}
	buf = get_counted(section(s, SNAP_CPUID, id), sizeof(struct kvm_cpuid_entry2), &count);
	if (!buf)
		return vm_error_set(err, ENOMEM, "out of memory for CPUID");
	ret = set(cpu->fd, KVM_SET_CPUID2, buf, "KVM_SET_CPUID2", cpu->id, err);
	free(buf);
	if (!ret)
		ret = set(cpu->fd, KVM_SET_MP_STATE, section(s, SNAP_MP_STATE, id)->data, "KVM_SET_MP_STATE", cpu->id, err);
	/* REGS before VCPU_EVENTS (setting registers drops pending exceptions); SREGS before LAPIC (APIC base). */
	if (!ret)
		ret = set(cpu->fd, KVM_SET_REGS, section(s, SNAP_REGS, id)->data, "KVM_SET_REGS", cpu->id, err);
	if (!ret)
		ret = set(cpu->fd, KVM_SET_SREGS, section(s, SNAP_SREGS, id)->data, "KVM_SET_SREGS", cpu->id, err);
	if (!ret) {
		sec = section(s, SNAP_XSAVE, id);
		buf = calloc(1, (size_t)xsize > sec->len ? (size_t)xsize : (size_t)sec->len);
		if (!buf)
			return vm_error_set(err, ENOMEM, "out of memory for XSAVE state");
		memcpy(buf, sec->data, (size_t)sec->len);
		ret = set(cpu->fd, KVM_SET_XSAVE, buf, "KVM_SET_XSAVE", cpu->id, err);
		free(buf);
	}
	if (!ret)
		ret = set(cpu->fd, KVM_SET_XCRS, section(s, SNAP_XCRS, id)->data, "KVM_SET_XCRS", cpu->id, err);
	if (!ret)
		ret = set(cpu->fd, KVM_SET_DEBUGREGS, section(s, SNAP_DEBUGREGS, id)->data, "KVM_SET_DEBUGREGS", cpu->id,
			  err);
	/* LAPIC before MSRs, or KVM drops the TSC_DEADLINE write. */
	if (!ret)
		ret = set(cpu->fd, KVM_SET_LAPIC, section(s, SNAP_LAPIC, id)->data, "KVM_SET_LAPIC", cpu->id, err);
	if (!ret) {
		buf = get_counted(section(s, SNAP_MSRS, id), sizeof(struct kvm_msr_entry), &count);
		if (!buf)
			return vm_error_set(err, ENOMEM, "out of memory for MSRs");
		n = kvm_ioctl(cpu->fd, KVM_SET_MSRS, buf);
		if (n != (int)count)
			ret = vm_error_set(err, n < 0 ? errno : EINVAL, "restoring vCPU %d: KVM refused MSR 0x%x%s%s",
					   cpu->id, n >= 0 && (uint32_t)n < count ?
					   ((struct kvm_msrs *)buf)->entries[n].index : 0,
					   n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
		free(buf);
	}
	if (!ret)
		ret = set(cpu->fd, KVM_SET_VCPU_EVENTS, section(s, SNAP_VCPU_EVENTS, id)->data, "KVM_SET_VCPU_EVENTS",
			  cpu->id, err);
	return ret;
}

int kvm_state_restore(struct vm *vm, const struct snap_blob *s, uint64_t tsc_khz, struct vm_error *err)
{
	struct kvm_clock_data clock, saved;
	int ret;

	ret = set(vm->vm_fd, KVM_SET_PIT2, section(s, SNAP_PIT, 0)->data, "KVM_SET_PIT2", -1, err);
	if (ret)
		return ret;
	/* The saved kvmclock value, not wall time: the guest's monotonic clock goes on from where it stopped. */
	memcpy(&saved, section(s, SNAP_CLOCK, 0)->data, sizeof(saved));
	memset(&clock, 0, sizeof(clock));
	clock.clock = saved.clock;
	ret = set(vm->vm_fd, KVM_SET_CLOCK, &clock, "KVM_SET_CLOCK", -1, err);
	for (uint32_t chip = 0; !ret && chip < 3; chip++) {
		struct kvm_irqchip ic;

		memcpy(&ic, section(s, SNAP_IRQCHIP, chip)->data, sizeof(ic));
		if (ic.chip_id != chip)
			return vm_error_set(err, EINVAL, "snapshot: the IRQCHIP section %u is for chip %u", chip,
					    ic.chip_id);
		ret = set(vm->vm_fd, KVM_SET_IRQCHIP, &ic, "KVM_SET_IRQCHIP", -1, err);
	}
	trace_step("set KVM state (PIT, clock, irqchip)");
	for (int i = 0; !ret && i < vm->nr_cpus; i++)
		ret = vcpu_restore(&vm->cpus[i], s, tsc_khz, err);
	return ret;
}
