/* The file helpers (common/file_io.c): whole-buffer I/O, whole-file reads with a limit, random ids, partial dirs. */
#include "file_io.h"
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void temp_dir(char out[64])
{
	snprintf(out, 64, "/tmp/smol-file-io-XXXXXX");
	REQUIRE(mkdtemp(out) != NULL);
}

TEST(whole_buffer_writes_and_reads_round_trip_at_any_offset)
{
	char dir[64], path[96];
	uint8_t data[70000], back[70000];
	int fd;

	temp_dir(dir);
	snprintf(path, sizeof(path), "%s/f", dir);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
	REQUIRE(fd >= 0);
	CHECK_EQ_INT(file_write_all(fd, data, 1000), 0);
	CHECK_EQ_INT(file_pwrite_all(fd, data + 1000, sizeof(data) - 1000, 1000), 0);
	CHECK_EQ_INT(file_pread_all(fd, back, sizeof(back), 0), 0);
	CHECK(memcmp(data, back, sizeof(data)) == 0);
	CHECK_EQ_INT(file_pread_all(fd, back, 10, sizeof(data) - 5), -EIO);	/* the file ends first */
	close(fd);
	CHECK_EQ_INT(file_pwrite_all(fd, data, 1, 0), -EBADF);
	unlink(path);
	rmdir(dir);
}

TEST(read_whole_refuses_what_is_not_a_regular_file_or_too_big)
{
	char dir[64], path[96];
	uint8_t *buf = NULL;
	size_t len = 0;
	int fd;

	temp_dir(dir);
	snprintf(path, sizeof(path), "%s/f", dir);
	CHECK_EQ_INT(file_read_whole(path, 100, &buf, &len), -ENOENT);
	CHECK_EQ_INT(file_read_whole(dir, 100, &buf, &len), -EINVAL);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
	REQUIRE(fd >= 0);
	CHECK_EQ_INT(file_write_all(fd, "twelve bytes", 12), 0);
	close(fd);
	CHECK_EQ_INT(file_read_whole(path, 11, &buf, &len), -EFBIG);
	REQUIRE(file_read_whole(path, 12, &buf, &len) == 0);
	CHECK_EQ_INT(len, 12);
	CHECK(memcmp(buf, "twelve bytes", 12) == 0);
	free(buf);
	unlink(path);
	rmdir(dir);
}

TEST(random_ids_are_never_all_zero_and_differ)
{
	uint8_t a[16], b[16];

	file_random_id(a, sizeof(a));
	file_random_id(b, sizeof(b));
	CHECK(a[0] & 1);
	CHECK(memcmp(a, b, sizeof(a)) != 0);
}

TEST(remove_partial_takes_the_named_files_and_the_directory)
{
	static const char *const names[] = { "state", "memory", NULL };
	char dir[64], path[96];
	struct stat sb;

	temp_dir(dir);
	snprintf(path, sizeof(path), "%s/state", dir);
	close(open(path, O_WRONLY | O_CREAT, 0444));	/* "memory" was never written */
	CHECK_EQ_INT(file_fsync_dir(dir), 0);
	CHECK_EQ_INT(file_fsync_parent(path), 0);
	CHECK_EQ_INT(file_remove_partial(dir, names), 0);
	CHECK(stat(dir, &sb) < 0 && errno == ENOENT);
	CHECK_EQ_INT(file_remove_partial(dir, names), -ENOENT);
	CHECK_EQ_INT(file_fsync_dir(dir), -ENOENT);
}
