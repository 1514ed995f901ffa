// createDiskLayer(path, below) -> Promise<void>; diskInfo(path) -> Promise<{size, base, layers}>;
// flattenDiskLayer(path) -> Promise<{depthBefore, depthAfter, bytes}>. See docs/disks.md.
// snapshotInfo(dir) -> Promise<{id, parentDir, memoryBytes, cpus, pages}>: the snapshot checked as a restore opens it.
// dataExtents(path) -> Promise<{size, extents: [start, end][]}>: where a sparse file has data (SEEK_DATA/SEEK_HOLE).
#pragma once

#include <napi.h>

Napi::Value CreateDiskLayer(const Napi::CallbackInfo& info);
Napi::Value DiskInfo(const Napi::CallbackInfo& info);
Napi::Value FlattenDiskLayer(const Napi::CallbackInfo& info);
Napi::Value ExportDisk(const Napi::CallbackInfo& info);
Napi::Value SnapshotInfo(const Napi::CallbackInfo& info);
Napi::Value DataExtents(const Napi::CallbackInfo& info);
