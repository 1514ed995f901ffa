/* What the VMM's own files share: the VM and vCPU structures. Not part of the library's API. */
#ifndef SMOL_INTERNAL_H
#define SMOL_INTERNAL_H

#include <linux/kvm.h>
#include <pthread.h>

#include "console.h"
#include "guest_mem.h"
#include "io.h"
#include "loader.h"
#include "vm.h"

struct vcpu {
	struct vm *vm;
	int id;
	int fd;
	struct kvm_run *run;
	size_t run_size;
	pthread_t thread;
	int thread_started;
	int running;		/* under vm->lock: the thread has not finished yet (safe to signal) */
	int parked;
};

struct device_instance {
	const struct device_type *type;
	void *state;
};

struct vm {
	int kvm_fd, vm_fd;
	struct guest_mem mem;
	int nr_cpus;
	struct vcpu *cpus;
	struct io_bus pio, mmio;
	struct console console;
	void (*console_input_ready)(void *dev);	/* set by the device that serves the console */
	void *console_dev;
	struct device_instance devices[16];
	int nr_devices;
	struct kernel_image kernel;
	struct vm_callbacks cb;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	enum vm_state state;
	int pause_req, stop_req, alive, parked, joined, exit_notified;
	struct vm_exit exit;
};

/* Ends the VM from inside (a device or a vCPU): records the first reason and asks every vCPU to stop. */
void vm_end(struct vm *vm, enum vm_exit_reason reason, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
int vm_irq_line(struct vm *vm, unsigned irq, int level);

/* cpu.c */
int vcpu_create(struct vm *vm, int id, struct vm_error *err);
int vcpu_setup_boot(struct vcpu *cpu, uint64_t entry, struct vm_error *err);
void vcpu_destroy(struct vcpu *cpu);
void *vcpu_thread(void *arg);
void vcpu_kick(struct vcpu *cpu);
void vcpu_signal_init(void);

#endif
