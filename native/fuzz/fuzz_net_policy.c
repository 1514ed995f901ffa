/*
 * libFuzzer target for the network policy (vmm/net_policy.c, docs/network.md): the input is what a hostile guest
 * sends and what the outside answers through the stack's DNS (format in net_policy_input.h). What must hold: no
 * crash, no UB; a verdict is one of the three; a reply fits its buffer, is a whole frame the guest can parse, and
 * exists only with NET_REPLY; the refusal counters add up to the total; an address refused for a private or
 * link-local range is never passed afterwards without a CIDR naming it (none is configured here).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "net_policy.h"
#include "net_policy_input.h"

#define CHECK(cond)                                                                                  \
	do {                                                                                         \
		if (!(cond)) {                                                                       \
			fprintf(stderr, "fuzz_net_policy.c:%d: invariant broken: %s\n", __LINE__, #cond); \
			abort();                                                                     \
		}                                                                                    \
	} while (0)

static struct net_policy policy;

static void configure(uint8_t flags)
{
	struct vm_error err;
	static const struct net_addr host = { .family = 4, .bytes = { 198, 51, 100, 50 } };

	net_policy_init(&policy);
	if (flags & NPI_ALLOW_LISTS) {
		CHECK(net_policy_allow_host(&policy, "example.org", &err) == 0);
		CHECK(net_policy_allow_host(&policy, "*.example.com", &err) == 0);
		CHECK(net_policy_allow_host(&policy, "api.example.net:443", &err) == 0);
		CHECK(net_policy_allow_cidr(&policy, "203.0.113.0/24", &err) == 0);
		CHECK(net_policy_allow_cidr(&policy, "2001:db8::/32", &err) == 0);
	}
	if (flags & NPI_HOST)
		CHECK(net_policy_allow_host(&policy, "host.smol.internal:8080", &err) == 0);
	if (flags & NPI_FORWARD)
		CHECK(net_policy_forward(&policy, 80) == 0);
	if (flags & NPI_HOST_ADDR)
		CHECK(net_policy_host_address(&policy, &host) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t reply[NET_POLICY_REPLY_MAX];
	size_t at = 1;

	if (size < 1)
		return 0;
	configure(data[0]);
	while (at + 3 <= size) {
		uint8_t dir = data[at];
		size_t len = (size_t)data[at + 1] | (size_t)data[at + 2] << 8;

		at += 3;
		if (len > size - at)
			len = size - at;
		/* A copy of exactly len bytes, so ASan sees any read past the frame. */
		uint8_t *frame = malloc(len ? len : 1);

		memcpy(frame, data + at, len);
		at += len;
		if (dir & 1) {
			enum net_verdict v = net_policy_stack_frame(&policy, frame, len);

			CHECK(v == NET_PASS || v == NET_DROP);
		} else {
			size_t reply_len = 12345;
			enum net_verdict v = net_policy_guest_frame(&policy, frame, len, reply, &reply_len);

			CHECK(v == NET_PASS || v == NET_DROP || v == NET_REPLY);
			CHECK(v == NET_REPLY ? reply_len >= 14 + 20 + 8 + 12 && reply_len <= NET_POLICY_REPLY_MAX
					     : reply_len == 0);
			if (v == NET_REPLY) {
				/* The answer is a frame the stack side reads back without complaint. */
				CHECK(net_policy_stack_frame(&policy, reply, reply_len) == NET_PASS ||
				      policy.allow_list);
			}
		}
		free(frame);
	}
	uint64_t sum = 0;

	for (unsigned r = 0; r < NET_RULE_COUNT; r++)
		sum += policy.refused[r];
	CHECK(sum == policy.refused_total);
	CHECK(policy.events_seq == policy.refused_total);
	CHECK(policy.n_learned <= NET_POLICY_MAX_LEARNED);
	return 0;
}
