#include "kvm_probe.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct { int cap; const char *name; int required; } probed_caps[] = {
	{ KVM_CAP_IRQCHIP, "IRQCHIP", 1 },
	{ KVM_CAP_USER_MEMORY, "USER_MEMORY", 1 },
	{ KVM_CAP_SET_TSS_ADDR, "SET_TSS_ADDR", 1 },
	{ KVM_CAP_PIT2, "PIT2", 1 },
	{ KVM_CAP_EXT_CPUID, "EXT_CPUID", 1 },
	{ KVM_CAP_IMMEDIATE_EXIT, "IMMEDIATE_EXIT", 1 },
	{ KVM_CAP_IOEVENTFD, "IOEVENTFD", 0 },
	{ KVM_CAP_IRQFD, "IRQFD", 0 },
	{ KVM_CAP_XSAVE, "XSAVE", 0 },
	{ KVM_CAP_XCRS, "XCRS", 0 },
	{ KVM_CAP_VCPU_EVENTS, "VCPU_EVENTS", 0 },
	{ KVM_CAP_ADJUST_CLOCK, "ADJUST_CLOCK", 0 },
	{ KVM_CAP_KVMCLOCK_CTRL, "KVMCLOCK_CTRL", 0 },
	{ KVM_CAP_TSC_DEADLINE_TIMER, "TSC_DEADLINE_TIMER", 0 },
	{ KVM_CAP_MP_STATE, "MP_STATE", 0 },
	{ KVM_CAP_DIRTY_LOG_RING, "DIRTY_LOG_RING", 0 },
	{ KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2, "MANUAL_DIRTY_LOG_PROTECT2", 0 },
};

static int path_exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

static const char *implementation(int present)
{
	if (!present)
		return "unknown";	/* a kvm module may be loaded without providing /dev/kvm (a PVM guest's is) */
	/* PVM (a software KVM for guests without virtualization extensions) registers as its own module. */
	if (path_exists("/sys/module/kvm_pvm"))
		return "pvm";
	if (path_exists("/sys/module/kvm_intel") || path_exists("/sys/module/kvm_amd"))
		return "hardware";
	return "unknown";
}

void kvm_probe(struct kvm_probe *out)
{
	int fd;

	memset(out, 0, sizeof(*out));
	out->present = path_exists("/dev/kvm");
	out->implementation = implementation(out->present);
	for (size_t i = 0; i < sizeof(probed_caps) / sizeof(probed_caps[0]) && i < KVM_PROBE_MAX_CAPS; i++) {
		out->caps[i].name = probed_caps[i].name;
		out->caps[i].required = probed_caps[i].required;
		out->nr_caps++;
	}
	fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		snprintf(out->error, sizeof(out->error), "cannot open /dev/kvm: %s", strerror(errno));
		return;
	}
	out->api_version = ioctl(fd, KVM_GET_API_VERSION, 0);
	if (out->api_version != KVM_API_VERSION) {
		snprintf(out->error, sizeof(out->error), "/dev/kvm speaks KVM API %d; the VMM needs %d",
			 out->api_version, KVM_API_VERSION);
	} else {
		out->usable = 1;
	}
	for (int i = 0; i < out->nr_caps; i++)
		out->caps[i].present = ioctl(fd, KVM_CHECK_EXTENSION, probed_caps[i].cap) > 0;
	for (int i = 0; i < out->nr_caps && out->usable; i++) {
		if (out->caps[i].required && !out->caps[i].present) {
			out->usable = 0;
			snprintf(out->error, sizeof(out->error), "KVM lacks the capability KVM_CAP_%s", out->caps[i].name);
		}
	}
	close(fd);
}
