/* The step timer of trace.h. */
#define _GNU_SOURCE
#include "trace.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

__thread uint32_t trace_kvm_ioctls;
static __thread struct vm_trace *current;

double trace_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void vm_trace_begin(struct vm_trace *t)
{
	if (t) {
		memset(t, 0, sizeof(*t));
		t->t0 = t->t_last = trace_now_ms();
		t->ioctls_last = trace_kvm_ioctls;
	}
	current = t;
}

struct vm_trace *vm_trace_use(struct vm_trace *t)
{
	struct vm_trace *old = current;

	if (t)
		t->ioctls_last = trace_kvm_ioctls;	/* ioctls made while another trace was current are not its */
	current = t;
	return old;
}

struct vm_trace *vm_trace_current(void)
{
	return current;
}

void vm_trace_mark(struct vm_trace *t, const char *name)
{
	double now;
	struct vm_trace_step *s;

	if (!t)
		return;
	now = trace_now_ms();
	if (t->nr_steps == VM_TRACE_MAX_STEPS) {
		s = &t->steps[VM_TRACE_MAX_STEPS - 1];
		t->dropped++;
		snprintf(s->name, sizeof(s->name), "%d more steps", t->dropped + 1);
	} else {
		s = &t->steps[t->nr_steps++];
		snprintf(s->name, sizeof(s->name), "%s", name);
		s->ms = 0;
		s->kvm_ioctls = 0;
	}
	s->ms += now - t->t_last;
	s->kvm_ioctls += trace_kvm_ioctls - t->ioctls_last;
	t->t_last = now;
	t->ioctls_last = trace_kvm_ioctls;
}

void trace_step(const char *name)
{
	vm_trace_mark(current, name);
}

void trace_stepf(const char *fmt, ...)
{
	char name[VM_TRACE_NAME_MAX];
	va_list ap;

	if (!current)
		return;
	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	vm_trace_mark(current, name);
}
