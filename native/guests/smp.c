/*
 * Brings up every other vCPU the MP table lists, the way an OS does: INIT-SIPI-SIPI through the local APIC to a
 * real-mode trampoline at 0x8000, which climbs to long mode on the VMM's page tables. Each AP says hello; the BSP
 * powers off with code 0 when all of them did, or code 1 (naming the missing ones) if one had not come up after
 * about 2^35 TSC cycles (10 to 20 s), so a lost wake-up ends the guest instead of hanging it.
 */
#include "guest.h"

#define TRAMPOLINE 0x8000
#define LAPIC 0xfee00000UL
#define LAPIC_ID 0x20
#define LAPIC_SVR 0xf0
#define LAPIC_ICR_LO 0x300
#define LAPIC_ICR_HI 0x310
#define MAX_CPUS 16

extern const uint8_t tramp_start[], tramp_end[];
extern uint64_t tramp_entry, tramp_stack;

static uint8_t ap_stacks[MAX_CPUS][8192] __attribute__((aligned(16)));
static volatile int ap_started, print_lock;

__asm__(".text\n"
	".code16\n"
	".globl tramp_start, tramp_end, tramp_entry, tramp_stack\n"
	"tramp_start:\n"
	"  cli\n"
	"  xor %ax, %ax\n"
	"  mov %ax, %ds\n"
	"  lgdtl (tramp_gdtr - tramp_start + 0x8000)\n"
	"  mov %cr0, %eax\n"
	"  or $1, %eax\n"
	"  mov %eax, %cr0\n"
	"  ljmpl $0x08, $(tramp_32 - tramp_start + 0x8000)\n"
	".code32\n"
	"tramp_32:\n"
	"  mov $0x10, %ax\n"
	"  mov %ax, %ds\n"
	"  mov %ax, %ss\n"
	"  mov %cr4, %eax\n"
	"  or $0x620, %eax\n"		/* PAE, OSFXSR, OSXMMEXCPT */
	"  mov %eax, %cr4\n"
	"  mov $0x9000, %eax\n"		/* the VMM's identity page tables */
	"  mov %eax, %cr3\n"
	"  mov $0xc0000080, %ecx\n"
	"  rdmsr\n"
	"  or $0x100, %eax\n"		/* EFER.LME */
	"  wrmsr\n"
	"  mov %cr0, %eax\n"
	"  or $0x80000000, %eax\n"
	"  mov %eax, %cr0\n"
	"  ljmpl $0x18, $(tramp_64 - tramp_start + 0x8000)\n"
	".code64\n"
	"tramp_64:\n"
	"  mov $8192, %rax\n"		/* per-AP stack: tramp_stack += 8192, atomically */
	"  lock xadd %rax, (tramp_stack - tramp_start + 0x8000)\n"
	"  mov %rax, %rsp\n"
	"  mov (tramp_entry - tramp_start + 0x8000), %rax\n"
	"  jmp *%rax\n"
	".balign 8\n"
	"tramp_gdt:\n"
	"  .quad 0\n"
	"  .quad 0x00cf9a000000ffff\n"	/* 32-bit code */
	"  .quad 0x00cf92000000ffff\n"	/* data */
	"  .quad 0x00af9a000000ffff\n"	/* 64-bit code */
	"tramp_gdtr:\n"
	"  .word 4 * 8 - 1\n"
	"  .long tramp_gdt - tramp_start + 0x8000\n"
	".balign 8\n"
	"tramp_entry: .quad 0\n"
	"tramp_stack: .quad 0\n"
	"tramp_end:\n");

static volatile uint8_t ap_up[MAX_CPUS];

static inline uint64_t rdtsc(void)
{
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
}

/* A busy wait of `cycles` TSC cycles: the start-up delays of the MP spec, which real OSes keep under KVM too. */
static void tsc_delay(uint64_t cycles)
{
	uint64_t start = rdtsc();

	while (rdtsc() - start < cycles)
		__asm__ volatile("pause");
}

static inline uint32_t lapic_read(unsigned reg) { return *(volatile uint32_t *)(LAPIC + reg); }
static inline void lapic_write(unsigned reg, uint32_t v) { *(volatile uint32_t *)(LAPIC + reg) = v; }

static void lock(void)
{
	while (__atomic_exchange_n(&print_lock, 1, __ATOMIC_ACQUIRE))
		__asm__ volatile("pause");
}

static void unlock(void)
{
	__atomic_store_n(&print_lock, 0, __ATOMIC_RELEASE);
}

__attribute__((noreturn)) void ap_main(void)
{
	unsigned id = lapic_read(LAPIC_ID) >> 24;

	lock();
	uart_puts("smp: cpu ");
	uart_putu(id);
	uart_puts(" up\n");
	unlock();
	if (id < MAX_CPUS)
		ap_up[id] = 1;
	__atomic_fetch_add(&ap_started, 1, __ATOMIC_SEQ_CST);
	for (;;)
		__asm__ volatile("cli; hlt");
}

/* Counts the processor entries of the MP table the VMM wrote at the end of base memory. */
static int mp_cpu_count(void)
{
	for (uintptr_t p = 0x9fc00; p < 0xa0000; p += 16) {
		const uint8_t *mpf = (const uint8_t *)p;

		if (mpf[0] == '_' && mpf[1] == 'M' && mpf[2] == 'P' && mpf[3] == '_') {
			const uint8_t *table = (const uint8_t *)(uintptr_t) * (const uint32_t *)(mpf + 4);
			const uint8_t *e = table + 44, *end = table + *(const uint16_t *)(table + 4);
			int cpus = 0;

			while (e < end) {
				if (*e == 0) {
					cpus++;
					e += 20;
				} else {
					e += 8;
				}
			}
			return cpus;
		}
	}
	return 0;
}

static void icr_send(uint32_t apic_id, uint32_t lo)
{
	lapic_write(LAPIC_ICR_HI, apic_id << 24);
	lapic_write(LAPIC_ICR_LO, lo);
	while (lapic_read(LAPIC_ICR_LO) & (1u << 12))	/* delivery pending */
		__asm__ volatile("pause");
}

int main(const uint8_t *bp)
{
	int cpus = mp_cpu_count();
	uint8_t *dst = (uint8_t *)TRAMPOLINE;

	(void)bp;
	uart_init();
	uart_puts("smp: the MP table lists ");
	uart_putu((uint64_t)cpus);
	uart_puts(" cpus\n");
	if (cpus > MAX_CPUS)
		cpus = MAX_CPUS;
	tramp_entry = (uint64_t)(uintptr_t)ap_main;
	tramp_stack = (uint64_t)(uintptr_t)ap_stacks[1];	/* xadd hands out the top of stack 0, 1, ... */
	for (const uint8_t *s = tramp_start; s < tramp_end; s++)
		*dst++ = *s;
	lapic_write(LAPIC_SVR, 0x1ff);	/* software-enable the local APIC */
	for (int id = 1; id < cpus; id++) {
		icr_send((uint32_t)id, 0x4500);			/* INIT, assert */
		tsc_delay(1u << 24);				/* ~10 ms */
		icr_send((uint32_t)id, 0x4600 | (TRAMPOLINE >> 12));	/* STARTUP */
		tsc_delay(1u << 20);				/* ~300 us */
		icr_send((uint32_t)id, 0x4600 | (TRAMPOLINE >> 12));
	}
	for (uint64_t start = rdtsc(); ap_started < cpus - 1 && rdtsc() - start < (1ULL << 35);)
		__asm__ volatile("pause");
	lock();
	uart_puts("smp: ");
	uart_putu((uint64_t)ap_started + 1);
	uart_puts(" of ");
	uart_putu((uint64_t)cpus);
	uart_puts(" cpus up\n");
	for (int id = 1; id < cpus; id++) {
		if (!ap_up[id]) {
			uart_puts("smp: cpu ");
			uart_putu((uint64_t)id);
			uart_puts(" never came up\n");
		}
	}
	unlock();
	return ap_started == cpus - 1 ? 0 : 1;
}
