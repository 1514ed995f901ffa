/* Errors carried from the VMM to its caller: an errno-style code plus a message that names what is wrong. */
#ifndef SMOL_ERROR_H
#define SMOL_ERROR_H

#include <stdarg.h>

/*
 * The code says what kind of failure it is, and callers act on it (the binding passes it to JavaScript as
 * `err.code`, the engine turns it into an HTTP status, docs/engine.md "API errors"). The VMM keeps to these:
 *   EINVAL, ENOEXEC, E2BIG, ENAMETOOLONG, ...  the caller's input is wrong (a path, a size, a snapshot file)
 *   EBUSY                                       the VM is busy (a checkpoint holds it) or in a state that does not
 *                                               allow this (pause a paused VM, resume a running one)
 *   ESRCH                                       the VM has exited or is exiting
 *   ENOENT                                      a file it was given (kernel, snapshot, disk layer) does not exist
 *   EEXIST                                      a file it is to create exists already
 *   ENOMEM, ENOSPC, EMFILE, EAGAIN, ...         the host ran out of something
 * and otherwise the errno of the system call that failed.
 */
struct vm_error {
	int code;		/* a positive errno value, 0 when there is no error */
	char msg[512];
};

/* Fills err (when non-NULL) and returns -code, so callers can write `return vm_error_set(err, EINVAL, ...)`. */
int vm_error_set(struct vm_error *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Puts a formatted prefix in front of the message err already has ("cannot checkpoint: "); returns -code. */
int vm_error_prefix(struct vm_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
