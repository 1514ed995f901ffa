/* COM1: the 16550A model on ports 0x3f8-0x3ff, IRQ 4, wired to the VM's console. */
#include "boot.h"
#include "device.h"
#include "error.h"
#include "internal.h"
#include "snapfile.h"
#include "uart.h"

#include <errno.h>
#include <stdlib.h>

static void com1_tx(void *opaque, uint8_t byte)
{
	struct vm *vm = opaque;

	console_out_put(&vm->console, byte);
}

static void com1_input_ready(void *dev)
{
	uart_input_ready(dev);
}

/* COM1 is the console's last resort: it takes input whenever no other front end does (a virtio-console's driver). */
static const struct console_frontend com1_frontend = { .name = "com1", .input_ready = com1_input_ready };

static int com1_has_input(struct vm *vm)
{
	return vm_console_input_owner(vm) == &com1_frontend;
}

static int com1_rx_waiting(void *opaque)
{
	struct vm *vm = opaque;

	return com1_has_input(vm) && console_in_pending(&vm->console) > 0;
}

static size_t com1_rx_pull(void *opaque, uint8_t *buf, size_t max)
{
	struct vm *vm = opaque;

	return com1_has_input(vm) ? console_in_take(&vm->console, buf, max) : 0;
}

static void com1_set_irq(void *opaque, int level)
{
	vm_irq_line(opaque, COM1_IRQ, level);
}

static void com1_io(struct vm *vm, uint64_t offset, uint8_t *data, uint32_t len, int is_write, void *opaque)
{
	struct uart *u = opaque;

	(void)vm;
	(void)len;	/* wider accesses touch only the addressed register, like the real part */
	if (is_write)
		uart_write(u, (unsigned)offset, data[0]);
	else
		data[0] = uart_read(u, (unsigned)offset);
}

static int com1_setup(struct vm *vm, void **state, struct vm_error *err)
{
	struct uart_hooks hooks = { .tx = com1_tx, .rx_waiting = com1_rx_waiting, .rx_pull = com1_rx_pull,
				    .set_irq = com1_set_irq, .opaque = vm };
	struct uart *u = calloc(1, sizeof(*u));
	int ret;

	if (!u)
		return vm_error_set(err, ENOMEM, "out of memory for the serial port");
	uart_init(u, &hooks);
	ret = io_bus_register(&vm->pio, COM1_PORT, COM1_PORTS, com1_io, u);
	if (ret < 0) {
		uart_exit(u);
		free(u);
		return vm_error_set(err, -ret, "cannot register COM1 at 0x%x", COM1_PORT);
	}
	ret = vm_console_frontend_add(vm, &com1_frontend, u, CONSOLE_RANK_LAST, err);
	if (ret < 0) {
		uart_exit(u);
		free(u);
		return ret;
	}
	*state = u;
	return 0;
}

static void com1_teardown(struct vm *vm, void *state)
{
	vm_console_frontend_remove(vm, state);
	uart_exit(state);
	free(state);
}

static int com1_save(struct vm *vm, void *state, struct snap_writer *w)
{
	uint8_t buf[UART_STATE_MAX];

	(void)vm;
	snap_append(w, buf, uart_save(state, buf));
	return 0;
}

static int com1_load(struct vm *vm, void *state, const uint8_t *data, size_t len, struct vm_error *err)
{
	const char *problem = uart_load(state, data, len);

	(void)vm;
	return problem ? vm_error_set(err, EINVAL, "%s", problem) : 0;
}

/* After a restore: raise the interrupt line again if an interrupt (transmit-empty, received data) was pending. */
static void com1_clone(struct vm *vm, void *state)
{
	(void)vm;
	uart_resync_irq(state);
}

static struct device_type com1_device = {
	.name = "com1",
	.setup = com1_setup,
	.teardown = com1_teardown,
	.save = com1_save,
	.load = com1_load,
	.clone = com1_clone,
};
DEVICE_REGISTER(com1_device, DEV_PRIO_CORE)
