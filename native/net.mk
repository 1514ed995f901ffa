# The network's part of the build (docs/network.md), included at the end of the Makefile: the per-packet policy, the
# libslirp backend and virtio-net's device side in the C unit tests, and the policy's libFuzzer target.

SLIRP_CFLAGS := $(shell pkg-config --cflags slirp 2>/dev/null)
SLIRP_LIBS := $(shell pkg-config --libs slirp 2>/dev/null)
ifeq ($(SLIRP_LIBS),)
$(error libslirp not found by pkg-config: run bash scripts/setup-system.sh (libslirp-dev, libglib2.0-dev, pkg-config))
endif

NET_POLICY_SRCS := $(VMM)/net_policy.c $(VMM)/error.c

TEST_CFLAGS += $(SLIRP_CFLAGS)
# The test runner's recipe links TEST_SRCS in order, so the libraries go last, after the sources that use them.
TEST_SRCS += $(VMM)/net_policy.c $(VMM)/net_slirp.c $(VMM)/virtio_net.c $(SLIRP_LIBS)
$(OUT)/tests/run: $(VMM)/net_policy.c $(VMM)/net_slirp.c $(VMM)/virtio_net.c tests/net_frames.h

fuzz: $(OUT)/fuzz/fuzz_net_policy $(OUT)/fuzz/net_policy_seeds

# virtio-net's queues in the virtqueue fuzzer, its state decoder in the snapshot fuzzer and its seeds (docs/devices.md, step 4).
SNAP_SRCS += $(VMM)/virtio_net.c
VIRTQ_SRCS += $(VMM)/virtio_net.c
$(OUT)/fuzz/fuzz_virtq: $(VMM)/virtio_net.c
$(OUT)/fuzz/fuzz_snapshot $(OUT)/fuzz/snapshot_seeds: $(VMM)/virtio_net.c

$(OUT)/fuzz/fuzz_net_policy: fuzz/fuzz_net_policy.c fuzz/net_policy_input.h $(NET_POLICY_SRCS) $(VMM)/net_policy.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ fuzz/fuzz_net_policy.c $(NET_POLICY_SRCS)

$(OUT)/fuzz/net_policy_seeds: fuzz/net_policy_seeds.c fuzz/net_policy_input.h tests/net_frames.h
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -o $@ fuzz/net_policy_seeds.c
