/*
 * Where an operation's time goes (docs/snapshots.md, "Where the time goes"): a step timer for creating, restoring
 * and forking a VM. The thread that runs the operation makes a trace current (vm_trace_begin); the VMM's code marks
 * the end of each step on it (trace_step), with the KVM ioctls that thread made since the last mark (every KVM ioctl
 * of the VMM goes through kvm_ioctl, which counts them per thread). The VM keeps the trace and the times of its
 * first vCPU entry and first console output; the binding returns them (vm.trace() in JavaScript). With no current
 * trace a step is a thread-local pointer test, so tracing is always on.
 */
#ifndef SMOL_TRACE_H
#define SMOL_TRACE_H

#include <stdint.h>
#include <sys/ioctl.h>

#define VM_TRACE_MAX_STEPS 40
#define VM_TRACE_NAME_MAX 40

struct vm_trace_step {
	char name[VM_TRACE_NAME_MAX];
	double ms;		/* since the previous step ended (or the trace began) */
	uint32_t kvm_ioctls;	/* KVM ioctls the operation's thread made during the step */
};

struct vm_trace {
	double t0;		/* CLOCK_MONOTONIC ms when the operation was asked for */
	double t_last;
	uint32_t ioctls_last;
	int nr_steps;
	int dropped;		/* steps past VM_TRACE_MAX_STEPS, folded into the last one */
	struct vm_trace_step steps[VM_TRACE_MAX_STEPS];
};

/* KVM ioctls made by this thread so far. */
extern __thread uint32_t trace_kvm_ioctls;

#define kvm_ioctl(fd, req, arg) (trace_kvm_ioctls++, ioctl((fd), (req), (arg)))

double trace_now_ms(void);
/* Starts `t` at now and makes it this thread's current trace (NULL: none). */
void vm_trace_begin(struct vm_trace *t);
/* Makes `t` (already begun, or NULL) this thread's current trace; returns the one it replaces. */
struct vm_trace *vm_trace_use(struct vm_trace *t);
struct vm_trace *vm_trace_current(void);
/* Ends the current step of the current trace, naming it; nothing without a current trace. */
void trace_step(const char *name);
/* trace_step with a printf-style name ("load com1"). */
void trace_stepf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same on a given trace. */
void vm_trace_mark(struct vm_trace *t, const char *name);

#endif
