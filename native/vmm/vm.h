/* The public API of the VMM library: create a VM, run it, talk to its console, end it. See docs/vmm.md. */
#ifndef SMOL_VM_H
#define SMOL_VM_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define VM_MAX_CPUS 64
#define VM_MIN_MEM_MIB 2
#define VM_MAX_MEM_MIB (256 * 1024)
#define VM_MIN_CONSOLE_LIMIT 64
#define VM_MAX_CONSOLE_LIMIT (64u << 20)

struct vm;

enum vm_state { VM_CREATED, VM_RUNNING, VM_PAUSED, VM_EXITED };

enum vm_exit_reason {
	VM_EXIT_NONE,
	VM_EXIT_RESET,		/* the guest pulsed the i8042 reset line */
	VM_EXIT_POWEROFF,	/* the guest powered off: ACPI S5 (code 0), or its exit code on the debug-exit port */
	VM_EXIT_SHUTDOWN,	/* triple fault */
	VM_EXIT_KILLED,		/* the host ended it */
	VM_EXIT_ERROR,		/* KVM could not run a vCPU */
	VM_EXIT_PANIC,		/* the guest kernel reported a panic on the pvpanic port */
};

struct vm_exit {
	enum vm_exit_reason reason;
	int code;
	char message[256];
};

struct vm_config {
	uint64_t mem_size;	/* bytes, a whole number of MiB */
	int nr_cpus;
	const char *kernel;
	const char *initrd;	/* NULL: none */
	const char *cmdline;	/* NULL: empty */
	uint64_t console_limit;	/* bytes of unread console output before the guest waits; 0: 1 MiB */
};

/* Both are called from VMM threads; they must not call back into the VM, only wake the owner. */
struct vm_callbacks {
	void *opaque;
	void (*on_output)(void *opaque);	/* console output is waiting: call vm_console_read() */
	void (*on_exit)(void *opaque);		/* every vCPU thread has ended; called once */
};

int vm_create(const struct vm_config *cfg, const struct vm_callbacks *cb, struct vm **out, struct vm_error *err);
int vm_start(struct vm *vm, struct vm_error *err);
int vm_pause(struct vm *vm, struct vm_error *err);	/* returns when every vCPU is parked */
int vm_resume(struct vm *vm, struct vm_error *err);
void vm_kill(struct vm *vm);				/* ends the VM and joins its threads; idempotent */
void vm_destroy(struct vm *vm);				/* vm_kill, then frees everything */

size_t vm_console_read(struct vm *vm, void *buf, size_t len);
size_t vm_console_write(struct vm *vm, const void *buf, size_t len);

enum vm_state vm_get_state(struct vm *vm);
void vm_get_exit(struct vm *vm, struct vm_exit *out);
const char *vm_state_name(enum vm_state state);
const char *vm_exit_reason_name(enum vm_exit_reason reason);

#endif
