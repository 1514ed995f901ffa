/*
 * virtio-net in a VM (virtio_net.c has the device; net_slirp.c the libslirp backend with the policy in front):
 * slot 4, when the configuration names a network configuration file (the "virtio-net" host resource,
 * docs/network.md). The state is the transport's and the MAC; the backend is the host's and never saved, so a
 * restored or forked VM gets a fresh stack from its own resource: its interface keeps its address, new connections
 * work, connections it had to the outside are reset (the new stack answers them with RST), and its `ports`
 * forwards listen anew (fresh host ports unless its resource pins them).
 */
#include "device.h"
#include "error.h"
#include "internal.h"
#include "le_codec.h"
#include "net_slirp.h"
#include "net_vm.h"
#include "snapfile.h"
#include "virtio_dev.h"
#include "virtio_net.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct net_dev {
	struct virtio_net net;
	struct net_slirp *ns;
	struct virtio_net_backend backend;
	struct net_policy policy;
};

static struct net_dev *net_of(void *state)
{
	return ((struct vdev *)state)->dev;
}

/* The backend has frames for the guest: the device's thread serves its queues (its receive queue among them). */
static void rx_ready(void *opaque)
{
	vdev_kick(opaque);
}

static void net_free(struct vdev *v, struct net_dev *d)
{
	if (v && d->ns) {
		/* Unhook the backend under the transport's lock (queue_work holds it), then stop its thread, which
		 * calls rx_ready, before the vdev goes. */
		pthread_mutex_lock(&v->t.lock);
		d->net.backend = NULL;
		pthread_mutex_unlock(&v->t.lock);
	}
	net_slirp_stop(d->ns);
	if (v)
		vdev_free(v);
	free(d);
}

static int net_setup(struct vm *vm, void **state, struct vm_error *err)
{
	struct net_slirp_config cfg;
	struct net_dev *d;
	struct vdev *v = NULL;
	int ret;
	const char *conf = vm_resource(vm, "virtio-net");

	if (!vdev_wanted(vm, "virtio-net", !!conf))
		return 1;
	if (!conf)
		return vm_error_set(err, EINVAL, "the VM had a network device: restoring it needs a \"virtio-net\" "
				    "resource, the path of its network configuration");
	d = calloc(1, sizeof(*d));
	if (!d)
		return vm_error_set(err, ENOMEM, "out of memory for the virtio-net");
	ret = net_slirp_config_load(conf, &cfg, &d->policy, err);
	if (ret < 0) {
		free(d);
		return ret;
	}
	virtio_net_random_mac(d->net.mac);	/* a restore's comes from the snapshot (net_load) */
	ret = vdev_create(vm, &virtio_net_ops, VIRTIO_SLOT_NET, &d->net, &v, err);
	if (ret < 0) {
		free(d);
		return ret;
	}
	v->dev = d;
	ret = vdev_add_kick(v, err);
	if (ret == 0) {
		cfg.rx_ready = rx_ready;
		cfg.rx_opaque = v;
		ret = net_slirp_start(&d->ns, &cfg, err);
	}
	if (ret < 0) {
		net_free(v, d);
		return ret;
	}
	d->backend = (struct virtio_net_backend){ net_slirp_backend_send, net_slirp_backend_recv, d->ns };
	pthread_mutex_lock(&v->t.lock);
	d->net.backend = &d->backend;
	pthread_mutex_unlock(&v->t.lock);
	*state = v;
	return 0;
}

static void net_teardown(struct vm *vm, void *state)
{
	(void)vm;
	net_free(state, net_of(state));
}

static int net_save(struct vm *vm, void *state, struct snap_writer *w)
{
	struct virtio_net_state s;
	uint8_t buf[VIRTIO_NET_STATE_LEN];
	struct le_writer out;

	(void)vm;
	vdev_get_state(state, &s.dev);
	memcpy(s.mac, net_of(state)->net.mac, 6);
	le_writer_init(&out, buf, sizeof(buf));
	virtio_net_state_encode(&s, &out);
	snap_append(w, buf, out.len);
	return 0;
}

static int net_load(struct vm *vm, void *state, const uint8_t *data, size_t len, struct vm_error *err)
{
	struct vdev *v = state;
	struct virtio_net_state s;
	const char *bad = virtio_net_state_decode(data, len, &s);

	(void)vm;
	if (bad)
		return vm_error_set(err, EINVAL, "%s", bad);
	pthread_mutex_lock(&v->t.lock);
	memcpy(net_of(state)->net.mac, s.mac, 6);
	pthread_mutex_unlock(&v->t.lock);
	return vdev_set_state(v, &s.dev, err);
}

/*
 * A restored or forked VM: its stack is already its own (net_setup started it from its own resource), so no frame
 * of another VM reaches it. The device's MAC is a new one; Linux's driver reads the MAC at probe only, so the
 * guest's eth0 keeps the old one until something in the guest sets it (docs/network.md, "Snapshots").
 */
static void net_clone(struct vm *vm, void *state)
{
	struct vdev *v = state;

	vdev_clone(vm, state);
	pthread_mutex_lock(&v->t.lock);
	virtio_net_random_mac(net_of(state)->net.mac);
	pthread_mutex_unlock(&v->t.lock);
}

int vm_network(struct vm *vm, uint64_t events_after, struct vm_network *out, struct vm_error *err)
{
	for (int k = 0; k < vm->nr_devices; k++) {
		struct net_dev *d;

		if (strcmp(vm->devices[k].type->name, "virtio-net"))
			continue;
		d = net_of(vm->devices[k].state);
		memset(out, 0, sizeof(*out));
		net_slirp_stats(d->ns, &out->stats);
		out->nr_forwards = net_slirp_forwards(d->ns, out->forwards, NET_SLIRP_MAX_FORWARDS);
		out->nr_events = net_slirp_events(d->ns, events_after, out->events, NET_POLICY_EVENTS);
		return 0;
	}
	return vm_error_set(err, ENODEV, "the VM has no network device (its Smolfile has no net = true)");
}

static struct device_type virtio_net_device = {
	.name = "virtio-net",
	.setup = net_setup,
	.teardown = net_teardown,
	.save = net_save,
	.load = net_load,
	.clone = net_clone,
	.quiesce = vdev_quiesce,	/* the transport's lock held: no frame moves while the state is captured */
	.resume = vdev_resume,
};
DEVICE_REGISTER(virtio_net_device, DEV_PRIO_VIRTIO)
