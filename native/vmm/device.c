/* The registry of device types (device.h), kept in setup order: by level, then by name. */
#include "device.h"

#include <stddef.h>
#include <string.h>

static struct device_type *registered;

static int before(const struct device_type *a, const struct device_type *b)
{
	return a->prio != b->prio ? a->prio < b->prio : strcmp(a->name, b->name) < 0;
}

void device_type_register(struct device_type *type)
{
	struct device_type **p = &registered;

	while (*p && !before(type, *p))
		p = &(*p)->next;
	type->next = *p;
	*p = type;
}

struct device_type *device_types(void)
{
	return registered;
}
