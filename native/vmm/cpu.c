/* vCPUs: creation, the boot register state, and the run loop with its one switch on the exit reason. */
#define _GNU_SOURCE
#include "boot.h"
#include "error.h"
#include "internal.h"
#include "jail.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

/* A real-time signal: JavaScript cannot listen on it, so nothing in Node can replace its handler. */
#define VCPU_KICK_SIGNAL (SIGRTMIN + 4)

#define MSR_IA32_TSC 0x10
#define MSR_IA32_SYSENTER_CS 0x174
#define MSR_IA32_SYSENTER_ESP 0x175
#define MSR_IA32_SYSENTER_EIP 0x176
#define MSR_IA32_MISC_ENABLE 0x1a0
#define MSR_STAR 0xc0000081
#define MSR_LSTAR 0xc0000082
#define MSR_CSTAR 0xc0000083
#define MSR_SYSCALL_MASK 0xc0000084
#define MSR_KERNEL_GS_BASE 0xc0000102

#define APIC_LVT0 0x350
#define APIC_LVT1 0x360
#define APIC_MODE_NMI 4
#define APIC_MODE_EXTINT 7

/*
 * The kick signal only has to interrupt KVM_RUN; its handler does nothing. The kicker sets immediate_exit itself
 * (as QEMU does), so a kick that lands just before KVM_RUN is not lost, and the handler needs no thread-local state.
 */
static void vcpu_kick_handler(int sig)
{
	(void)sig;
}

/* Called on every start, so a handler some other code installed in between is put back. */
void vcpu_signal_init(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = vcpu_kick_handler;
	sigemptyset(&sa.sa_mask);
	sigaction(VCPU_KICK_SIGNAL, &sa, NULL);	/* no SA_RESTART: KVM_RUN must return EINTR */
}

void vcpu_kick(struct vcpu *cpu)
{
	__atomic_store_n(&cpu->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
	pthread_kill(cpu->thread, VCPU_KICK_SIGNAL);
}

/*
 * KVM_GET_SUPPORTED_CPUID, and whether KVM emulates the TSC-deadline timer, asked once per process: the answer is
 * the host's and never changes. Each vCPU patches its own copy.
 */
static pthread_mutex_t supported_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kvm_cpuid2 *supported;
static int supported_tsc_deadline;

static struct kvm_cpuid2 *cpuid_supported(int kvm_fd, int *tsc_deadline, struct vm_error *err)
{
	struct kvm_cpuid2 *c = NULL, *copy = NULL;
	int ret = 0;

	pthread_mutex_lock(&supported_lock);
	for (int n = 128; !supported && n <= 4096; n *= 2) {
		free(c);
		c = calloc(1, sizeof(*c) + n * sizeof(struct kvm_cpuid_entry2));
		if (!c) {
			ret = vm_error_set(err, ENOMEM, "out of memory for CPUID");
			break;
		}
		c->nent = (uint32_t)n;
		ret = kvm_ioctl(kvm_fd, KVM_GET_SUPPORTED_CPUID, c);
		if (ret == 0) {
			supported = c;
			c = NULL;
			supported_tsc_deadline = kvm_ioctl(kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_TSC_DEADLINE_TIMER) > 0;
		} else if (errno != E2BIG || n == 4096) {
			ret = vm_error_set(err, errno, "KVM_GET_SUPPORTED_CPUID: %s", strerror(errno));
			break;
		}
	}
	free(c);
	if (!ret && supported) {
		size_t size = sizeof(*supported) + supported->nent * sizeof(struct kvm_cpuid_entry2);

		copy = malloc(size);
		if (copy)
			memcpy(copy, supported, size);
		else
			vm_error_set(err, ENOMEM, "out of memory for CPUID");
		*tsc_deadline = supported_tsc_deadline;
	}
	pthread_mutex_unlock(&supported_lock);
	return copy;
}

static int cpuid_setup(struct vcpu *cpu, struct vm_error *err)
{
	int ret, tsc_deadline = 0;
	struct kvm_cpuid2 *c = cpuid_supported(cpu->vm->kvm_fd, &tsc_deadline, err);

	if (!c)
		return -1;
	/*
	 * KVM emulates the TSC-deadline mode of the local APIC timer but leaves it out of KVM_GET_SUPPORTED_CPUID; the
	 * VMM has to offer it. Without it Linux calibrates the APIC timer against another clock at every boot.
	 */
	for (uint32_t i = 0; i < c->nent; i++) {
		struct kvm_cpuid_entry2 *e = &c->entries[i];

		switch (e->function) {
		case 1:
			e->ebx = (e->ebx & 0x00ffffff) | ((uint32_t)cpu->id << 24);	/* initial APIC id */
			e->ecx |= 1u << 31;						/* running on a hypervisor */
			if (tsc_deadline)
				e->ecx |= 1u << 24;					/* TSC-deadline timer */
			break;
		case 0xb:
		case 0x1f:
			e->edx = (uint32_t)cpu->id;					/* x2APIC id */
			break;
		}
	}
	ret = kvm_ioctl(cpu->fd, KVM_SET_CPUID2, c);
	free(c);
	if (ret < 0)
		return vm_error_set(err, errno, "KVM_SET_CPUID2: %s", strerror(errno));
	return 0;
}

static int msrs_setup(struct vcpu *cpu, struct vm_error *err)
{
	static const struct { uint32_t index; uint64_t value; } boot_msrs[] = {
		{ MSR_IA32_SYSENTER_CS, 0 }, { MSR_IA32_SYSENTER_ESP, 0 }, { MSR_IA32_SYSENTER_EIP, 0 },
		{ MSR_STAR, 0 }, { MSR_CSTAR, 0 }, { MSR_KERNEL_GS_BASE, 0 }, { MSR_SYSCALL_MASK, 0 },
		{ MSR_LSTAR, 0 }, { MSR_IA32_MISC_ENABLE, 1 },	/* fast string operations */
	};
	const int n = sizeof(boot_msrs) / sizeof(boot_msrs[0]);
	struct {
		struct kvm_msrs hdr;
		struct kvm_msr_entry entries[sizeof(boot_msrs) / sizeof(boot_msrs[0])];
	} msrs;
	int ret;

	memset(&msrs, 0, sizeof(msrs));
	msrs.hdr.nmsrs = (uint32_t)n;
	for (int i = 0; i < n; i++) {
		msrs.entries[i].index = boot_msrs[i].index;
		msrs.entries[i].data = boot_msrs[i].value;
	}
	ret = kvm_ioctl(cpu->fd, KVM_SET_MSRS, &msrs);
	if (ret < 0)
		return vm_error_set(err, errno, "KVM_SET_MSRS: %s", strerror(errno));
	if (ret != n)
		return vm_error_set(err, EIO, "KVM refused boot MSR 0x%x", boot_msrs[ret].index);
	return 0;
}

static int lapic_setup(struct vcpu *cpu, struct vm_error *err)
{
	struct kvm_lapic_state lapic;
	uint32_t *lvt0 = (uint32_t *)(lapic.regs + APIC_LVT0), *lvt1 = (uint32_t *)(lapic.regs + APIC_LVT1);

	if (kvm_ioctl(cpu->fd, KVM_GET_LAPIC, &lapic) < 0)
		return vm_error_set(err, errno, "KVM_GET_LAPIC: %s", strerror(errno));
	*lvt0 = (*lvt0 & ~0x700u) | (APIC_MODE_EXTINT << 8);	/* the 8259 PIC reaches the CPU through LINT0 */
	*lvt1 = (*lvt1 & ~0x700u) | (APIC_MODE_NMI << 8);
	if (kvm_ioctl(cpu->fd, KVM_SET_LAPIC, &lapic) < 0)
		return vm_error_set(err, errno, "KVM_SET_LAPIC: %s", strerror(errno));
	return 0;
}

static int fpu_setup(struct vcpu *cpu, struct vm_error *err)
{
	struct kvm_fpu fpu;

	memset(&fpu, 0, sizeof(fpu));
	fpu.fcw = 0x37f;
	fpu.mxcsr = 0x1f80;
	if (kvm_ioctl(cpu->fd, KVM_SET_FPU, &fpu) < 0)
		return vm_error_set(err, errno, "KVM_SET_FPU: %s", strerror(errno));
	return 0;
}

int vcpu_create(struct vm *vm, int id, int boot, struct vm_error *err)
{
	struct vcpu *cpu = &vm->cpus[id];
	int size, ret;

	cpu->vm = vm;
	cpu->id = id;
	cpu->fd = kvm_ioctl(vm->vm_fd, KVM_CREATE_VCPU, id);
	if (cpu->fd < 0)
		return vm_error_set(err, errno, "KVM_CREATE_VCPU %d: %s", id, strerror(errno));
	size = kvm_ioctl(vm->kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (size < (int)sizeof(struct kvm_run))
		return vm_error_set(err, EIO, "KVM_GET_VCPU_MMAP_SIZE returned %d", size);
	cpu->run = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, cpu->fd, 0);
	if (cpu->run == MAP_FAILED) {
		cpu->run = NULL;
		return vm_error_set(err, errno, "cannot map vCPU %d's run area: %s", id, strerror(errno));
	}
	cpu->run_size = (size_t)size;
	if (!boot)
		return 0;	/* a restore sets every register from the snapshot */
	ret = cpuid_setup(cpu, err);
	if (!ret)
		ret = msrs_setup(cpu, err);
	if (!ret)
		ret = fpu_setup(cpu, err);
	if (!ret)
		ret = lapic_setup(cpu, err);
	return ret;
}

static void segment_set(struct kvm_segment *s, uint16_t selector, uint8_t type, int code)
{
	memset(s, 0, sizeof(*s));
	s->selector = selector;
	s->limit = 0xffffffff;
	s->type = type;
	s->present = 1;
	s->g = 1;
	s->s = type != 11 || code;	/* the TSS is a system segment */
	s->l = code;
	s->db = !code && type != 11;
}

int vcpu_setup_boot(struct vcpu *cpu, uint64_t entry, struct vm_error *err)
{
	struct kvm_sregs sregs;
	struct kvm_regs regs;

	if (kvm_ioctl(cpu->fd, KVM_GET_SREGS, &sregs) < 0)
		return vm_error_set(err, errno, "KVM_GET_SREGS: %s", strerror(errno));
	segment_set(&sregs.cs, BOOT_SEL_CODE, 11, 1);
	segment_set(&sregs.ds, BOOT_SEL_DATA, 3, 0);
	sregs.es = sregs.fs = sregs.gs = sregs.ss = sregs.ds;
	segment_set(&sregs.tr, BOOT_SEL_TSS, 11, 0);
	sregs.gdt.base = BOOT_GDT_ADDR;
	sregs.gdt.limit = 5 * 8 - 1;
	sregs.idt.base = BOOT_IDT_ADDR;
	sregs.idt.limit = 7;
	sregs.cr0 = 0x80050033;		/* PG | AM | WP | NE | ET | MP | PE */
	sregs.cr3 = BOOT_PML4;
	sregs.cr4 = 0x620;		/* OSXMMEXCPT | OSFXSR | PAE */
	sregs.efer = 0x500;		/* LMA | LME */
	if (kvm_ioctl(cpu->fd, KVM_SET_SREGS, &sregs) < 0)
		return vm_error_set(err, errno, "KVM_SET_SREGS: %s", strerror(errno));

	memset(&regs, 0, sizeof(regs));
	regs.rflags = 0x2;
	regs.rip = entry;
	regs.rsp = regs.rbp = BOOT_STACK;
	regs.rsi = BOOT_ZERO_PAGE;
	if (kvm_ioctl(cpu->fd, KVM_SET_REGS, &regs) < 0)
		return vm_error_set(err, errno, "KVM_SET_REGS: %s", strerror(errno));
	return 0;
}

void vcpu_destroy(struct vcpu *cpu)
{
	if (cpu->run)
		munmap(cpu->run, cpu->run_size);
	if (cpu->fd >= 0)
		close(cpu->fd);
	cpu->run = NULL;
	cpu->fd = -1;
}

static void vcpu_handle_io(struct vcpu *cpu)
{
	struct kvm_run *run = cpu->run;
	uint32_t size = run->io.size, count = run->io.count;
	uint8_t *data = (uint8_t *)run + run->io.data_offset;
	int is_write = run->io.direction == KVM_EXIT_IO_OUT;

	if (run->io.data_offset + (uint64_t)size * count > cpu->run_size)
		return;
	for (uint32_t i = 0; i < count; i++, data += size) {
		if (!io_bus_dispatch(&cpu->vm->pio, cpu->vm, run->io.port, data, size, is_write) && !is_write)
			memset(data, 0xff, size);	/* nothing on this port: an empty ISA bus reads all ones */
	}
}

static void vcpu_handle_mmio(struct vcpu *cpu)
{
	struct kvm_run *run = cpu->run;
	uint32_t len = run->mmio.len > 8 ? 8 : run->mmio.len;

	if (!io_bus_dispatch(&cpu->vm->mmio, cpu->vm, run->mmio.phys_addr, run->mmio.data, len, run->mmio.is_write) &&
	    !run->mmio.is_write)
		memset(run->mmio.data, 0xff, len);
}

/* Returns 0 to keep running, 1 when the VM has ended. */
static int vcpu_handle_exit(struct vcpu *cpu)
{
	struct kvm_run *run = cpu->run;
	struct vm *vm = cpu->vm;

	switch (run->exit_reason) {
	case KVM_EXIT_IO:
		vcpu_handle_io(cpu);
		cpu->io_pending = 1;
		return 0;
	case KVM_EXIT_MMIO:
		vcpu_handle_mmio(cpu);
		cpu->io_pending = 1;
		return 0;
	case KVM_EXIT_INTR:
		return 0;
	case KVM_EXIT_SHUTDOWN:
		vm_end(vm, VM_EXIT_SHUTDOWN, 0, "the guest triple-faulted on vCPU %d", cpu->id);
		return 1;
	case KVM_EXIT_SYSTEM_EVENT:
		if (run->system_event.type == KVM_SYSTEM_EVENT_RESET)
			vm_end(vm, VM_EXIT_RESET, 0, "the guest reset the machine");
		else if (run->system_event.type == KVM_SYSTEM_EVENT_SHUTDOWN)
			vm_end(vm, VM_EXIT_POWEROFF, 0, "the guest powered off");
		else
			vm_end(vm, VM_EXIT_ERROR, 0, "the guest crashed (system event %u)", run->system_event.type);
		return 1;
	case KVM_EXIT_FAIL_ENTRY:
		vm_end(vm, VM_EXIT_ERROR, 0, "KVM could not enter vCPU %d (hardware reason 0x%llx)", cpu->id,
		       (unsigned long long)run->fail_entry.hardware_entry_failure_reason);
		return 1;
	case KVM_EXIT_INTERNAL_ERROR:
		vm_end(vm, VM_EXIT_ERROR, 0, "KVM internal error on vCPU %d (suberror %u)", cpu->id,
		       run->internal.suberror);
		return 1;
	default:
		vm_end(vm, VM_EXIT_ERROR, 0, "unhandled KVM exit %u on vCPU %d", run->exit_reason, cpu->id);
		return 1;
	}
}

/* Waits while the VM is paused. Returns 1 when the thread should end. */
static int vcpu_wait_runnable(struct vcpu *cpu)
{
	struct vm *vm = cpu->vm;
	int stop;

	pthread_mutex_lock(&vm->lock);
	while (vm->pause_req && !vm->stop_req) {
		if (cpu->io_pending) {
			/*
			 * KVM finishes an I/O exit (the value of an IN lands in RAX, RIP moves on) only at the next
			 * KVM_RUN. With immediate_exit set, KVM_RUN does just that and returns EINTR without running
			 * guest code, so the registers a snapshot reads are consistent (KVM API, "KVM_EXIT_IO").
			 */
			pthread_mutex_unlock(&vm->lock);
			__atomic_store_n(&cpu->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
			kvm_ioctl(cpu->fd, KVM_RUN, 0);
			cpu->io_pending = 0;
			pthread_mutex_lock(&vm->lock);
			continue;
		}
		if (!cpu->parked) {
			cpu->parked = 1;
			vm->parked++;
			pthread_cond_broadcast(&vm->cond);
		}
		pthread_cond_wait(&vm->cond, &vm->lock);
	}
	if (cpu->parked) {
		cpu->parked = 0;
		vm->parked--;
	}
	stop = vm->stop_req;
	pthread_mutex_unlock(&vm->lock);
	return stop;
}

void *vcpu_thread(void *arg)
{
	struct vcpu *cpu = arg;
	struct vm *vm = cpu->vm;
	sigset_t set;
	int last, ret;
	char name[16];

	snprintf(name, sizeof(name), "smol-vcpu%d", cpu->id);
	pthread_setname_np(pthread_self(), name);	/* top and /proc/PID/task tell vCPU threads apart */
	/* A jailed vmhost (docs/security.md): this thread's own, shorter list, before the guest's first instruction. */
	ret = jail_vcpu_thread();
	if (ret < 0) {
		vm_end(vm, VM_EXIT_ERROR, 0, "vCPU %d cannot install its seccomp filter: %s", cpu->id, strerror(-ret));
		goto done;
	}
	sigemptyset(&set);
	sigaddset(&set, VCPU_KICK_SIGNAL);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);

	for (;;) {
		/* Cleared before the flags are read: a kick that lands after the check makes KVM_RUN return at once. */
		__atomic_store_n(&cpu->run->immediate_exit, 0, __ATOMIC_SEQ_CST);
		if (vcpu_wait_runnable(cpu))
			break;
		cpu->io_pending = 0;	/* KVM_RUN completes it first, whatever it returns */
		if (cpu->id == 0 && !cpu->nr_runs)
			vm_stamp_once(&vm->t_first_entry);
		__atomic_store_n(&cpu->in_run, 1, __ATOMIC_RELAXED);
		ret = kvm_ioctl(cpu->fd, KVM_RUN, 0);
		__atomic_store_n(&cpu->in_run, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&cpu->last_exit, ret < 0 ? -errno : (int)cpu->run->exit_reason, __ATOMIC_RELAXED);
		__atomic_add_fetch(&cpu->nr_runs, 1, __ATOMIC_RELAXED);
		if (ret < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			vm_end(vm, VM_EXIT_ERROR, 0, "KVM_RUN failed on vCPU %d: %s", cpu->id, strerror(errno));
			break;
		}
		if (vcpu_handle_exit(cpu))
			break;
	}

done:
	pthread_mutex_lock(&vm->lock);
	cpu->running = 0;
	last = --vm->alive == 0 && !vm->exit_notified;
	if (vm->alive == 0) {
		vm->state = VM_EXITED;
		vm->exit_notified = 1;
	}
	pthread_cond_broadcast(&vm->cond);
	pthread_mutex_unlock(&vm->lock);
	if (last && vm->cb.on_exit)
		vm->cb.on_exit(vm->cb.opaque);
	return NULL;
}
