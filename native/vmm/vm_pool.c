/*
 * Prepared VMs (docs/snapshots.md, "Prepared VMs"). The first memory slot a new KVM VM gets costs 5 to 11 ms
 * whatever its size (the kernel sets something up once per VM and waits for it), a second one 0.03 ms. So VMs are
 * made ahead, in the background: KVM_CREATE_VM, the TSS and identity-map addresses, the in-kernel irqchip and PIT,
 * then a one-page slot over a private zero page, registered and deleted again. Such a VM has no memory, no vCPU and
 * has never run; a create, restore or fork child takes one (vm_pool_take) and goes on as with a VM it made itself.
 * A VM is never given back: one that ran is destroyed as before, so nothing passes from one VM to another.
 *
 * How many are kept follows demand: the largest batch of the last 30 seconds, at most `max` (SMOL_VM_POOL, default
 * 64; 0 turns it off). A fork(n) announces a batch of n (vm_pool_want) and other creates and restores are batches
 * of one, to which the takes of the last 100 ms are added (one at a time but quickly, they need more than one
 * ready: a refill takes about 10 ms). A background thread (smol-vm-pool) tops the pool up with up to 8 helper threads at once (the
 * kernel's wait overlaps, so 8 take about as long as one), at once, except while a fork takes a batch the pool has
 * enough for (making VMs then would compete with it for the CPU). It closes the VMs demand no longer needs. A second thread (smol-vm-reaper)
 * closes the VMs that are destroyed (vm_pool_release): a KVM VM's last close takes 15 to 30 ms in the kernel (its
 * PIT's thread is stopped, its MMU torn down), which would otherwise block whoever destroys it, the JavaScript
 * thread included, and would hold up refills if the pool's thread did it. vm_pool_drain, called when the module
 * unloads, stops both and closes every prepared VM and every destroyed one not closed yet.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "vm_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define POOL_WINDOW_S 30	/* demand is remembered this long */
#define POOL_QUIET_MS 10	/* a batch that has enough is left alone until takes stop this long */
#define POOL_RATE_MS 100	/* takes this close together count as one batch too */
#define POOL_RECENT 64
#define POOL_HELPERS 8		/* VMs made at once */
#define POOL_DEFAULT_MAX 64

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int vm_fds[VM_POOL_LIMIT];	/* ready VMs, a stack */
	unsigned ready;
	unsigned max;
	int configured;
	pthread_t thread;
	int thread_started, stop;
	unsigned long long taken, missed, made, closed, failed;
	/* the largest batch of takes and misses in each of the last POOL_WINDOW_S seconds */
	long long bucket_second[POOL_WINDOW_S];
	unsigned bucket_count[POOL_WINDOW_S];
	double last_take_ms;
	double recent[POOL_RECENT];	/* when the last takes were, a ring */
	unsigned next_recent;
	unsigned outstanding;	/* VMs the announced batch has not taken yet */
	/* fds of destroyed VMs that the reaper thread closes (vm_pool_release) */
	pthread_cond_t reap_cond;
	pthread_t reaper;
	int reaper_started;
	int *reap;
	unsigned nr_reap, reap_cap, reaping;	/* queued; being closed */
	unsigned long long reaped;
} pool = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER, .reap_cond = PTHREAD_COND_INITIALIZER };

static long long now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec;
}

/* Under pool.lock. */
static void configure_locked(void)
{
	const char *env;
	char *end;
	unsigned long v;

	if (pool.configured)
		return;
	pool.configured = 1;
	pool.max = POOL_DEFAULT_MAX;
	env = getenv("SMOL_VM_POOL");
	if (env && *env) {
		errno = 0;
		v = strtoul(env, &end, 10);
		if (!errno && !*end && v <= VM_POOL_LIMIT)
			pool.max = (unsigned)v;
		/* anything else keeps the default; vm_pool_set_max reports bad values to its caller */
	}
}

/* Under pool.lock: how many VMs recent demand wants ready. */
static unsigned target_locked(void)
{
	long long now = now_s();
	unsigned peak = 0;

	for (int i = 0; i < POOL_WINDOW_S; i++)
		if (now - pool.bucket_second[i] < POOL_WINDOW_S && pool.bucket_count[i] > peak)
			peak = pool.bucket_count[i];
	return peak < pool.max ? peak : pool.max;
}

/* Takes in the last POOL_RATE_MS: one at a time, but that quickly, they need as many ready (a refill takes ~10 ms). */
static unsigned recent_locked(void)
{
	double now = trace_now_ms();
	unsigned n = 0;

	for (int i = 0; i < POOL_RECENT; i++)
		n += pool.recent[i] && now - pool.recent[i] < POOL_RATE_MS;
	return n;
}

static void note_demand_locked(unsigned batch)
{
	long long now = now_s();
	int b = (int)(now % POOL_WINDOW_S);

	if (pool.bucket_second[b] != now) {
		pool.bucket_second[b] = now;
		pool.bucket_count[b] = 0;
	}
	if (batch > pool.bucket_count[b])
		pool.bucket_count[b] = batch;
}

/*
 * The thread starts at the first demand, on the thread that asked (a libuv worker, never a vCPU thread, so it
 * inherits the process's seccomp filter in a jailed vmhost). Under pool.lock.
 */
static void *pool_thread(void *arg);
static void close_all(int *fds, unsigned n);

static void start_locked(void)
{
	if (!pool.thread_started && pthread_create(&pool.thread, NULL, pool_thread, NULL) == 0)
		pool.thread_started = 1;
	pthread_cond_broadcast(&pool.cond);
}

/* A VM ready for vm_build (vm.c's platform set-up done, and the kernel's first-slot cost paid), or -errno. */
static int prepare_one(void)
{
	struct vm_error err;
	struct kvm_userspace_memory_region slot = { .slot = 0, .guest_phys_addr = 0, .memory_size = 4096 };
	void *page;
	int kvm_fd = vm_kvm_fd(&err), vm_fd, ret;

	if (kvm_fd < 0)
		return -err.code;
	vm_fd = kvm_ioctl(kvm_fd, KVM_CREATE_VM, 0);
	if (vm_fd < 0)
		return -errno;
	ret = vm_platform_setup(vm_fd, &err) < 0 ? -err.code : 0;
	page = ret ? MAP_FAILED : mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!ret && page == MAP_FAILED)
		ret = -errno;
	if (!ret) {
		slot.userspace_addr = (uint64_t)(uintptr_t)page;
		if (kvm_ioctl(vm_fd, KVM_SET_USER_MEMORY_REGION, &slot) < 0)
			ret = -errno;
		slot.memory_size = 0;	/* deleted again: the VM is left with no memory at all */
		if (!ret && kvm_ioctl(vm_fd, KVM_SET_USER_MEMORY_REGION, &slot) < 0)
			ret = -errno;
		munmap(page, 4096);
	}
	if (ret) {
		close(vm_fd);
		return ret;
	}
	return vm_fd;
}

static void *helper(void *arg)
{
	int *out = arg;

	*out = prepare_one();
	return NULL;
}

/* Makes n (at most POOL_HELPERS) VMs at once into fds; those that failed are negative. Without the lock. */
static void prepare_some(unsigned n, int fds[POOL_HELPERS])
{
	pthread_t t[POOL_HELPERS];
	int started[POOL_HELPERS] = { 0 };

	for (unsigned i = 0; i < n; i++)
		started[i] = i > 0 && pthread_create(&t[i], NULL, helper, &fds[i]) == 0;
	fds[0] = prepare_one();
	for (unsigned i = 1; i < n; i++) {
		if (started[i])
			pthread_join(t[i], NULL);
		else
			fds[i] = prepare_one();
	}
}

/* Under pool.lock: waits ms (or until signalled). */
static void wait_ms(double ms)
{
	struct timespec until;
	long long ns;

	clock_gettime(CLOCK_REALTIME, &until);
	ns = until.tv_nsec + (long long)(ms * 1e6);
	until.tv_sec += ns / 1000000000;
	until.tv_nsec = ns % 1000000000;
	pthread_cond_timedwait(&pool.cond, &pool.lock, &until);
}

static void *pool_thread(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "smol-vm-pool");
	pthread_mutex_lock(&pool.lock);
	while (!pool.stop) {
		unsigned target = target_locked();
		double quiet = trace_now_ms() - pool.last_take_ms;


		if (pool.ready < target && quiet < POOL_QUIET_MS && pool.outstanding && pool.outstanding <= pool.ready) {
			/* A batch is being taken and has enough: making VMs now would take the CPU from it. */
			wait_ms(POOL_QUIET_MS - quiet);
			continue;
		}
		if (pool.ready < target) {
			unsigned n = target - pool.ready;
			int fds[POOL_HELPERS];

			if (n > POOL_HELPERS)
				n = POOL_HELPERS;
			pthread_mutex_unlock(&pool.lock);
			prepare_some(n, fds);
			pthread_mutex_lock(&pool.lock);
			for (unsigned i = 0; i < n; i++) {
				if (fds[i] < 0) {
					pool.failed++;
				} else if (pool.ready < VM_POOL_LIMIT && !pool.stop) {
					pool.vm_fds[pool.ready++] = fds[i];
					pool.made++;
				} else {
					close(fds[i]);
				}
			}
			if (fds[0] < 0)
				wait_ms(1000);	/* KVM refuses more VMs now (memory, fds): again in a second, not in a loop */
			continue;
		}
		if (pool.ready > target) {
			int fd = pool.vm_fds[--pool.ready];

			pthread_mutex_unlock(&pool.lock);
			close(fd);	/* slow (the kernel stops the PIT's thread): never under the lock */
			pthread_mutex_lock(&pool.lock);
			pool.closed++;
			continue;
		}
		/* Demand moves on with time: look again within a second, or as soon as a VM is taken. */
		wait_ms(1000);
	}
	pthread_mutex_unlock(&pool.lock);
	return NULL;
}

int vm_pool_take(void)
{
	int fd = -1;

	pthread_mutex_lock(&pool.lock);
	configure_locked();
	if (pool.max == 0 || pool.stop) {
		pthread_mutex_unlock(&pool.lock);
		return -1;
	}
	pool.last_take_ms = trace_now_ms();
	pool.recent[pool.next_recent++ % POOL_RECENT] = pool.last_take_ms;
	if (pool.outstanding)
		pool.outstanding--;
	else
		note_demand_locked(recent_locked());
	if (pool.ready) {
		fd = pool.vm_fds[--pool.ready];
		pool.taken++;
	} else {
		pool.missed++;
	}
	start_locked();
	pthread_mutex_unlock(&pool.lock);
	return fd;
}

/* Closes destroyed VMs' fds, apart from the pool's thread: a close waits in the kernel and must not hold up a refill. */
static void *reaper_thread(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "smol-vm-reaper");
	pthread_mutex_lock(&pool.lock);
	while (!pool.stop) {
		int *fds = pool.reap;
		unsigned n = pool.nr_reap;

		if (!n) {
			pthread_cond_wait(&pool.reap_cond, &pool.lock);
			continue;
		}
		pool.reap = NULL;
		pool.nr_reap = pool.reap_cap = 0;
		pool.reaping = n;
		pthread_mutex_unlock(&pool.lock);
		close_all(fds, n);
		free(fds);
		pthread_mutex_lock(&pool.lock);
		pool.reaping = 0;
		pool.reaped += n;
	}
	pthread_mutex_unlock(&pool.lock);
	return NULL;
}

void vm_pool_release(int vm_fd)
{
	pthread_mutex_lock(&pool.lock);
	/* Started by the first destroy (the JavaScript thread or a libuv worker: never a vCPU thread). */
	if (!pool.reaper_started && !pool.stop && pthread_create(&pool.reaper, NULL, reaper_thread, NULL) == 0)
		pool.reaper_started = 1;
	if (pool.reaper_started && !pool.stop && pool.nr_reap == pool.reap_cap) {
		unsigned cap = pool.reap_cap ? 2 * pool.reap_cap : 64;
		int *grown = realloc(pool.reap, cap * sizeof(int));

		if (grown) {
			pool.reap = grown;
			pool.reap_cap = cap;
		}
	}
	if (pool.reaper_started && !pool.stop && pool.nr_reap < pool.reap_cap) {
		pool.reap[pool.nr_reap++] = vm_fd;
		pthread_cond_signal(&pool.reap_cond);
		vm_fd = -1;
	}
	pthread_mutex_unlock(&pool.lock);
	if (vm_fd >= 0)
		close(vm_fd);	/* no thread to hand it to (stopping, or none could start), or no memory: here */
}

void vm_pool_want(unsigned n)
{
	pthread_mutex_lock(&pool.lock);
	configure_locked();
	if (pool.max && !pool.stop && n) {
		note_demand_locked(n + recent_locked());	/* forks of one child each, quickly, need more than one */
		pool.outstanding = n;
		start_locked();
	}
	pthread_mutex_unlock(&pool.lock);
}

int vm_pool_set_max(unsigned max, struct vm_error *err)
{
	if (max > VM_POOL_LIMIT)
		return vm_error_set(err, EINVAL, "the prepared VM pool holds at most %d VMs (got %u)", VM_POOL_LIMIT, max);
	pthread_mutex_lock(&pool.lock);
	configure_locked();
	pool.max = max;
	pthread_cond_broadcast(&pool.cond);
	pthread_mutex_unlock(&pool.lock);
	return 0;
}

void vm_pool_get_stats(struct vm_pool_stats *out)
{
	pthread_mutex_lock(&pool.lock);
	configure_locked();
	out->max = pool.max;
	out->target = target_locked();
	out->ready = pool.ready;
	out->taken = pool.taken;
	out->missed = pool.missed;
	out->made = pool.made;
	out->closed = pool.closed;
	out->failed = pool.failed;
	out->reaped = pool.reaped;
	out->reaping = pool.nr_reap + pool.reaping;
	out->thread = pool.thread_started;
	pthread_mutex_unlock(&pool.lock);
}

static void *closer(void *arg)
{
	int *fds = arg;

	for (int i = 0; fds[i] >= 0; i++)
		close(fds[i]);
	return NULL;
}

/* Closes fds[0..n) on up to POOL_HELPERS threads: each close waits in the kernel, and the waits overlap. */
static void close_all(int *fds, unsigned n)
{
	pthread_t t[POOL_HELPERS];
	int *lists[POOL_HELPERS] = { NULL };
	int started[POOL_HELPERS] = { 0 };
	unsigned k = n < POOL_HELPERS ? n : POOL_HELPERS;

	for (unsigned h = 0; h < k; h++) {
		unsigned m = 0;

		lists[h] = malloc((n / k + 2) * sizeof(int));
		if (!lists[h])
			continue;
		for (unsigned i = h; i < n; i += k)
			lists[h][m++] = fds[i];
		lists[h][m] = -1;
		started[h] = pthread_create(&t[h], NULL, closer, lists[h]) == 0;
		if (!started[h])
			closer(lists[h]);
	}
	for (unsigned h = 0; h < k; h++) {
		if (started[h])
			pthread_join(t[h], NULL);
		if (!lists[h])
			for (unsigned i = h; i < n; i += k)
				close(fds[i]);
		free(lists[h]);
	}
}

void vm_pool_drain(void)
{
	int started, reaper, fds[VM_POOL_LIMIT], *reap;
	unsigned n, nr_reap;

	pthread_mutex_lock(&pool.lock);
	pool.stop = 1;
	started = pool.thread_started;
	reaper = pool.reaper_started;
	pthread_cond_broadcast(&pool.cond);
	pthread_cond_broadcast(&pool.reap_cond);
	pthread_mutex_unlock(&pool.lock);
	if (started)
		pthread_join(pool.thread, NULL);
	if (reaper)
		pthread_join(pool.reaper, NULL);
	pthread_mutex_lock(&pool.lock);
	n = pool.ready;
	memcpy(fds, pool.vm_fds, n * sizeof(int));
	pool.ready = 0;
	pool.closed += n;
	reap = pool.reap;
	nr_reap = pool.nr_reap;
	pool.reap = NULL;
	pool.nr_reap = pool.reap_cap = 0;
	pool.reaped += nr_reap;
	pthread_mutex_unlock(&pool.lock);
	close_all(fds, n);
	if (reap)
		close_all(reap, nr_reap);
	free(reap);
	pthread_mutex_lock(&pool.lock);
	/* A later take may start it again (a test that drains and goes on). */
	pool.thread_started = 0;
	pool.reaper_started = 0;
	pool.stop = 0;
	memset(pool.bucket_count, 0, sizeof(pool.bucket_count));
	memset(pool.recent, 0, sizeof(pool.recent));
	pool.outstanding = 0;
	pthread_mutex_unlock(&pool.lock);
}
