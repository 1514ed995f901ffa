/*
 * Opening a snapshot directory (docs/snapshots.md, "On disk"): its state checked, its parents opened in turn (a diff
 * layer needs them), and its memory file mapped as a layer over theirs. Every file is untrusted input.
 */
#define _GNU_SOURCE
#include "error.h"
#include "file_io.h"
#include "mem_layer.h"
#include "snapfile.h"
#include "snapshot.h"
#include "trace.h"
#include "vm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SNAP_OPEN_MAX_DEPTH 16	/* parent links followed on disk; chains are at most MEM_LAYER_MAX_DEPTH deep */

static int read_state(const char *path, uint8_t **out, size_t *len, struct vm_error *err)
{
	int ret = file_read_whole(path, SNAP_MAX_SIZE, out, len);

	if (ret == -EINVAL || ret == -EFBIG)
		return vm_error_set(err, EINVAL, "%s is not a regular file of at most %u MiB", path, SNAP_MAX_SIZE >> 20);
	if (ret == -ENOMEM)
		return vm_error_set(err, ENOMEM, "out of memory reading %s", path);
	if (ret < 0)
		return vm_error_set(err, -ret, "cannot read %s: %s", path, strerror(-ret));
	return 0;
}

static int open_layer(const char *abs_dir, const struct vm_snapshot *s, struct mem_layer *parent,
		      struct mem_layer **out, struct vm_error *err)
{
	char path[PATH_MAX + 8];
	struct mem_layer_header h;
	const uint8_t *bitmap;
	uint8_t head[MEM_LAYER_HEADER_SIZE], *buf = NULL;
	struct stat sb;
	ssize_t got;
	long need;
	int fd;

	snprintf(path, sizeof(path), "%s/memory", abs_dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return vm_error_set(err, errno, "cannot open %s: %s", path, strerror(errno));
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		close(fd);
		return vm_error_set(err, EINVAL, "%s is not a regular file", path);
	}
	got = pread(fd, head, sizeof(head), 0);
	need = mem_layer_header_parse(head, got > 0 ? (size_t)got : 0, (uint64_t)sb.st_size, path, &h, &bitmap, err);
	if (need > 0) {
		buf = malloc((size_t)need);
		if (!buf) {
			close(fd);
			return vm_error_set(err, ENOMEM, "out of memory reading %s", path);
		}
		if (file_pread_all(fd, buf, (size_t)need, 0) < 0) {
			free(buf);
			close(fd);
			return vm_error_set(err, EIO, "%s is truncated", path);
		}
		need = mem_layer_header_parse(buf, (size_t)need, (uint64_t)sb.st_size, path, &h, &bitmap, err);
	}
	if (need == 0 && h.mem_size != s->info.mem_size)
		need = vm_error_set(err, EINVAL, "%s holds %llu MiB of memory; its state says %llu MiB", path,
				    (unsigned long long)(h.mem_size >> 20), (unsigned long long)(s->info.mem_size >> 20));
	if (need == 0 && memcmp(h.id, s->parsed.id, SNAP_ID_SIZE))
		need = vm_error_set(err, EINVAL, "%s belongs to another snapshot (its id differs from the state's)",
				    path);
	if (need == 0 && (h.kind == MEM_LAYER_DIFF) != (parent != NULL))
		need = vm_error_set(err, EINVAL, "%s is a %s layer but the state %s a parent", path,
				    h.kind == MEM_LAYER_DIFF ? "diff" : "full", parent ? "names" : "names no");
	if (need != 0) {
		free(buf);
		close(fd);
		return -1;
	}
	*out = mem_layer_new(fd, h.kind, h.mem_size, h.data_offset, bitmap, parent, err);
	free(buf);
	if (!*out)
		return -1;
	(*out)->dir = strdup(abs_dir);
	memcpy((*out)->snap_id, s->parsed.id, SNAP_ID_SIZE);
	(*out)->disk_depth = parent ? parent->disk_depth + 1 : 1;
	return 0;
}

static int snapshot_open_at(const char *dir, int depth, struct vm_snapshot **out, struct vm_error *err)
{
	char abs_dir[PATH_MAX], path[PATH_MAX + 8], parent_dir[PATH_MAX + SNAP_MAX_PARENT_PATH + 2];
	struct vm_snapshot *s, *parent = NULL;
	struct mem_layer *layer = NULL;
	uint8_t *blob = NULL;
	size_t len = 0;
	int ret;

	if (depth > SNAP_OPEN_MAX_DEPTH)
		return vm_error_set(err, ELOOP, "%s: more than %d parent snapshots (a loop?)", dir, SNAP_OPEN_MAX_DEPTH);
	if (!realpath(dir, abs_dir))
		return vm_error_set(err, errno, "no snapshot at %s: %s", dir, strerror(errno));
	snprintf(path, sizeof(path), "%s/state", abs_dir);
	ret = read_state(path, &blob, &len, err);
	if (ret < 0)
		return ret;
	s = calloc(1, sizeof(*s));
	if (!s) {
		free(blob);
		return vm_error_set(err, ENOMEM, "out of memory for a snapshot");
	}
	s->blob = blob;
	s->blob_len = len;
	s->dir = strdup(abs_dir);
	ret = snap_parse(blob, len, path, &s->parsed, err);
	if (!ret)
		ret = snap_validate(&s->parsed, path, &s->info, err);
	trace_stepf("open snapshot: state%s", depth ? " (a parent)" : "");
	if (!ret && s->info.parent_path[0]) {
		snprintf(parent_dir, sizeof(parent_dir), "%s/%s", abs_dir, s->info.parent_path);
		ret = snapshot_open_at(parent_dir, depth + 1, &parent, err);
		if (ret < 0)
			ret = vm_error_prefix(err, "%s: its parent snapshot: ", abs_dir);
		else if (memcmp(parent->parsed.id, s->parsed.parent, SNAP_ID_SIZE))
			ret = vm_error_set(err, EINVAL, "%s: its parent %s was replaced (the parent's id does not match)",
					   abs_dir, parent->dir);
		else if (parent->info.mem_size != s->info.mem_size)
			ret = vm_error_set(err, EINVAL, "%s: its parent %s has a different memory size", abs_dir,
					   parent->dir);
	}
	if (!ret)
		ret = open_layer(abs_dir, s, parent ? parent->layer : NULL, &layer, err);
	trace_stepf("open snapshot: memory layer%s", depth ? " (a parent)" : "");
	vm_snapshot_put(parent);
	if (ret < 0) {
		vm_snapshot_put(s);
		return ret;
	}
	s->layer = layer;
	snapshot_find_disk(s);
	*out = s;
	return 0;
}

int vm_snapshot_open(const char *dir, struct vm_snapshot **out, struct vm_error *err)
{
	return snapshot_open_at(dir, 0, out, err);
}
