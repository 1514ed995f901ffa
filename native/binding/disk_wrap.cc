// Disk layers (docs/disks.md) for the engine: create a layer, describe a chain, flatten one; and a snapshot
// directory checked as a restore would open it (`smol store check`). They touch the disk, so they run off the
// JavaScript thread and return promises.
#include "disk_wrap.h"

#include "vm_error_js.h"

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

extern "C" {
#include "disk.h"
#include "error.h"
#include "vm.h"
}

namespace {

// createDiskLayer(path, below): a new empty writable layer over a base image or a frozen layer.
class CreateLayerWorker : public Napi::AsyncWorker {
 public:
  CreateLayerWorker(Napi::Env env, std::string path, std::string below)
      : Napi::AsyncWorker(env, "smol:createDiskLayer"),
        path_(std::move(path)),
        below_(std::move(below)),
        deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }
  void Execute() override {
    struct vm_error err = {};
    if (disk_layer_create(path_.c_str(), below_.c_str(), &err) < 0) Fail(err);
  }
  void OnOK() override { deferred_.Resolve(Env().Undefined()); }
  void OnError(const Napi::Error& e) override { deferred_.Reject(WithVmCode(e, code_)); }

 private:
  void Fail(const struct vm_error& err) {
    code_ = err.code;
    SetError(err.msg);
  }
  int code_ = 0;
  std::string path_, below_;
  Napi::Promise::Deferred deferred_;
};

struct LayerInfo {
  std::string path;
  bool frozen;
};

// diskInfo(path): the chain under a layer (or a raw image), checked as a VM would open it.
class DiskInfoWorker : public Napi::AsyncWorker {
 public:
  DiskInfoWorker(Napi::Env env, std::string path)
      : Napi::AsyncWorker(env, "smol:diskInfo"), path_(std::move(path)), deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }
  void Execute() override {
    struct vm_error err = {};
    struct disk* d = nullptr;
    if (disk_open(path_.c_str(), 1, &d, &err) < 0) {
      Fail(err);
      return;
    }
    size_ = d->size;
    base_ = d->base_path;
    for (struct disk_layer* l = d->top; l; l = l->below) layers_.push_back({l->path, l->frozen != 0});
    disk_close(d);
  }
  void OnOK() override {
    Napi::Env env = Env();
    Napi::Object r = Napi::Object::New(env);
    r.Set("size", static_cast<double>(size_));
    r.Set("base", base_);
    Napi::Array layers = Napi::Array::New(env, layers_.size());
    for (size_t i = 0; i < layers_.size(); i++) {
      Napi::Object l = Napi::Object::New(env);
      l.Set("path", layers_[i].path);
      l.Set("frozen", layers_[i].frozen);
      layers.Set(static_cast<uint32_t>(i), l);
    }
    r.Set("layers", layers);  // top first
    deferred_.Resolve(r);
  }
  void OnError(const Napi::Error& e) override { deferred_.Reject(WithVmCode(e, code_)); }

 private:
  void Fail(const struct vm_error& err) {
    code_ = err.code;
    SetError(err.msg);
  }
  int code_ = 0;
  std::string path_, base_;
  uint64_t size_ = 0;
  std::vector<LayerInfo> layers_;
  Napi::Promise::Deferred deferred_;
};

// flattenDiskLayer(path): the frozen layer rewritten to sit on the base alone (disk_flatten).
class FlattenWorker : public Napi::AsyncWorker {
 public:
  FlattenWorker(Napi::Env env, std::string path)
      : Napi::AsyncWorker(env, "smol:flattenDiskLayer"), path_(std::move(path)), deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }
  void Execute() override {
    struct vm_error err = {};
    if (disk_flatten(path_.c_str(), &stats_, &err) < 0) Fail(err);
  }
  void OnOK() override {
    Napi::Object r = Napi::Object::New(Env());
    r.Set("depthBefore", stats_.depth_before);
    r.Set("depthAfter", stats_.depth_after);
    r.Set("bytes", static_cast<double>(stats_.bytes));
    deferred_.Resolve(r);
  }
  void OnError(const Napi::Error& e) override { deferred_.Reject(WithVmCode(e, code_)); }

 private:
  void Fail(const struct vm_error& err) {
    code_ = err.code;
    SetError(err.msg);
  }
  int code_ = 0;
  std::string path_;
  struct disk_flatten_stats stats_ = {};
  Napi::Promise::Deferred deferred_;
};

// exportDisk(path, out): the disk as the chain at path reads it, written to a new sparse raw file (disk_export).
class ExportWorker : public Napi::AsyncWorker {
 public:
  ExportWorker(Napi::Env env, std::string path, std::string out)
      : Napi::AsyncWorker(env, "smol:exportDisk"),
        path_(std::move(path)),
        out_(std::move(out)),
        deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }
  void Execute() override {
    struct vm_error err = {};
    if (disk_export(path_.c_str(), out_.c_str(), &stats_, &err) < 0) {
      code_ = err.code;
      SetError(err.msg);
    }
  }
  void OnOK() override {
    Napi::Object r = Napi::Object::New(Env());
    r.Set("size", static_cast<double>(stats_.size));
    r.Set("bytes", static_cast<double>(stats_.bytes));
    deferred_.Resolve(r);
  }
  void OnError(const Napi::Error& e) override { deferred_.Reject(WithVmCode(e, code_)); }

 private:
  int code_ = 0;
  std::string path_, out_;
  struct disk_export_stats stats_ = {};
  Napi::Promise::Deferred deferred_;
};

// snapshotInfo(dir): the snapshot's state and memory layer (and its parents') opened and checked, checksums included,
// without reading guest memory: what `smol store check` asks of every published snapshot.
class SnapshotInfoWorker : public Napi::AsyncWorker {
 public:
  SnapshotInfoWorker(Napi::Env env, std::string dir)
      : Napi::AsyncWorker(env, "smol:snapshotInfo"), dir_(std::move(dir)), deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }
  void Execute() override {
    struct vm_error err = {};
    struct vm_snapshot* s = nullptr;
    if (vm_snapshot_open(dir_.c_str(), &s, &err) < 0) {
      code_ = err.code;
      SetError(err.msg);
      return;
    }
    vm_snapshot_get_info(s, &info_);
    vm_snapshot_put(s);
  }
  void OnOK() override {
    Napi::Object r = Napi::Object::New(Env());
    r.Set("id", info_.id);
    r.Set("parentDir", info_.parent_dir[0] ? Napi::Value(Napi::String::New(Env(), info_.parent_dir)) : Env().Null());
    r.Set("memoryBytes", static_cast<double>(info_.mem_size));
    r.Set("cpus", info_.nr_cpus);
    r.Set("pages", static_cast<double>(info_.pages));
    deferred_.Resolve(r);
  }
  void OnError(const Napi::Error& e) override { deferred_.Reject(WithVmCode(e, code_)); }

 private:
  int code_ = 0;
  std::string dir_;
  struct vm_snapshot_info info_ = {};
  Napi::Promise::Deferred deferred_;
};

// dataExtents(path): where a sparse file has data, by SEEK_DATA/SEEK_HOLE, so that a reader (packing a
// .smolmachine) skips its holes instead of reading zeros: a 2 GiB guest's memory layer holds a few MiB. A file system
// without them (EINVAL, as 9p) gives the whole file as one extent; so does a file of more than kMaxExtents pieces.
class DataExtentsWorker : public Napi::AsyncWorker {
 public:
  static constexpr size_t kMaxExtents = 1 << 20;
  DataExtentsWorker(Napi::Env env, std::string path)
      : Napi::AsyncWorker(env, "smol:dataExtents"), path_(std::move(path)), deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }
  void Execute() override {
    int fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Fail("cannot open", errno);
    struct stat st = {};
    if (fstat(fd, &st) < 0) return Fail("cannot stat", errno, fd);
    size_ = st.st_size;
    off_t at = 0;
    while (at < size_) {
      off_t data = lseek(fd, at, SEEK_DATA);
      if (data < 0 && errno == ENXIO) break;  // only a hole from here to the end
      if (data < 0 && errno == EINVAL) return Whole(fd);
      if (data < 0) return Fail("SEEK_DATA failed on", errno, fd);
      off_t hole = lseek(fd, data, SEEK_HOLE);
      if (hole < 0) return Fail("SEEK_HOLE failed on", errno, fd);
      if (hole > size_) hole = size_;
      if (hole <= data) return Whole(fd);  // a file system that answers nonsense is read whole
      extents_.emplace_back(data, hole);
      if (extents_.size() > kMaxExtents) return Whole(fd);
      at = hole;
    }
    close(fd);
  }
  void OnOK() override {
    Napi::Array list = Napi::Array::New(Env(), extents_.size());
    for (size_t i = 0; i < extents_.size(); i++) {
      Napi::Array pair = Napi::Array::New(Env(), 2);
      pair.Set(0u, static_cast<double>(extents_[i].first));
      pair.Set(1u, static_cast<double>(extents_[i].second));
      list.Set(static_cast<uint32_t>(i), pair);
    }
    Napi::Object r = Napi::Object::New(Env());
    r.Set("size", static_cast<double>(size_));
    r.Set("extents", list);
    deferred_.Resolve(r);
  }
  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  void Whole(int fd) {
    close(fd);
    extents_.clear();
    if (size_ > 0) extents_.emplace_back(0, size_);
  }
  void Fail(const char* what, int error, int fd = -1) {
    if (fd >= 0) close(fd);
    SetError(std::string(what) + " " + path_ + ": " + std::strerror(error));
  }
  std::string path_;
  off_t size_ = 0;
  std::vector<std::pair<off_t, off_t>> extents_;
  Napi::Promise::Deferred deferred_;
};

}  // namespace

Napi::Value DataExtents(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) throw Napi::TypeError::New(env, "dataExtents(path) expects a path");
  auto* worker = new DataExtentsWorker(env, info[0].As<Napi::String>().Utf8Value());
  Napi::Promise p = worker->Promise();
  worker->Queue();
  return p;
}

Napi::Value SnapshotInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) throw Napi::TypeError::New(env, "snapshotInfo(dir) expects a path");
  auto* worker = new SnapshotInfoWorker(env, info[0].As<Napi::String>().Utf8Value());
  Napi::Promise p = worker->Promise();
  worker->Queue();
  return p;
}

Napi::Value FlattenDiskLayer(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) throw Napi::TypeError::New(env, "flattenDiskLayer(path) expects a path");
  auto* worker = new FlattenWorker(env, info[0].As<Napi::String>().Utf8Value());
  Napi::Promise p = worker->Promise();
  worker->Queue();
  return p;
}

Napi::Value ExportDisk(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsString() || !info[1].IsString())
    throw Napi::TypeError::New(env, "exportDisk(path, out) expects two paths");
  auto* worker = new ExportWorker(env, info[0].As<Napi::String>().Utf8Value(), info[1].As<Napi::String>().Utf8Value());
  Napi::Promise p = worker->Promise();
  worker->Queue();
  return p;
}

Napi::Value CreateDiskLayer(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsString() || !info[1].IsString())
    throw Napi::TypeError::New(env, "createDiskLayer(path, below) expects two paths");
  auto* worker = new CreateLayerWorker(env, info[0].As<Napi::String>().Utf8Value(), info[1].As<Napi::String>().Utf8Value());
  Napi::Promise p = worker->Promise();
  worker->Queue();
  return p;
}

Napi::Value DiskInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) throw Napi::TypeError::New(env, "diskInfo(path) expects a path");
  auto* worker = new DiskInfoWorker(env, info[0].As<Napi::String>().Utf8Value());
  Napi::Promise p = worker->Promise();
  worker->Queue();
  return p;
}
