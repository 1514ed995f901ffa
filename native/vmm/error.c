#include "error.h"

#include <stdio.h>
#include <string.h>

int vm_error_set(struct vm_error *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;

		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
		err->code = code;
	}
	return -code;
}

int vm_error_prefix(struct vm_error *err, const char *fmt, ...)
{
	char prefix[256], old[sizeof(err->msg)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	size_t plen = strlen(prefix), olen;

	memcpy(old, err->msg, sizeof(old));
	old[sizeof(old) - 1] = 0;
	olen = strlen(old);
	if (plen > sizeof(err->msg) - 1)
		plen = sizeof(err->msg) - 1;
	if (olen > sizeof(err->msg) - 1 - plen)
		olen = sizeof(err->msg) - 1 - plen;
	memcpy(err->msg, prefix, plen);
	memcpy(err->msg + plen, old, olen);
	err->msg[plen + olen] = 0;
	return -err->code;
}
