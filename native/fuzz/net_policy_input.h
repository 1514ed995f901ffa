/*
 * The input format of the network policy fuzzer (fuzz_net_policy.c), shared with its seeds: one byte choosing the
 * policy (bit 0: allow lists on; bit 1: host.smol.internal named; bit 2: a `ports` forward on guest port 80; bit 3:
 * a host address), then records of [direction: 0 guest, 1 stack][length, 2 bytes little-endian][frame].
 */
#ifndef SMOL_NET_POLICY_INPUT_H
#define SMOL_NET_POLICY_INPUT_H

#define NPI_ALLOW_LISTS 1
#define NPI_HOST 2
#define NPI_FORWARD 4
#define NPI_HOST_ADDR 8
#define NPI_FROM_GUEST 0
#define NPI_FROM_STACK 1

#endif
