# The network's part of the build (docs/network.md), included at the end of the Makefile: the per-packet policy in
# the C unit tests and its libFuzzer target.

NET_POLICY_SRCS := $(VMM)/net_policy.c $(VMM)/error.c

TEST_SRCS += $(VMM)/net_policy.c
$(OUT)/tests/run: $(VMM)/net_policy.c tests/net_frames.h

fuzz: $(OUT)/fuzz/fuzz_net_policy $(OUT)/fuzz/net_policy_seeds

$(OUT)/fuzz/fuzz_net_policy: fuzz/fuzz_net_policy.c fuzz/net_policy_input.h $(NET_POLICY_SRCS) $(VMM)/net_policy.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ fuzz/fuzz_net_policy.c $(NET_POLICY_SRCS)

$(OUT)/fuzz/net_policy_seeds: fuzz/net_policy_seeds.c fuzz/net_policy_input.h tests/net_frames.h
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -o $@ fuzz/net_policy_seeds.c
