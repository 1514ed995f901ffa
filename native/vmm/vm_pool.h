/*
 * Prepared VMs (vm_pool.c; docs/snapshots.md, "Prepared VMs"): empty KVM VMs made ahead in the background, so that
 * creating, restoring or forking a VM does not wait for the kernel's first-slot set-up. The library's API is in
 * vm.h (vm_pool_set_max, vm_pool_get_stats, vm_pool_drain); vm.c takes them.
 */
#ifndef SMOL_VM_POOL_H
#define SMOL_VM_POOL_H

#include "vm.h"

/* A prepared VM's fd (its platform set up, no memory, no vCPU), or -1 when none is ready. Counts as demand. */
int vm_pool_take(void);
/*
 * The fd of a destroyed VM (its vCPUs, memory and devices gone): closed by the pool's thread, since its last close
 * is slow; here when there is no thread (the pool off or stopping).
 */
void vm_pool_release(int vm_fd);

#endif
