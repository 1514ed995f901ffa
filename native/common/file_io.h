/*
 * File helpers shared by the VMM and the guest agent: whole-buffer reads and writes that retry after EINTR and short
 * transfers, directory fsync (what makes a rename or a new file durable), random ids, and removing a half-written
 * directory. Each returns 0 or -errno; it depends on nothing but the C library.
 */
#ifndef SMOL_FILE_IO_H
#define SMOL_FILE_IO_H

#include <stddef.h>
#include <stdint.h>

/* All of buf, or -errno; a write(2) or pwrite(2) that writes nothing is -ENOSPC. */
int file_write_all(int fd, const void *buf, size_t len);
int file_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);
/* All of len bytes from off, or -errno; the end of the file before them is -EIO. */
int file_pread_all(int fd, void *buf, size_t len, uint64_t off);
/*
 * A whole regular file of at most max bytes, in a buffer to free (never NULL on success, even when empty): -errno
 * from open or read, -EINVAL when it is not a regular file, -EFBIG when it is larger than max.
 */
int file_read_whole(const char *path, size_t max, uint8_t **out, size_t *len);

/* fsync(2) of a directory, or of the directory a path is in: what makes a file created or renamed there last. */
int file_fsync_dir(const char *dir);
int file_fsync_parent(const char *path);

/* len random bytes from getrandom(2) (time and pid if it fails), the first one odd so the id is never all zero. */
void file_random_id(uint8_t *id, size_t len);

/* Removes dir after unlinking the files named in names (a NULL-terminated list) in it: a half-written directory. */
int file_remove_partial(const char *dir, const char *const names[]);

#endif
