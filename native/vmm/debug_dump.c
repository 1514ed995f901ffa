/*
 * SMOL_DEBUG_DUMP=1 (stderr) or =FILE: SIGUSR1 prints every live VM's vCPUs (registers, LAPIC, pending events, a
 * walk of the page tables at RIP and RSP), its interrupt controllers and its UART. For a VM that seems stuck:
 * docs/lab.md, "Debugging a stuck VM".
 */
#define _GNU_SOURCE
#include "device.h"
#include "internal.h"
#include "uart.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

static pthread_mutex_t debug_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t debug_once = PTHREAD_ONCE_INIT;
static struct vm *debug_vms;
static int debug_pipe[2] = { -1, -1 };
static FILE *debug_out;

static void debug_signal(int sig)
{
	int saved = errno;
	char c = 1;

	(void)sig;
	if (write(debug_pipe[1], &c, 1) < 0) {
		/* nothing to do: a dump is already pending */
	}
	errno = saved;
}

static void *debug_thread(void *arg)
{
	char c;

	(void)arg;
	while (read(debug_pipe[0], &c, 1) > 0 || errno == EINTR) {
		pthread_mutex_lock(&debug_lock);
		fprintf(debug_out, "smol-debug: dump of every live VM (pid %d)\n", (int)getpid());
		for (struct vm *vm = debug_vms; vm; vm = vm->debug_next)
			vm_debug_dump(vm, debug_out);
		fprintf(debug_out, "smol-debug: end of dump\n");
		fflush(debug_out);
		pthread_mutex_unlock(&debug_lock);
	}
	return NULL;
}

static void debug_init(void)
{
	const char *where = getenv("SMOL_DEBUG_DUMP");
	struct sigaction sa;
	pthread_t thread;

	if (!where || !*where || !strcmp(where, "0"))
		return;
	debug_out = !strcmp(where, "1") ? stderr : fopen(where, "a");
	if (!debug_out || pipe2(debug_pipe, O_CLOEXEC) < 0)
		return;
	fcntl(debug_pipe[1], F_SETFL, O_NONBLOCK);
	if (pthread_create(&thread, NULL, debug_thread, NULL) != 0)
		return;
	pthread_detach(thread);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = debug_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
}

void vm_debug_register(struct vm *vm)
{
	pthread_once(&debug_once, debug_init);
	if (!debug_out)
		return;
	pthread_mutex_lock(&debug_lock);
	vm->debug_next = debug_vms;
	debug_vms = vm;
	pthread_mutex_unlock(&debug_lock);
}

void vm_debug_unregister(struct vm *vm)
{
	if (!debug_out)
		return;
	pthread_mutex_lock(&debug_lock);
	for (struct vm **p = &debug_vms; *p; p = &(*p)->debug_next) {
		if (*p == vm) {
			*p = vm->debug_next;
			break;
		}
	}
	pthread_mutex_unlock(&debug_lock);
}

static uint32_t apic_reg(const struct kvm_lapic_state *l, unsigned off)
{
	uint32_t v;

	memcpy(&v, l->regs + off, 4);
	return v;
}

/* The vectors set in one of the LAPIC's 256-bit registers (ISR 0x100, TMR 0x180, IRR 0x200). */
static void apic_vectors(FILE *out, const char *name, const struct kvm_lapic_state *l, unsigned base)
{
	fprintf(out, " %s=[", name);
	for (int v = 0, first = 1; v < 256; v++) {
		if (apic_reg(l, base + (unsigned)(v / 32) * 16) & (1u << (v % 32))) {
			fprintf(out, "%s%02x", first ? "" : ",", v);
			first = 0;
		}
	}
	fprintf(out, "]");
}

/* Translates a guest virtual address through the 4-level page tables at cr3 and prints the entries and 16 bytes. */
static void debug_walk(struct vm *vm, FILE *out, uint64_t cr3, uint64_t gva, const char *what, int qwords)
{
	const uint64_t addr_mask = 0x000ffffffffff000ULL;
	uint64_t table = cr3 & addr_mask, phys = 0;
	const uint8_t *bytes;
	int level;

	fprintf(out, "    walk %s %llx (cr3 %llx):", what, (unsigned long long)gva, (unsigned long long)cr3);
	for (level = 4; level >= 1; level--) {
		unsigned idx = (unsigned)(gva >> (12 + 9 * (level - 1))) & 511;
		const uint64_t *p = guest_mem_ptr(&vm->mem, table + idx * 8, 8);
		uint64_t e;

		if (!p) {
			fprintf(out, " L%d table %llx is not RAM\n", level, (unsigned long long)table);
			return;
		}
		e = *p;
		fprintf(out, " L%d=%llx", level, (unsigned long long)e);
		if (!(e & 1)) {
			fprintf(out, " (not present)\n");
			return;
		}
		if (level > 1 && level < 4 && (e & 0x80)) {
			uint64_t size = 1ULL << (12 + 9 * (level - 1));

			phys = (e & addr_mask & ~(size - 1)) | (gva & (size - 1));
			break;
		}
		table = e & addr_mask;
	}
	if (level < 1)
		phys = table | (gva & 0xfff);
	fprintf(out, " -> %llx:", (unsigned long long)phys);
	if (!qwords) {
		bytes = guest_mem_ptr(&vm->mem, phys, 16);
		for (int i = 0; bytes && i < 16; i++)
			fprintf(out, " %02x", bytes[i]);
	}
	for (int i = 0; i < qwords && (phys & 0xfff) + 8 * (i + 1) <= 0x1000; i++) {
		const uint64_t *q = guest_mem_ptr(&vm->mem, phys + 8 * i, 8);

		fprintf(out, " %llx", q ? (unsigned long long)*q : 0ULL);
	}
	fprintf(out, "\n");
}

static void debug_vcpu(struct vm *vm, struct vcpu *cpu, FILE *out)
{
	static const uint32_t msr_ids[] = { 0x10, 0x3b, 0x6e0, 0x1b, 0x4b564d01, 0x4b564d02, 0x4b564d03, 0x4b564d04,
					    0x4b564d05, 0x4b564d06 };
	struct {
		struct kvm_msrs hdr;
		struct kvm_msr_entry e[sizeof(msr_ids) / sizeof(msr_ids[0])];
	} msrs;
	struct kvm_mp_state mp = { 0 };
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct kvm_lapic_state lapic;
	struct kvm_vcpu_events ev;
	int n;

	memset(&msrs, 0, sizeof(msrs));
	if (ioctl(cpu->fd, KVM_GET_MP_STATE, &mp) < 0 || ioctl(cpu->fd, KVM_GET_REGS, &regs) < 0 ||
	    ioctl(cpu->fd, KVM_GET_SREGS, &sregs) < 0 || ioctl(cpu->fd, KVM_GET_LAPIC, &lapic) < 0 ||
	    ioctl(cpu->fd, KVM_GET_VCPU_EVENTS, &ev) < 0) {
		fprintf(out, "  vcpu %d: cannot read its state: %s\n", cpu->id, strerror(errno));
		return;
	}
	fprintf(out, "  vcpu %d: mp_state=%u rip=%llx rsp=%llx rflags=%llx (IF=%d) cs=%x cr3=%llx cr8=%llx apic_base=%llx\n",
		cpu->id, mp.mp_state, (unsigned long long)regs.rip, (unsigned long long)regs.rsp,
		(unsigned long long)regs.rflags, (int)((regs.rflags >> 9) & 1), sregs.cs.selector,
		(unsigned long long)sregs.cr3, (unsigned long long)sregs.cr8, (unsigned long long)sregs.apic_base);
	fprintf(out, "    cr0=%llx cr2=%llx cr4=%llx efer=%llx gdt=%llx idt=%llx ss=%x rax=%llx rbx=%llx rcx=%llx rdx=%llx "
		"rsi=%llx rdi=%llx rbp=%llx\n", (unsigned long long)sregs.cr0, (unsigned long long)sregs.cr2,
		(unsigned long long)sregs.cr4, (unsigned long long)sregs.efer, (unsigned long long)sregs.gdt.base,
		(unsigned long long)sregs.idt.base, sregs.ss.selector, (unsigned long long)regs.rax,
		(unsigned long long)regs.rbx, (unsigned long long)regs.rcx, (unsigned long long)regs.rdx,
		(unsigned long long)regs.rsi, (unsigned long long)regs.rdi, (unsigned long long)regs.rbp);
	debug_walk(vm, out, sregs.cr3, regs.rip, "rip", 0);
	debug_walk(vm, out, sregs.cr3, regs.rsp, "rsp", 24);
	for (int i = 0; i < vm->nr_cpus; i++) {
		struct kvm_sregs other;

		if (&vm->cpus[i] != cpu && ioctl(vm->cpus[i].fd, KVM_GET_SREGS, &other) == 0)
			{
			debug_walk(vm, out, other.cr3, regs.rip, "rip through the other vCPU's cr3", 0);
			debug_walk(vm, out, other.cr3, regs.rsp, "rsp through the other vCPU's cr3", 24);
		}
	}
	fprintf(out, "    lapic: id=%x tpr=%x ppr=%x svr=%x ldr=%x lvtt=%x tmict=%x tmcct=%x tdcr=%x icr=%x:%x esr=%x",
		apic_reg(&lapic, 0x20), apic_reg(&lapic, 0x80), apic_reg(&lapic, 0xa0), apic_reg(&lapic, 0xf0),
		apic_reg(&lapic, 0xd0), apic_reg(&lapic, 0x320), apic_reg(&lapic, 0x380), apic_reg(&lapic, 0x390),
		apic_reg(&lapic, 0x3e0), apic_reg(&lapic, 0x310), apic_reg(&lapic, 0x300), apic_reg(&lapic, 0x280));
	apic_vectors(out, "ISR", &lapic, 0x100);
	apic_vectors(out, "TMR", &lapic, 0x180);
	apic_vectors(out, "IRR", &lapic, 0x200);
	fprintf(out, "\n    events: exception inj=%u nr=%u pending=%u; interrupt inj=%u nr=%u soft=%u shadow=%u; "
		"nmi inj=%u pending=%u masked=%u; smi smm=%u pending=%u; sipi=%u flags=%x\n",
		ev.exception.injected, ev.exception.nr, ev.exception.pending, ev.interrupt.injected, ev.interrupt.nr,
		ev.interrupt.soft, ev.interrupt.shadow, ev.nmi.injected, ev.nmi.pending, ev.nmi.masked, ev.smi.smm,
		ev.smi.pending, ev.sipi_vector, ev.flags);
	msrs.hdr.nmsrs = sizeof(msr_ids) / sizeof(msr_ids[0]);
	for (uint32_t i = 0; i < msrs.hdr.nmsrs; i++)
		msrs.e[i].index = msr_ids[i];
	n = ioctl(cpu->fd, KVM_GET_MSRS, &msrs);
	fprintf(out, "    msrs:");
	for (int i = 0; i < n; i++)
		fprintf(out, " %x=%llx", msrs.e[i].index, (unsigned long long)msrs.e[i].data);
	for (int i = 0; i < n; i++) {
		uint64_t gpa = msrs.e[i].data & ~0x3fULL;
		const uint8_t *p;

		if (msrs.e[i].index == 0x4b564d03 && (msrs.e[i].data & 1) && (p = guest_mem_ptr(&vm->mem, gpa, 64)))
			fprintf(out, " steal.preempted=%u", p[16]);
		if (msrs.e[i].index == 0x4b564d04 && (msrs.e[i].data & 1) &&
		    (p = guest_mem_ptr(&vm->mem, msrs.e[i].data & ~0x3ULL, 4)))
			fprintf(out, " pv_eoi=%u", p[0]);
		if (msrs.e[i].index == 0x4b564d02 && (msrs.e[i].data & 1) && (p = guest_mem_ptr(&vm->mem, gpa, 8)))
			fprintf(out, " apf.flags=%u apf.token=%u", p[0] | p[1] << 8, p[4] | p[5] << 8);
	}
	fprintf(out, "\n");
}

void vm_debug_dump(struct vm *vm, FILE *out)
{
	struct kvm_irqchip chip = { .chip_id = 2 };
	struct kvm_clock_data clock = { 0 };
	int was_running = 0;
	char uart[256] = "";

	pthread_mutex_lock(&vm->lock);
	fprintf(out, "vm %p: state=%s alive=%d parked=%d pause_req=%d stop_req=%d busy=%d\n", (void *)vm,
		vm_state_name(vm->state), vm->alive, vm->parked, vm->pause_req, vm->stop_req, vm->busy);
	pthread_mutex_unlock(&vm->lock);
	for (int i = 0; i < vm->nr_cpus; i++) {
		struct vcpu *cpu = &vm->cpus[i];

		fprintf(out, "  vcpu %d thread: in_run=%d runs=%llu last_exit=%d io_pending=%d parked=%d\n", i,
			__atomic_load_n(&cpu->in_run, __ATOMIC_RELAXED),
			(unsigned long long)__atomic_load_n(&cpu->nr_runs, __ATOMIC_RELAXED),
			__atomic_load_n(&cpu->last_exit, __ATOMIC_RELAXED), cpu->io_pending, cpu->parked);
	}
	for (int i = 0; i < vm->nr_devices; i++)
		if (!strcmp(vm->devices[i].type->name, "com1"))
			uart_describe(vm->devices[i].state, uart, sizeof(uart));
	pthread_mutex_lock(&vm->console.lock);
	fprintf(out, "  com1: %s; host input queued=%zu, output unread=%zu notified=%d held=%d closed=%d total=%llu\n",
		uart, vm->console.in.len, vm->console.out.len, vm->console.out_notified, vm->console.held,
		vm->console.closed, (unsigned long long)vm->console.out_total);
	pthread_mutex_unlock(&vm->console.lock);
	if (ioctl(vm->vm_fd, KVM_GET_IRQCHIP, &chip) == 0) {
		struct kvm_ioapic_state *io = &chip.chip.ioapic;

		fprintf(out, "  ioapic: irr=%x", io->irr);
		for (int pin = 0; pin < KVM_IOAPIC_NUM_PINS; pin++) {
			typeof(io->redirtbl[0].fields) *f = &io->redirtbl[pin].fields;

			if (!f->mask || pin == 4)
				fprintf(out, " pin%d{vec=%02x dest=%x mode=%u destmode=%u trig=%s remote_irr=%u%s}", pin,
					f->vector, f->dest_id, f->delivery_mode, f->dest_mode, f->trig_mode ? "level" : "edge",
					f->remote_irr, f->mask ? " masked" : "");
		}
		fprintf(out, "\n");
	}
	if (ioctl(vm->vm_fd, KVM_GET_CLOCK, &clock) == 0)
		fprintf(out, "  kvmclock=%llu flags=%x\n", (unsigned long long)clock.clock, clock.flags);
	if (vm_hold(vm, &was_running, NULL) < 0) {
		fprintf(out, "  (not paused to read the vCPUs: the VM is %s)\n", vm_state_name(vm_get_state(vm)));
		return;
	}
	for (int i = 0; i < vm->nr_cpus; i++)
		debug_vcpu(vm, &vm->cpus[i], out);
	vm_release(vm, was_running);
	fprintf(out, "  (paused for this dump, and %s)\n", was_running ? "resumed" : "left paused");
}
