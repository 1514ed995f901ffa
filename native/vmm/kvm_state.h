/*
 * The KVM state of a VM as snapshot sections (kvm_state.c): the VM section, kvmclock, the PIT, the three irqchips and
 * every vCPU's registers. Save with every vCPU parked; restore on a new VM before any vCPU runs.
 */
#ifndef SMOL_KVM_STATE_H
#define SMOL_KVM_STATE_H

#include <stdint.h>

struct snap_blob;
struct snap_writer;
struct vm;
struct vm_error;

int kvm_state_save(struct vm *vm, struct snap_writer *w, struct vm_error *err);
/* tsc_khz: the rate the snapshot was taken at (0: unknown), scaled to where KVM can. */
int kvm_state_restore(struct vm *vm, const struct snap_blob *s, uint64_t tsc_khz, struct vm_error *err);

#endif
