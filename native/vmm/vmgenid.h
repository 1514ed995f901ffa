/*
 * The VM generation ID's state (vmgenid_vm.c has the device): where the 16-byte ID is in guest RAM and which GSI
 * signals a new one. The guest learned both from the DSDT at boot, so a restore needs the same ones. Plain data
 * and its codec, no KVM.
 */
#ifndef SMOL_VMGENID_H
#define SMOL_VMGENID_H

#include <stddef.h>
#include <stdint.h>

struct le_writer;

struct vmgenid_state {
	uint64_t addr;
	uint32_t gsi;
};

#define VMGENID_STATE_LEN 16	/* u64 address, u32 GSI, u32 reserved (0) */
void vmgenid_state_encode(const struct vmgenid_state *s, struct le_writer *w);
/* Untrusted bytes: returns what is wrong, or NULL. */
const char *vmgenid_state_decode(const uint8_t *data, size_t len, struct vmgenid_state *s);

#endif
