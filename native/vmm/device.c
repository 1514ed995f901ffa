#include "device.h"

#include <stddef.h>

static struct device_type *registered;

void device_type_register(struct device_type *type)
{
	/* Constructors run in link order; append so setup follows it too. */
	struct device_type **p = &registered;

	while (*p)
		p = &(*p)->next;
	type->next = NULL;
	*p = type;
}

struct device_type *device_types(void)
{
	return registered;
}
