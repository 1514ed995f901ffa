/* Errors carried from the VMM to its caller: an errno-style code plus a message that names what is wrong. */
#ifndef SMOL_ERROR_H
#define SMOL_ERROR_H

#include <stdarg.h>

struct vm_error {
	int code;		/* a positive errno value, 0 when there is no error */
	char msg[512];
};

/* Fills err (when non-NULL) and returns -code, so callers can write `return vm_error_set(err, EINVAL, ...)`. */
int vm_error_set(struct vm_error *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Puts a formatted prefix in front of the message err already has ("cannot checkpoint: "); returns -code. */
int vm_error_prefix(struct vm_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
