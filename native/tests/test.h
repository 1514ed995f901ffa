/*
 * A tiny test framework for the native VMM. Tests register themselves:
 *
 *	TEST(truncated_kernel_is_rejected) { CHECK_EQ_INT(f(), 0); }
 *
 * A failed CHECK reports file:line and the values, marks the test failed and lets it continue; REQUIRE also returns
 * from the test (use it before dereferencing what it checked). Each test runs in its own child process, so a
 * sanitizer report, a crash or a hang (TEST_TIMEOUT_S) fails that test only and the run goes on.
 */
#ifndef SMOL_TEST_H
#define SMOL_TEST_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifndef TEST_TIMEOUT_S
#define TEST_TIMEOUT_S 20	/* seconds a test may take before it is killed and fails */
#endif

struct test_case {
	const char *file;
	const char *name;
	void (*fn)(void);
	struct test_case *next;
};

void test_register(struct test_case *tc);
void test_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int test_str_contains(const char *haystack, const char *needle);

/*
 * A directory private to this run, removed with everything in it when the run ends (even files of a test that
 * crashed). test_tmpfile writes `len` bytes to a new file there; `path` receives its name. Returns 0 or -errno.
 */
#define TEST_PATH_MAX 256
const char *test_tmpdir(void);
int test_tmpfile(char path[static TEST_PATH_MAX], const void *data, size_t len);

#define TEST(name)                                                                      \
	static void name(void);                                                         \
	static struct test_case name##_case = { __FILE__, #name, name, NULL };          \
	static void __attribute__((constructor)) name##_register(void)                  \
	{                                                                               \
		test_register(&name##_case);                                            \
	}                                                                               \
	static void name(void)

#define CHECK(cond)                                                                     \
	do {                                                                            \
		if (!(cond))                                                            \
			test_fail(__FILE__, __LINE__, "CHECK(%s) failed", #cond);       \
	} while (0)

#define REQUIRE(cond)                                                                   \
	do {                                                                            \
		if (!(cond)) {                                                          \
			test_fail(__FILE__, __LINE__, "REQUIRE(%s) failed", #cond);     \
			return;                                                         \
		}                                                                       \
	} while (0)

#define CHECK_EQ_INT(a, b)                                                              \
	do {                                                                            \
		long long a_ = (long long)(a), b_ = (long long)(b);                     \
		if (a_ != b_)                                                           \
			test_fail(__FILE__, __LINE__, "CHECK_EQ_INT(%s, %s): %lld (0x%llx) != %lld (0x%llx)", #a, \
				  #b, a_, (unsigned long long)a_, b_, (unsigned long long)b_);                   \
	} while (0)

/* `expr` must return 0; on failure the report includes `message` (evaluated after `expr`, e.g. err.msg). */
#define CHECK_OK(expr, message)                                                         \
	do {                                                                            \
		long long r_ = (long long)(expr);                                       \
		if (r_ != 0)                                                            \
			test_fail(__FILE__, __LINE__, "CHECK_OK(%s) got %lld: %s", #expr, r_, (message)); \
	} while (0)

#define CHECK_STR_CONTAINS(haystack, needle)                                            \
	do {                                                                            \
		const char *h_ = (haystack), *n_ = (needle);                            \
		if (!test_str_contains(h_, n_))                                         \
			test_fail(__FILE__, __LINE__, "CHECK_STR_CONTAINS(%s, %s): \"%s\" does not contain \"%s\"", \
				  #haystack, #needle, h_ ? h_ : "(null)", n_);                  \
	} while (0)

/* Byte sum of a firmware table (ACPI, MP): 0 when its checksum is right. */
static inline uint8_t test_byte_sum(const uint8_t *p, size_t len)
{
	uint8_t s = 0;

	while (len--)
		s += *p++;
	return s;
}

/* Little-endian fields at any alignment, as the guest sees them in its memory. */
static inline uint16_t test_rd16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return v;
}

static inline uint32_t test_rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static inline uint64_t test_rd64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

#endif
