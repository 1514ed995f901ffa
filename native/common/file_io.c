/* File helpers (file_io.h): EINTR-safe whole-buffer I/O, directory fsync, random ids, removing a partial directory. */
#define _GNU_SOURCE
#include "file_io.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Bytes one call moves at most: Linux transfers at most 0x7ffff000 per call anyway. */
#define FILE_IO_CHUNK (1u << 30)

int file_write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len > FILE_IO_CHUNK ? FILE_IO_CHUNK : len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -ENOSPC;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int file_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len > FILE_IO_CHUNK ? FILE_IO_CHUNK : len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -ENOSPC;
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

int file_pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = pread(fd, p, len > FILE_IO_CHUNK ? FILE_IO_CHUNK : len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

int file_read_whole(const char *path, size_t max, uint8_t **out, size_t *len)
{
	struct stat sb;
	uint8_t *buf;
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	if (!S_ISREG(sb.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	if ((uint64_t)sb.st_size > max) {
		close(fd);
		return -EFBIG;
	}
	buf = malloc(sb.st_size ? (size_t)sb.st_size : 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	ret = file_pread_all(fd, buf, (size_t)sb.st_size, 0);
	close(fd);
	if (ret < 0) {
		free(buf);
		return ret;
	}
	*out = buf;
	*len = (size_t)sb.st_size;
	return 0;
}

int file_fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret;

	if (fd < 0)
		return -errno;
	ret = fsync(fd) < 0 ? -errno : 0;
	close(fd);
	return ret;
}

int file_fsync_parent(const char *path)
{
	char copy[PATH_MAX];

	if (snprintf(copy, sizeof(copy), "%s", path) >= (int)sizeof(copy))
		return -ENAMETOOLONG;
	return file_fsync_dir(dirname(copy));
}

void file_random_id(uint8_t *id, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = getrandom(id + got, len - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got < len) {
		struct timespec ts;
		uint64_t t;

		clock_gettime(CLOCK_REALTIME, &ts);
		t = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		t ^= (uint64_t)getpid() << 32 ^ (uint64_t)(uintptr_t)id;
		for (size_t i = 0; i < len; i++)
			id[i] = (uint8_t)(t >> (8 * (i % 8))) ^ (uint8_t)(i * 37);
	}
	if (len)
		id[0] |= 1;
}

int file_remove_partial(const char *dir, const char *const names[])
{
	char path[PATH_MAX];

	for (int i = 0; names[i]; i++)
		if (snprintf(path, sizeof(path), "%s/%s", dir, names[i]) < (int)sizeof(path))
			unlink(path);
	return rmdir(dir) < 0 ? -errno : 0;
}
