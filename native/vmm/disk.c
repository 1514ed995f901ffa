/* Disk layer chains: the file format of docs/disks.md, reads through the chain, copy-on-write, flush and freeze. */
#define _GNU_SOURCE
#include "disk.h"
#include "error.h"
#include "file_io.h"
#include "snapfile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DISK_SIZE (1ULL << 50)
#define CRC_AT (DISK_HEADER_SIZE - 8)

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static uint64_t clusters_for(uint64_t size)
{
	return (size + DISK_CLUSTER_SIZE - 1) / DISK_CLUSTER_SIZE;
}

static uint64_t data_offset_for(uint64_t nr_clusters)
{
	return round_up(DISK_HEADER_SIZE + 8 * nr_clusters, 4096);
}

static int all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

void disk_header_encode(const struct disk_header *h, uint8_t buf[DISK_HEADER_SIZE])
{
	uint32_t version = DISK_VERSION, hsize = DISK_HEADER_SIZE;
	uint64_t crc;

	memset(buf, 0, DISK_HEADER_SIZE);
	memcpy(buf, DISK_MAGIC, 8);
	memcpy(buf + 8, &version, 4);
	memcpy(buf + 12, &hsize, 4);
	memcpy(buf + 16, &h->cluster_size, 4);
	memcpy(buf + 20, &h->flags, 4);
	memcpy(buf + 24, &h->size, 8);
	memcpy(buf + 32, &h->map_offset, 8);
	memcpy(buf + 40, &h->nr_clusters, 8);
	memcpy(buf + 48, &h->data_offset, 8);
	memcpy(buf + 56, h->id, DISK_ID_SIZE);
	memcpy(buf + 72, h->parent_id, DISK_ID_SIZE);
	memcpy(buf + 88, &h->parent_path_len, 4);
	memcpy(buf + 96, h->parent_path, h->parent_path_len);
	crc = snap_crc64(0, buf, CRC_AT);
	memcpy(buf + CRC_AT, &crc, 8);
}

const char *disk_header_parse(const uint8_t *buf, struct disk_header *h)
{
	uint32_t version, hsize, reserved;
	uint64_t crc;

	memset(h, 0, sizeof(*h));
	if (memcmp(buf, DISK_MAGIC, 8))
		return "not a Smol disk layer (bad magic)";
	memcpy(&version, buf + 8, 4);
	if (version != DISK_VERSION)
		return version > DISK_VERSION ? "written by a newer Smol (unknown version)" : "unknown version";
	memcpy(&crc, buf + CRC_AT, 8);
	if (crc != snap_crc64(0, buf, CRC_AT))
		return "the header checksum does not match (corrupt header)";
	memcpy(&hsize, buf + 12, 4);
	memcpy(&h->cluster_size, buf + 16, 4);
	memcpy(&h->flags, buf + 20, 4);
	memcpy(&h->size, buf + 24, 8);
	memcpy(&h->map_offset, buf + 32, 8);
	memcpy(&h->nr_clusters, buf + 40, 8);
	memcpy(&h->data_offset, buf + 48, 8);
	memcpy(h->id, buf + 56, DISK_ID_SIZE);
	memcpy(h->parent_id, buf + 72, DISK_ID_SIZE);
	memcpy(&h->parent_path_len, buf + 88, 4);
	memcpy(&reserved, buf + 92, 4);
	if (hsize != DISK_HEADER_SIZE)
		return "the header size is not 4096";
	if (h->cluster_size != DISK_CLUSTER_SIZE)
		return "the cluster size is not 65536";
	if (h->flags & ~(uint32_t)DISK_FLAG_FROZEN)
		return "unknown flags";
	if (!h->size || h->size % DISK_SECTOR || h->size > MAX_DISK_SIZE)
		return "the disk size is not a positive multiple of 512 bytes up to 1 PiB";
	if (h->map_offset != DISK_HEADER_SIZE || h->nr_clusters != clusters_for(h->size) ||
	    h->data_offset != data_offset_for(h->nr_clusters))
		return "the map's offset, length or the data offset do not match the disk size";
	if (all_zero(h->id, DISK_ID_SIZE))
		return "the layer id is zero";
	if (!h->parent_path_len || h->parent_path_len > DISK_PATH_MAX || reserved)
		return "the parent path length is out of range";
	memcpy(h->parent_path, buf + 96, h->parent_path_len);
	h->parent_path[h->parent_path_len] = 0;
	if (strlen(h->parent_path) != h->parent_path_len || h->parent_path[0] != '/')
		return "the parent path is not an absolute path";
	if (!all_zero(buf + 96 + h->parent_path_len, CRC_AT - 96 - h->parent_path_len))
		return "bytes after the parent path are not zero";
	return NULL;
}

/* The absolute path of a file that may not exist yet (its directory must). */
static int absolute(const char *path, char out[PATH_MAX], struct vm_error *err)
{
	char copy[PATH_MAX], dir[PATH_MAX];

	if (strlen(path) >= PATH_MAX)
		return vm_error_set(err, ENAMETOOLONG, "disk path too long: %s", path);
	if (realpath(path, out))
		return 0;
	snprintf(copy, sizeof(copy), "%s", path);
	if (!realpath(dirname(copy), dir))
		return vm_error_set(err, errno, "%s: %s", path, strerror(errno));
	snprintf(copy, sizeof(copy), "%s", path);
	if (snprintf(out, PATH_MAX, "%s/%s", strcmp(dir, "/") ? dir : "", basename(copy)) >= PATH_MAX)
		return vm_error_set(err, ENAMETOOLONG, "disk path too long: %s", path);
	return 0;
}

static void layer_free(struct disk_layer *l)
{
	while (l) {
		struct disk_layer *below = l->below;

		if (l->fd >= 0)
			close(l->fd);
		free(l->path);
		free(l->map);
		free(l->map_dirty);
		free(l);
		l = below;
	}
}

/* Opens one layer file and checks its header and map. */
static int layer_open(const char *path, int writable, struct disk_header *h, struct disk_layer **out,
		      struct vm_error *err)
{
	uint8_t head[DISK_HEADER_SIZE];
	struct disk_layer *l;
	struct stat sb;
	const char *bad;
	int fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC), ret;

	if (fd < 0)
		return vm_error_set(err, errno, "cannot open disk layer %s: %s", path, strerror(errno));
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_size < DISK_HEADER_SIZE) {
		close(fd);
		return vm_error_set(err, EINVAL, "disk layer %s: not a regular file with a header", path);
	}
	ret = file_pread_all(fd, head, sizeof(head), 0);
	bad = ret < 0 ? "cannot read the header" : disk_header_parse(head, h);
	if (!bad && (uint64_t)sb.st_size < h->data_offset)
		bad = "the file is shorter than its map";
	/* One writer per layer: a second VM (or process) writing the same top would corrupt what both see. */
	if (!bad && writable && !(h->flags & DISK_FLAG_FROZEN) && flock(fd, LOCK_EX | LOCK_NB) < 0)
		bad = errno == EWOULDBLOCK ? "another VM is writing to it" : "cannot lock it";
	if (bad) {
		close(fd);
		return vm_error_set(err, EINVAL, "disk layer %s: %s", path, bad);
	}
	l = calloc(1, sizeof(*l));
	if (l) {
		l->map = calloc(h->nr_clusters, 8);
		l->map_dirty = calloc((h->nr_clusters + 7) / 8, 1);
		l->path = strdup(path);
	}
	if (!l || !l->map || !l->map_dirty || !l->path) {
		if (l)
			l->fd = -1;
		layer_free(l);
		close(fd);
		return vm_error_set(err, ENOMEM, "out of memory for the map of %s", path);
	}
	l->fd = fd;
	l->frozen = !!(h->flags & DISK_FLAG_FROZEN);
	memcpy(l->id, h->id, DISK_ID_SIZE);
	memcpy(l->parent_id, h->parent_id, DISK_ID_SIZE);
	l->nr_clusters = h->nr_clusters;
	l->data_offset = h->data_offset;
	l->next_free = round_up((uint64_t)sb.st_size, 4096);
	ret = file_pread_all(fd, l->map, 8 * h->nr_clusters, h->map_offset);
	for (uint64_t c = 0; !ret && c < h->nr_clusters; c++) {
		uint64_t at = l->map[c];

		/* A crash may leave data nothing points at (harmless), never an entry pointing at nothing. */
		if (at && (at % 4096 || at < h->data_offset || at > (uint64_t)sb.st_size ||
			   (uint64_t)sb.st_size - at < DISK_CLUSTER_SIZE)) {
			layer_free(l);
			return vm_error_set(err, EINVAL, "disk layer %s: the map entry of cluster %llu points outside "
					    "the file (corrupt layer)", path, (unsigned long long)c);
		}
	}
	if (ret < 0) {
		layer_free(l);
		return vm_error_set(err, -ret, "disk layer %s: cannot read its map: %s", path, strerror(-ret));
	}
	*out = l;
	return 0;
}

static int is_layer_file(int fd)
{
	char magic[8];

	return pread(fd, magic, 8, 0) == 8 && !memcmp(magic, DISK_MAGIC, 8);
}

static int base_open(struct disk *d, const char *path, struct vm_error *err)
{
	struct stat sb;

	d->base_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (d->base_fd < 0)
		return vm_error_set(err, errno, "cannot open the base disk image %s: %s", path, strerror(errno));
	d->base_path = strdup(path);
	if (!d->base_path)
		return vm_error_set(err, ENOMEM, "out of memory");
	if (fstat(d->base_fd, &sb) < 0 || !S_ISREG(sb.st_mode) || !sb.st_size || sb.st_size % DISK_SECTOR ||
	    (uint64_t)sb.st_size > MAX_DISK_SIZE)
		return vm_error_set(err, EINVAL, "base disk image %s: not a regular file whose size is a positive "
				    "multiple of 512 bytes", path);
	d->size = (uint64_t)sb.st_size;
	return 0;
}

int disk_open(const char *path, int read_only, struct disk **out, struct vm_error *err)
{
	char abs_path[PATH_MAX], next[PATH_MAX];
	struct disk *d = calloc(1, sizeof(*d));
	struct disk_layer **link;
	uint8_t want_id[DISK_ID_SIZE] = { 0 };
	int ret = 0, fd, depth = 0, layered;

	if (!d)
		return vm_error_set(err, ENOMEM, "out of memory");
	d->base_fd = -1;
	if (!realpath(path, abs_path)) {
		free(d);
		return vm_error_set(err, errno, "disk %s: %s", path, strerror(errno));
	}
	fd = open(abs_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		free(d);
		return vm_error_set(err, errno, "cannot open disk %s: %s", abs_path, strerror(errno));
	}
	layered = is_layer_file(fd);
	close(fd);
	if (!layered) {
		d->read_only = 1;
		ret = base_open(d, abs_path, err);
		goto out;
	}
	link = &d->top;
	snprintf(next, sizeof(next), "%s", abs_path);
	for (;;) {
		struct disk_header h;
		struct disk_layer *l;
		int writable = depth == 0 && !read_only;

		if (depth == DISK_MAX_DEPTH) {
			ret = vm_error_set(err, ELOOP, "disk %s: more than %d layers (a loop?)", abs_path, DISK_MAX_DEPTH);
			goto out;
		}
		ret = layer_open(next, writable, &h, &l, err);
		if (ret < 0 && writable && err->code == EACCES)	/* a frozen layer is 0444 */
			ret = layer_open(next, 0, &h, &l, err);
		if (ret < 0)
			goto out;
		*link = l;
		link = &l->below;
		if (depth == 0) {
			d->size = h.size;
			d->read_only = read_only || l->frozen;
			if (!d->read_only && (fcntl(l->fd, F_GETFL) & O_ACCMODE) != O_RDWR) {
				ret = vm_error_set(err, EACCES, "disk layer %s is not writable", next);
				goto out;
			}
		} else {
			if (memcmp(l->id, want_id, DISK_ID_SIZE)) {
				ret = vm_error_set(err, EINVAL, "disk layer %s: its parent %s was replaced (the id differs)",
						   abs_path, next);
				goto out;
			}
			if (!l->frozen) {
				ret = vm_error_set(err, EINVAL, "disk layer %s: its parent %s is not frozen", abs_path, next);
				goto out;
			}
			if (h.size != d->size) {
				ret = vm_error_set(err, EINVAL, "disk layer %s: its parent %s has another size", abs_path,
						   next);
				goto out;
			}
		}
		depth++;
		snprintf(next, sizeof(next), "%s", h.parent_path);
		memcpy(want_id, h.parent_id, DISK_ID_SIZE);
		if (all_zero(want_id, DISK_ID_SIZE))
			break;
	}
	{
		uint64_t layer_size = d->size;

		ret = base_open(d, next, err);
		if (!ret && d->size != layer_size)
			ret = vm_error_set(err, EINVAL, "disk %s: its base image %s has another size than the layers say "
					   "(was it replaced?)", abs_path, next);
		d->size = layer_size;
	}
out:
	if (ret < 0) {
		disk_close(d);
		return ret;
	}
	*out = d;
	return 0;
}

void disk_close(struct disk *d)
{
	if (!d)
		return;
	layer_free(d->top);
	if (d->base_fd >= 0)
		close(d->base_fd);
	free(d->base_path);
	free(d);
}

/* Reads [off, off + len) of the disk as `from` and the layers below it see it; the range lies in one cluster. */
static int read_from(struct disk *d, struct disk_layer *from, uint64_t off, uint8_t *buf, uint64_t len)
{
	uint64_t c = off / DISK_CLUSTER_SIZE, in = off % DISK_CLUSTER_SIZE;

	for (struct disk_layer *l = from; l; l = l->below)
		if (l->map[c])
			return file_pread_all(l->fd, buf, len, l->map[c] + in);
	return file_pread_all(d->base_fd, buf, len, off);
}

static int check_range(const struct disk *d, uint64_t off, uint64_t len, struct vm_error *err)
{
	if (off > d->size || len > d->size - off)
		return vm_error_set(err, EINVAL, "disk access at %llu+%llu is past the end (%llu bytes)",
				    (unsigned long long)off, (unsigned long long)len, (unsigned long long)d->size);
	return 0;
}

int disk_read(struct disk *d, uint64_t off, void *buf, uint64_t len, struct vm_error *err)
{
	uint8_t *p = buf;
	int ret = check_range(d, off, len, err);

	while (!ret && len) {
		uint64_t n = DISK_CLUSTER_SIZE - off % DISK_CLUSTER_SIZE;

		n = n < len ? n : len;
		ret = read_from(d, d->top, off, p, n);
		if (ret < 0)
			return vm_error_set(err, -ret, "disk read at %llu: %s", (unsigned long long)off, strerror(-ret));
		off += n;
		p += n;
		len -= n;
	}
	return ret;
}

/* The first write to a cluster: copy it up from below into a new cluster at the end of the top layer's file. */
static int copy_up(struct disk *d, uint64_t c, uint64_t in, const uint8_t *src, uint64_t n)
{
	struct disk_layer *top = d->top;
	uint64_t start = c * DISK_CLUSTER_SIZE, have = d->size - start < DISK_CLUSTER_SIZE ? d->size - start :
		DISK_CLUSTER_SIZE;
	uint8_t *buf = calloc(1, DISK_CLUSTER_SIZE);
	int ret;

	if (!buf)
		return -ENOMEM;
	ret = n == DISK_CLUSTER_SIZE ? 0 : read_from(d, top->below, start, buf, have);
	if (!ret) {
		memcpy(buf + in, src, n);
		ret = file_pwrite_all(top->fd, buf, DISK_CLUSTER_SIZE, top->next_free);
	}
	free(buf);
	if (ret < 0)
		return ret;
	/* Only in memory until the next flush, which writes it after the data is on disk. */
	top->map[c] = top->next_free;
	top->map_dirty[c / 8] |= (uint8_t)(1u << (c % 8));
	top->next_free += DISK_CLUSTER_SIZE;
	return 0;
}

int disk_write(struct disk *d, uint64_t off, const void *buf, uint64_t len, struct vm_error *err)
{
	const uint8_t *p = buf;
	int ret = check_range(d, off, len, err);

	if (!ret && d->read_only)
		return vm_error_set(err, EROFS, "the disk is read-only");
	while (!ret && len) {
		uint64_t c = off / DISK_CLUSTER_SIZE, in = off % DISK_CLUSTER_SIZE, n = DISK_CLUSTER_SIZE - in;

		n = n < len ? n : len;
		ret = d->top->map[c] ? file_pwrite_all(d->top->fd, p, n, d->top->map[c] + in) : copy_up(d, c, in, p, n);
		if (ret < 0)
			return vm_error_set(err, -ret, "disk write at %llu to %s: %s", (unsigned long long)off,
					    d->top->path, strerror(-ret));
		off += n;
		p += n;
		len -= n;
	}
	return ret;
}

int disk_flush(struct disk *d, struct vm_error *err)
{
	struct disk_layer *l = d->top;
	int dirty = 0;

	if (d->read_only || !l)
		return 0;
	if (fdatasync(l->fd) < 0)
		return vm_error_set(err, errno, "flushing %s: %s", l->path, strerror(errno));
	/* The data is on disk: now the map entries that point at it, a 4 KiB map page at a time. */
	for (uint64_t first = 0; first < l->nr_clusters; first += 512) {
		uint64_t n = l->nr_clusters - first < 512 ? l->nr_clusters - first : 512, bytes = (n + 7) / 8;
		int ret;

		if (all_zero(l->map_dirty + first / 8, bytes))
			continue;
		ret = file_pwrite_all(l->fd, l->map + first, 8 * n, DISK_HEADER_SIZE + 8 * first);
		if (ret < 0)
			return vm_error_set(err, -ret, "writing the map of %s: %s", l->path, strerror(-ret));
		memset(l->map_dirty + first / 8, 0, bytes);
		dirty = 1;
	}
	if (dirty && fdatasync(l->fd) < 0)
		return vm_error_set(err, errno, "flushing the map of %s: %s", l->path, strerror(errno));
	return 0;
}

/* Writes a new empty layer over `below` (absolute; size and id as given). */
static int create_layer(const char *path, const char *below, uint64_t size, const uint8_t below_id[DISK_ID_SIZE],
			struct vm_error *err)
{
	struct disk_header h = { .cluster_size = DISK_CLUSTER_SIZE, .size = size, .map_offset = DISK_HEADER_SIZE };
	uint8_t head[DISK_HEADER_SIZE];
	int fd, ret;

	if (strlen(below) > DISK_PATH_MAX)
		return vm_error_set(err, ENAMETOOLONG, "disk layer %s: the path of the layer below is longer than %d "
				    "bytes", path, DISK_PATH_MAX);
	h.nr_clusters = clusters_for(size);
	h.data_offset = data_offset_for(h.nr_clusters);
	h.parent_path_len = (uint32_t)strlen(below);
	memcpy(h.parent_path, below, h.parent_path_len);
	memcpy(h.parent_id, below_id, DISK_ID_SIZE);
	file_random_id(h.id, DISK_ID_SIZE);
	disk_header_encode(&h, head);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return vm_error_set(err, errno, "cannot create disk layer %s: %s", path, strerror(errno));
	ret = file_pwrite_all(fd, head, sizeof(head), 0);
	if (!ret && ftruncate(fd, (off_t)h.data_offset) < 0)	/* the map: all absent (a hole) */
		ret = -errno;
	if (!ret && fsync(fd) < 0)
		ret = -errno;
	close(fd);
	if (!ret)
		ret = file_fsync_parent(path);
	if (ret < 0) {
		unlink(path);
		return vm_error_set(err, -ret, "cannot create disk layer %s: %s", path, strerror(-ret));
	}
	return 0;
}

int disk_layer_create(const char *path, const char *below, struct vm_error *err)
{
	char abs_path[PATH_MAX];
	uint8_t id[DISK_ID_SIZE] = { 0 };
	struct disk *d;
	int ret = absolute(path, abs_path, err);

	if (ret < 0)
		return ret;
	ret = disk_open(below, 1, &d, err);
	if (ret < 0)
		return ret;
	if (d->top && !d->top->frozen) {
		ret = vm_error_set(err, EINVAL, "cannot stack a layer on %s: it is not frozen (a VM may still write it)",
				   d->top->path);
	} else {
		disk_top_id(d, id);
		ret = create_layer(abs_path, disk_top_path(d), d->size, id, err);
	}
	disk_close(d);
	return ret;
}

int disk_freeze_and_stack(struct disk *d, const char *new_top, struct vm_error *err)
{
	char abs_path[PATH_MAX];
	struct disk_layer *old = d->top, *l;
	struct disk_header h;
	uint8_t head[DISK_HEADER_SIZE];
	char why[sizeof(err->msg)];
	const char *bad;
	int ret;

	if (d->read_only)
		return vm_error_set(err, EROFS, "the disk is read-only: there is no layer to freeze");
	ret = absolute(new_top, abs_path, err);
	if (!ret)
		ret = disk_flush(d, err);
	if (!ret)
		ret = create_layer(abs_path, old->path, d->size, old->id, err);
	if (ret < 0)
		return ret;
	/* Mark the old top frozen: its header again, with the flag (the map is already on disk). */
	ret = file_pread_all(old->fd, head, sizeof(head), 0);
	bad = ret < 0 ? "cannot read its header" : disk_header_parse(head, &h);
	if (!bad) {
		h.flags |= DISK_FLAG_FROZEN;
		disk_header_encode(&h, head);
		ret = file_pwrite_all(old->fd, head, sizeof(head), 0);
		if (!ret && fdatasync(old->fd) < 0)
			ret = -errno;
		if (ret < 0)
			bad = strerror(-ret);
	}
	if (!bad && fchmod(old->fd, 0444) < 0)
		bad = strerror(errno);
	if (!bad && layer_open(abs_path, 1, &h, &l, err) < 0) {
		snprintf(why, sizeof(why), "%s", err->msg);
		bad = why;
	}
	if (bad) {
		ret = vm_error_set(err, EIO, "cannot freeze disk layer %s: %s", old->path, bad);
		unlink(abs_path);
		return ret;
	}
	old->frozen = 1;
	l->below = old;
	d->top = l;
	return 0;
}

const char *disk_top_path(const struct disk *d)
{
	return d->top ? d->top->path : d->base_path;
}

void disk_top_id(const struct disk *d, uint8_t id[DISK_ID_SIZE])
{
	if (d->top)
		memcpy(id, d->top->id, DISK_ID_SIZE);
	else
		memset(id, 0, DISK_ID_SIZE);
}

int disk_flatten(const char *path, struct disk_flatten_stats *st, struct vm_error *err)
{
	struct disk_header h = { .cluster_size = DISK_CLUSTER_SIZE, .map_offset = DISK_HEADER_SIZE,
				 .flags = DISK_FLAG_FROZEN };
	uint8_t head[DISK_HEADER_SIZE], *buf = NULL;
	uint64_t *map = NULL, next, copied = 0;
	char tmp[PATH_MAX];
	struct disk_layer *l;
	struct disk *d;
	int fd = -1, ret, depth = 0;

	ret = disk_open(path, 1, &d, err);
	if (ret < 0)
		return ret;
	for (l = d->top; l; l = l->below)
		depth++;
	if (st)
		*st = (struct disk_flatten_stats){ .depth_before = depth, .depth_after = depth };
	if (!d->top || !d->top->frozen) {
		ret = vm_error_set(err, EINVAL, "cannot flatten %s: it is not a frozen disk layer", path);
		goto out;
	}
	if (!d->top->below || strlen(d->base_path) > DISK_PATH_MAX)
		goto out;	/* on the base already (or a base path no header could name: left as it is) */
	if (snprintf(tmp, sizeof(tmp), "%s.flatten-%d", d->top->path, (int)getpid()) >= (int)sizeof(tmp)) {
		ret = vm_error_set(err, ENAMETOOLONG, "disk path too long: %s", d->top->path);
		goto out;
	}
	h.size = d->size;
	h.nr_clusters = clusters_for(d->size);
	h.data_offset = data_offset_for(h.nr_clusters);
	memcpy(h.id, d->top->id, DISK_ID_SIZE);	/* layers over it still find their parent */
	h.parent_path_len = (uint32_t)strlen(d->base_path);
	memcpy(h.parent_path, d->base_path, h.parent_path_len);
	map = calloc(h.nr_clusters, 8);
	buf = malloc(DISK_CLUSTER_SIZE);
	if (!map || !buf) {
		ret = vm_error_set(err, ENOMEM, "out of memory to flatten %s", path);
		goto out;
	}
	unlink(tmp);	/* a leftover of a flatten that died */
	fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = vm_error_set(err, errno, "cannot create %s: %s", tmp, strerror(errno));
		goto out;
	}
	/* Each cluster as the chain reads it: from the highest layer that has it; the base's stay below. */
	next = h.data_offset;
	for (uint64_t c = 0; !ret && c < h.nr_clusters; c++) {
		for (l = d->top; l && !l->map[c]; l = l->below)
			;
		if (!l)
			continue;
		ret = file_pread_all(l->fd, buf, DISK_CLUSTER_SIZE, l->map[c]);
		if (!ret)
			ret = file_pwrite_all(fd, buf, DISK_CLUSTER_SIZE, next);
		map[c] = next;
		next += DISK_CLUSTER_SIZE;
		copied += DISK_CLUSTER_SIZE;
	}
	disk_header_encode(&h, head);
	if (!ret)
		ret = file_pwrite_all(fd, map, 8 * h.nr_clusters, DISK_HEADER_SIZE);
	if (!ret)
		ret = file_pwrite_all(fd, head, sizeof(head), 0);
	if (!ret && ftruncate(fd, (off_t)next) < 0)
		ret = -errno;
	if (!ret && (fsync(fd) < 0 || fchmod(fd, 0444) < 0))
		ret = -errno;
	if (!ret && rename(tmp, d->top->path) < 0)
		ret = -errno;
	if (!ret)
		ret = file_fsync_parent(d->top->path);
	if (ret < 0) {
		unlink(tmp);
		ret = vm_error_set(err, -ret, "cannot flatten %s: %s", d->top->path, strerror(-ret));
		goto out;
	}
	if (st) {
		st->depth_after = 1;
		st->bytes = copied;
	}
out:
	if (fd >= 0)
		close(fd);
	free(map);
	free(buf);
	disk_close(d);
	return ret;
}

/* Whether the cluster at `off` of the base holds data (a hole reads as zeros and needs no copy). */
static int base_has_data(int fd, uint64_t off)
{
	off_t at = lseek(fd, (off_t)off, SEEK_DATA);

	if (at < 0)
		return errno != ENXIO;	/* ENXIO: no data from here on; any other error: read it to be sure */
	return (uint64_t)at < off + DISK_CLUSTER_SIZE;
}

int disk_export(const char *path, const char *out, struct disk_export_stats *st, struct vm_error *err)
{
	struct disk_layer *l;
	uint8_t *buf = NULL;
	struct disk *d;
	uint64_t written = 0;
	int fd = -1, ret;

	ret = disk_open(path, 1, &d, err);
	if (ret < 0)
		return ret;
	buf = malloc(DISK_CLUSTER_SIZE);
	if (!buf) {
		ret = vm_error_set(err, ENOMEM, "out of memory to export %s", path);
		goto out;
	}
	fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = vm_error_set(err, errno, "cannot create %s: %s", out, strerror(errno));
		goto out;
	}
	if (ftruncate(fd, (off_t)d->size) < 0)
		ret = -errno;
	for (uint64_t off = 0; !ret && off < d->size; off += DISK_CLUSTER_SIZE) {
		uint64_t len = d->size - off < DISK_CLUSTER_SIZE ? d->size - off : DISK_CLUSTER_SIZE;
		uint64_t c = off / DISK_CLUSTER_SIZE;
		int fd_from;
		uint64_t from;

		for (l = d->top; l && !l->map[c]; l = l->below)
			;
		if (l) {
			fd_from = l->fd;
			from = l->map[c];
		} else {
			if (!base_has_data(d->base_fd, off))
				continue;
			fd_from = d->base_fd;
			from = off;
		}
		ret = file_pread_all(fd_from, buf, len, from);
		if (!ret && !all_zero(buf, len)) {
			ret = file_pwrite_all(fd, buf, len, off);
			written += len;
		}
	}
	if (ret < 0) {
		ret = vm_error_set(err, -ret, "cannot export %s to %s: %s", path, out, strerror(-ret));
		unlink(out);
		goto out;
	}
	if (st)
		*st = (struct disk_export_stats){ .size = d->size, .bytes = written };
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	disk_close(d);
	return ret;
}
