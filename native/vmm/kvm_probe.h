/* What this host's KVM can do, for `smol doctor` and for clear errors before a VM is created. */
#ifndef SMOL_KVM_PROBE_H
#define SMOL_KVM_PROBE_H

struct kvm_cap_info {
	const char *name;	/* KVM_CAP_ name without the prefix */
	int required;		/* the VMM refuses to run without it */
	int present;
};

#define KVM_PROBE_MAX_CAPS 24

struct kvm_probe {
	int present;		/* /dev/kvm exists */
	int usable;		/* it opened read-write and speaks API 12 */
	int api_version;
	char error[256];	/* why it is not usable */
	const char *implementation;	/* "hardware", "pvm" or "unknown" */
	struct kvm_cap_info caps[KVM_PROBE_MAX_CAPS];
	int nr_caps;
};

void kvm_probe(struct kvm_probe *out);

#endif
