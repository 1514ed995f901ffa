/* CPU time a VM's vCPU threads have used (docs/engine.md, "Metrics"): the engine samples it for CPU sparklines. */
#include "error.h"
#include "internal.h"

#include <errno.h>
#include <string.h>
#include <time.h>

int vm_cpu_time_ns(struct vm *vm, uint64_t *out, struct vm_error *err)
{
	int ret = 0;

	*out = 0;
	pthread_mutex_lock(&vm->lock);
	for (int i = 0; i < vm->nr_cpus && !ret; i++) {
		struct vcpu *cpu = &vm->cpus[i];
		clockid_t clock;
		struct timespec ts;
		int e;

		if (!cpu->thread_started || !cpu->running)
			continue;	/* not started, or finished (its thread may be gone) */
		e = pthread_getcpuclockid(cpu->thread, &clock);
		if (e || clock_gettime(clock, &ts) < 0)
			ret = vm_error_set(err, e ? e : errno, "cannot read vCPU %d's CPU time: %s", i,
					   strerror(e ? e : errno));
		else
			*out += (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	}
	pthread_mutex_unlock(&vm->lock);
	return ret;
}
