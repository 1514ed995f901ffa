/*
 * The vmhost's jail (docs/security.md): resource limits, no capabilities, no_new_privs and a seccomp allow-list for
 * the whole process, a shorter one stacked on each vCPU thread. A forbidden call is reported as "seccomp: <name>" on
 * report_fd and the process dies by SIGSYS.
 */
#ifndef SMOL_JAIL_H
#define SMOL_JAIL_H

#include "error.h"

/* One path the jail's root shows, at the same place as on the host (docs/security.md, "The jail's mount table"). */
struct jail_bind {
	const char *path;	/* absolute; a missing one is left out */
	int write;		/* read-write (else read-only) */
	int device;		/* a device node (/dev/kvm): devices allowed on its mount */
};

struct jail_options {
	int report_fd;		/* where a forbidden call's name is written; -1: stderr */
	unsigned nofile;	/* RLIMIT_NOFILE's soft and hard limit; 0: the default (4096) */
	/*
	 * With nbinds > 0, the process must be the first of a PID namespace and in a mount namespace other than
	 * host_mnt_ns (readlink of /proc/self/ns/mnt where the engine runs): before the rest, its root becomes a
	 * read-only tmpfs holding only these paths and a /proc of its own PID namespace (pivot_root).
	 */
	const struct jail_bind *binds;
	int nbinds;
	const char *host_mnt_ns;
};

struct jail_status {
	int seccomp;		/* the process-wide filter is in force */
	int no_new_privs;
	unsigned long long cap_eff;	/* the effective capability set after the drop */
	unsigned nofile;
	int mounts;		/* the root holds only the binds (jail_options.nbinds of them, those present) */
	int binds;		/* how many binds were present and mounted */
};

/* Locks the calling process down; every thread it has gets the filter (TSYNC). Once only. */
int jail_lockdown(const struct jail_options *o, struct jail_status *st, struct vm_error *err);

/* Whether jail_lockdown has run (vCPU threads then add their own filter). */
int jail_active(void);

/* Called first by each vCPU thread: stacks the vCPU list on the calling thread. 0, or -errno. */
int jail_vcpu_thread(void);

/*
 * A test hook (SMOL_TEST_HOOKS=1 only): makes a call no list allows (personality(2)), or with ioctl_request an ioctl
 * whose request no list allows (TIOCSTI). Does not return when jailed.
 */
void jail_test_forbidden(int ioctl_request);

#endif
