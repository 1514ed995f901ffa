#include "vm_wrap.h"

extern "C" {
#include "net_vm.h"
#include "trace.h"
}

#include "vm_error_js.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

namespace {

enum class Event { kOutput, kExit };

// Device resources by device name (vm.h, struct vm_device_resource): the strings owned here, the C view made on
// demand. From JavaScript's `resources: { 'virtio-blk': { path }, 'virtio-vsock': { path } }`; the binding knows
// no device names, the VMM checks them.
struct Resources {
  std::vector<std::pair<std::string, std::string>> entries;  // device, path

  std::vector<struct vm_device_resource> View() const {
    std::vector<struct vm_device_resource> list;
    for (const auto& [device, path] : entries) list.push_back({device.c_str(), path.c_str()});
    return list;
  }
};

constexpr size_t kReadChunk = 256 * 1024;

}  // namespace

// Everything one VM needs on the JavaScript side. Owned by its VmWrap once created.
struct VmWrap::Host {
  struct vm* vm = nullptr;
  Napi::ThreadSafeFunction tsfn;
  Napi::FunctionReference on_console;
  Napi::FunctionReference on_exit;
  Napi::ObjectReference self;  // weak until start(), strong while the VM runs
  std::string kernel, initrd, cmdline;
  std::string disk, disk_top;  // the disk of a VM that boots (config.disk)
  std::string volume_base[VM_MAX_VOLUMES], volume_top[VM_MAX_VOLUMES];  // its volumes (config.volumes)
  std::string vsock_path;      // its vsock device's host socket (config.vsock.path)
  Resources resources;         // for a restore or fork child, or a boot's config.resources: what its devices need
  std::vector<struct vm_device_resource> resource_view;  // a boot's: config.resources points here
  struct vm_config config = {};
  int ops_in_flight = 0;       // pause/kill workers that still use `vm`
  // The trace of the operation that made the VM (trace.h), kept when the VM is destroyed at its exit.
  std::unique_ptr<struct vm_trace> final_trace;
  struct vm_trace_times final_times = {};
  bool exited = false;
  // The vmhost stopped reading console output (its engine is behind): the VMM's ring fills, and its slow-reader
  // policy (console.h) applies. Touched only on the JavaScript thread.
  bool console_held = false;
  bool tsfn_released = false;
  // Host is freed by whichever goes last: the wrapper (collected) or the thread-safe function (finalized), so a
  // call still queued on the function never sees freed memory.
  bool wrapper_gone = false;
  bool tsfn_finalized = false;

  void ReleaseFromWrapper() {
    wrapper_gone = true;
    if (!tsfn_released) {
      tsfn_released = true;
      tsfn.Release();
    }
    if (tsfn_finalized) delete this;
  }

  void DestroyWhenIdle() {
    if (exited && ops_in_flight == 0 && vm) {
      vm_destroy(vm);
      vm = nullptr;
    }
  }
};

static Napi::FunctionReference* constructor_ref(Napi::Env env) {
  return env.GetInstanceData<Napi::FunctionReference>();
}

static void NotifyJs(VmWrap::Host* host, Event event) {
  host->tsfn.NonBlockingCall(new Event(event), [host](Napi::Env env, Napi::Function, Event* e) {
    Event ev = *e;
    delete e;
    if (!host->vm || host->exited) return;  // after the exit, everything was drained and delivered
    // Drain console output first: on exit, nothing the guest wrote before it ended may be lost.
    std::vector<uint8_t> buf(kReadChunk);
    if (ev == Event::kOutput) {
      if (host->console_held) return;  // holdConsole(false) asks again
      size_t n = vm_console_read(host->vm, buf.data(), buf.size());
      if (n == 0) return;
      NotifyJs(host, Event::kOutput);  // come back for the rest first: the callback may throw
      host->on_console.Call({Napi::Buffer<uint8_t>::Copy(env, buf.data(), n)});
      return;
    }
    std::optional<Napi::Error> console_error;  // a throwing listener must not stop the exit from being delivered
    for (size_t n; (n = vm_console_read(host->vm, buf.data(), buf.size())) > 0;) {
      try {
        host->on_console.Call({Napi::Buffer<uint8_t>::Copy(env, buf.data(), n)});
      } catch (const Napi::Error& e) {
        if (!console_error) console_error = e;
      }
    }
    if (ev != Event::kExit) return;
    vm_kill(host->vm);  // the vCPU threads have ended: this only joins them
    struct vm_exit exit;
    vm_get_exit(host->vm, &exit);
    Napi::Object info = Napi::Object::New(env);
    info.Set("reason", vm_exit_reason_name(exit.reason));
    info.Set("code", exit.code);
    info.Set("message", exit.message);
    host->final_trace = std::make_unique<struct vm_trace>();
    vm_trace_get(host->vm, host->final_trace.get(), &host->final_times);
    host->exited = true;
    host->DestroyWhenIdle();
    // Let go of everything that kept the VM's JavaScript side alive before calling out (the callback may throw).
    if (!host->tsfn_released) {
      host->tsfn_released = true;
      host->tsfn.Release();
    }
    Napi::Function on_exit = host->on_exit.Value();
    host->on_exit.Reset();
    host->on_console.Reset();
    if (!host->self.IsEmpty()) host->self.Reset();
    on_exit.Call({info});
    if (console_error) throw *console_error;
  });
}

static void OnOutput(void* opaque) { NotifyJs(static_cast<VmWrap::Host*>(opaque), Event::kOutput); }
static void OnExit(void* opaque) { NotifyJs(static_cast<VmWrap::Host*>(opaque), Event::kExit); }

// A Host with its event function, made on the JavaScript thread. Until a wrapper owns it, ReleaseFromWrapper() is
// how it is given up.
static VmWrap::Host* NewHost(Napi::Env env, const Napi::Function& on_console, const Napi::Function& on_exit) {
  auto* host = new VmWrap::Host();
  host->on_console = Napi::Persistent(on_console);
  host->on_exit = Napi::Persistent(on_exit);
  host->tsfn = Napi::ThreadSafeFunction::New(env, on_console, "smol:vm-events", 0, 1, [host](Napi::Env) {
    host->tsfn_finalized = true;
    if (host->wrapper_gone) delete host;
  });
  return host;
}

// The wrapper object for a Host whose VM exists. A running VM keeps itself and Node alive until it exits.
static Napi::Object WrapHost(Napi::Env env, VmWrap::Host* host, bool running);
static struct vm* LiveVm(const Napi::CallbackInfo& info, VmWrap::Host* host, const char* what);

namespace {

// A trace as JavaScript sees it (VmTrace in src/vmm/native.ts); without times, startMs and the rest are null.
Napi::Object TraceObject(Napi::Env env, const struct vm_trace& trace, const struct vm_trace_times* times) {
  Napi::Array steps = Napi::Array::New(env, trace.nr_steps);
  uint32_t ioctls = 0;
  for (int i = 0; i < trace.nr_steps; i++) {
    Napi::Object s = Napi::Object::New(env);
    s.Set("step", trace.steps[i].name);
    s.Set("ms", trace.steps[i].ms);
    s.Set("kvmIoctls", trace.steps[i].kvm_ioctls);
    ioctls += trace.steps[i].kvm_ioctls;
    steps.Set(static_cast<uint32_t>(i), s);
  }
  auto at = [&](double ms) { return ms < 0 ? env.Null() : Napi::Value(Napi::Number::New(env, ms)); };
  Napi::Object out = Napi::Object::New(env);
  out.Set("steps", steps);
  out.Set("totalMs", trace.t_last - trace.t0);
  out.Set("kvmIoctls", ioctls);
  out.Set("startMs", at(times ? times->start_ms : -1));
  out.Set("firstEntryMs", at(times ? times->first_entry_ms : -1));
  out.Set("firstOutputMs", at(times ? times->first_output_ms : -1));
  return out;
}

// Makes `trace` this worker thread's current one, begun when JavaScript asked (its first step: the wait for a thread).
void BeginTrace(struct vm_trace* trace, double asked_at) {
  vm_trace_begin(trace);
  trace->t0 = trace->t_last = asked_at;
  trace_step("binding: wait for a worker thread");
}

// Creates a VM off the JavaScript thread: boots one from config, or restores one from a snapshot directory.
class CreateWorker : public Napi::AsyncWorker {
 public:
  CreateWorker(Napi::Env env, VmWrap::Host* host, std::string restore_dir = "")
      : Napi::AsyncWorker(env, "smol:createVm"),
        host_(host),
        restore_dir_(std::move(restore_dir)),
        deferred_(Napi::Promise::Deferred::New(env)),
        asked_at_(trace_now_ms()) {}
  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    struct vm_callbacks cb = {host_, OnOutput, OnExit};
    struct vm_error err = {};
    struct vm_trace trace;
    BeginTrace(&trace, asked_at_);
    if (restore_dir_.empty()) {
      if (vm_create(&host_->config, &cb, &host_->vm, &err) < 0) Fail(err);
      else vm_trace_keep(host_->vm, &trace);
      vm_trace_use(nullptr);
      return;
    }
    struct vm_snapshot* snap = nullptr;
    std::vector<struct vm_device_resource> resources = host_->resources.View();
    struct vm_restore_params params = {host_->config.console_limit, &cb, resources.data(), resources.size()};
    if (vm_snapshot_open(restore_dir_.c_str(), &snap, &err) < 0 || vm_restore(snap, &params, &host_->vm, &err) < 0)
      Fail(err);
    vm_snapshot_put(snap);
    trace_step("release the snapshot");
    if (host_->vm) vm_trace_keep(host_->vm, &trace);
    vm_trace_use(nullptr);
  }
  void OnOK() override {
    // Until start(), neither the wrapper nor the event function keeps anything alive: a VM that is dropped before
    // it runs is collected and destroyed. start() takes both references; the exit gives them back.
    deferred_.Resolve(WrapHost(Env(), host_, false));
  }
  void OnError(const Napi::Error& e) override {
    host_->ReleaseFromWrapper();  // no wrapper will ever exist
    deferred_.Reject(WithVmCode(e, code_));
  }

 private:
  void Fail(const struct vm_error& err) {
    code_ = err.code;
    SetError(err.msg);
  }
  int code_ = 0;
  VmWrap::Host* host_;
  std::string restore_dir_;
  Napi::Promise::Deferred deferred_;
  double asked_at_;
};

// What every worker that operates on an existing VM holds: the VM's wrapper, so it cannot be collected (and free
// `host`) while the worker runs, a count that keeps the VM from being destroyed meanwhile, and the promise.
struct HeldHost {
  HeldHost(const Napi::Object& wrapper, VmWrap::Host* h)
      : host(h), deferred(Napi::Promise::Deferred::New(wrapper.Env())), wrapper_ref(Napi::Persistent(wrapper)) {
    host->ops_in_flight++;
  }
  void Resolve(Napi::Value v) {
    Finish();
    deferred.Resolve(v);
  }
  void Reject(Napi::Value v) {
    Finish();
    deferred.Reject(v);
  }
  VmWrap::Host* host;
  Napi::Promise::Deferred deferred;

 private:
  void Finish() {
    host->ops_in_flight--;
    host->DestroyWhenIdle();
  }
  Napi::ObjectReference wrapper_ref;
};

// Runs a blocking VM operation (pause, kill) off the JavaScript thread.
class OpWorker : public Napi::AsyncWorker {
 public:
  using Op = int (*)(struct vm*, struct vm_error*);
  OpWorker(const Napi::Object& wrapper, VmWrap::Host* host, Op op, const char* name)
      : Napi::AsyncWorker(wrapper.Env(), name), held_(wrapper, host), op_(op) {}
  Napi::Promise Promise() { return held_.deferred.Promise(); }

  void Execute() override {
    struct vm_error err = {};
    if (op_(held_.host->vm, &err) < 0) {
      code_ = err.code;
      SetError(err.msg);
    }
  }
  void OnOK() override { held_.Resolve(Env().Undefined()); }
  void OnError(const Napi::Error& e) override { held_.Reject(WithVmCode(e, code_)); }

 private:
  HeldHost held_;
  Op op_;
  int code_ = 0;
};

int KillOp(struct vm* vm, struct vm_error*) {
  vm_kill(vm);
  return 0;
}

std::string StringProp(const Napi::Object& o, const char* key, bool required) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined() || v.IsNull()) {
    if (required) throw Napi::TypeError::New(o.Env(), std::string("config.") + key + " is required");
    return "";
  }
  if (!v.IsString()) throw Napi::TypeError::New(o.Env(), std::string("config.") + key + " must be a string");
  return v.As<Napi::String>().Utf8Value();
}

// options.resources: { [device]: { path } }, or absent (none).
Resources ResourcesOption(const Napi::Value& options, const std::string& what) {
  Napi::Env env = options.Env();
  Resources out;
  if (options.IsUndefined() || options.IsNull()) return out;
  if (!options.IsObject()) throw Napi::TypeError::New(env, what + ": options must be an object");
  Napi::Value v = options.As<Napi::Object>().Get("resources");
  if (v.IsUndefined() || v.IsNull()) return out;
  if (!v.IsObject() || v.IsArray())
    throw Napi::TypeError::New(env, what + ": resources must be an object keyed by device name");
  Napi::Object by_device = v.As<Napi::Object>();
  Napi::Array names = by_device.GetPropertyNames();
  for (uint32_t i = 0; i < names.Length(); i++) {
    std::string device = names.Get(i).ToString().Utf8Value();
    Napi::Value entry = by_device.Get(device);
    Napi::Value path = entry.IsObject() ? entry.As<Napi::Object>().Get("path") : env.Undefined();
    if (!path.IsString() || path.As<Napi::String>().Utf8Value().empty())
      throw Napi::TypeError::New(env, what + ": resources[\"" + device + "\"].path must be a non-empty path");
    out.entries.emplace_back(device, path.As<Napi::String>().Utf8Value());
  }
  return out;
}


int64_t IntProp(const Napi::Object& o, const char* key) {
  Napi::Value v = o.Get(key);
  if (!v.IsNumber()) throw Napi::TypeError::New(o.Env(), std::string("config.") + key + " must be a number");
  double d = v.As<Napi::Number>().DoubleValue();
  if (!std::isfinite(d) || std::fabs(d) > 9007199254740991.0 || d != std::trunc(d))
    throw Napi::TypeError::New(o.Env(), std::string("config.") + key + " must be a whole number");
  return static_cast<int64_t>(d);
}

}  // namespace

Napi::Value VmWrap::Create(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 3 || !info[0].IsObject() || !info[1].IsFunction() || !info[2].IsFunction())
    throw Napi::TypeError::New(env, "createVm(config, onConsole, onExit) expects an object and two functions");
  Napi::Object config = info[0].As<Napi::Object>();
  auto host = std::make_unique<Host>();  // until the config is checked; then NewHost's
  host->kernel = StringProp(config, "kernel", true);
  host->initrd = StringProp(config, "initrd", false);
  host->cmdline = StringProp(config, "cmdline", false);
  int64_t memory = IntProp(config, "memoryMiB"), cpus = IntProp(config, "cpus");
  if (memory < VM_MIN_MEM_MIB || memory > VM_MAX_MEM_MIB)
    throw Napi::RangeError::New(env, "memoryMiB must be between " + std::to_string(VM_MIN_MEM_MIB) + " and " +
                                         std::to_string(VM_MAX_MEM_MIB) + " (got " + std::to_string(memory) + ")");
  if (cpus < 1 || cpus > VM_MAX_CPUS)
    throw Napi::RangeError::New(env, "cpus must be between 1 and " + std::to_string(VM_MAX_CPUS) + " (got " +
                                         std::to_string(cpus) + ")");
  host->config.mem_size = static_cast<uint64_t>(memory) << 20;
  host->config.nr_cpus = static_cast<int>(cpus);
  host->config.kernel = host->kernel.c_str();
  host->config.initrd = host->initrd.empty() ? nullptr : host->initrd.c_str();
  host->config.cmdline = host->cmdline.c_str();
  std::string disk, disk_top;
  Napi::Value disk_v = config.Get("disk");
  if (!disk_v.IsUndefined() && !disk_v.IsNull()) {
    if (!disk_v.IsObject()) throw Napi::TypeError::New(env, "config.disk must be an object {base, top?}");
    Napi::Object d = disk_v.As<Napi::Object>();
    Napi::Value base = d.Get("base"), top = d.Get("top");
    if (!base.IsString() || base.As<Napi::String>().Utf8Value().empty())
      throw Napi::TypeError::New(env, "config.disk.base must be the path of the base image");
    if (!top.IsUndefined() && !top.IsNull() && (!top.IsString() || top.As<Napi::String>().Utf8Value().empty()))
      throw Napi::TypeError::New(env, "config.disk.top must be the path of the writable layer");
    disk = base.As<Napi::String>().Utf8Value();
    if (top.IsString()) disk_top = top.As<Napi::String>().Utf8Value();
  }
  std::string volume_base[VM_MAX_VOLUMES], volume_top[VM_MAX_VOLUMES];
  int nr_volumes = 0;
  Napi::Value volumes_v = config.Get("volumes");
  if (!volumes_v.IsUndefined() && !volumes_v.IsNull()) {
    if (!volumes_v.IsArray()) throw Napi::TypeError::New(env, "config.volumes must be an array of {base, top?}");
    Napi::Array volumes = volumes_v.As<Napi::Array>();
    if (volumes.Length() > VM_MAX_VOLUMES)
      throw Napi::RangeError::New(env, "config.volumes: at most " + std::to_string(VM_MAX_VOLUMES) + " volumes");
    for (uint32_t i = 0; i < volumes.Length(); i++) {
      Napi::Value item = volumes.Get(i);
      if (!item.IsObject()) throw Napi::TypeError::New(env, "config.volumes[i] must be an object {base, top?}");
      Napi::Value base = item.As<Napi::Object>().Get("base"), top = item.As<Napi::Object>().Get("top");
      if (!base.IsString() || base.As<Napi::String>().Utf8Value().empty())
        throw Napi::TypeError::New(env, "config.volumes[i].base must be the path of the volume's image");
      if (!top.IsUndefined() && !top.IsNull() && (!top.IsString() || top.As<Napi::String>().Utf8Value().empty()))
        throw Napi::TypeError::New(env, "config.volumes[i].top must be the path of the writable layer");
      volume_base[i] = base.As<Napi::String>().Utf8Value();
      if (top.IsString()) volume_top[i] = top.As<Napi::String>().Utf8Value();
      nr_volumes++;
    }
  }
  Napi::Value rng = config.Get("rng");
  if (!rng.IsUndefined() && !rng.IsBoolean()) throw Napi::TypeError::New(env, "config.rng must be a boolean");
  host->config.rng = rng.IsBoolean() && rng.As<Napi::Boolean>().Value();
  Napi::Value virtio_console = config.Get("virtioConsole");
  if (!virtio_console.IsUndefined() && !virtio_console.IsBoolean())
    throw Napi::TypeError::New(env, "config.virtioConsole must be a boolean");
  host->config.virtio_console = virtio_console.IsBoolean() && virtio_console.As<Napi::Boolean>().Value();
  std::string vsock_path;
  Napi::Value vsock = config.Get("vsock");
  if (!vsock.IsUndefined() && !vsock.IsNull()) {
    if (!vsock.IsObject()) throw Napi::TypeError::New(env, "config.vsock must be an object {path, cid?}");
    Napi::Object o = vsock.As<Napi::Object>();
    Napi::Value path = o.Get("path");
    if (!path.IsString() || path.As<Napi::String>().Utf8Value().empty())
      throw Napi::TypeError::New(env, "config.vsock.path must be the path of the host-side Unix socket");
    vsock_path = path.As<Napi::String>().Utf8Value();
    if (!o.Get("cid").IsUndefined()) {
      int64_t cid = IntProp(o, "cid");
      if (cid < 3 || cid > 0xffffffffLL)
        throw Napi::RangeError::New(env, "config.vsock.cid must be between 3 and 4294967295 (got " +
                                             std::to_string(cid) + ")");
      host->config.vsock_cid = static_cast<uint64_t>(cid);
    }
  }
  // config.resources: devices the resource alone configures ({ 'virtio-net': { path } }); the VMM checks the names.
  Resources boot_resources = ResourcesOption(config, "createVm");
  Napi::Value console_buffer = config.Get("consoleBufferBytes");
  if (!console_buffer.IsUndefined()) host->config.console_limit = static_cast<uint64_t>(IntProp(config, "consoleBufferBytes"));
  VmWrap::Host* raw = NewHost(env, info[1].As<Napi::Function>(), info[2].As<Napi::Function>());
  raw->kernel = std::move(host->kernel);
  raw->initrd = std::move(host->initrd);
  raw->cmdline = std::move(host->cmdline);
  raw->config = host->config;
  raw->config.kernel = raw->kernel.c_str();
  raw->config.initrd = raw->initrd.empty() ? nullptr : raw->initrd.c_str();
  raw->config.cmdline = raw->cmdline.c_str();
  raw->disk = std::move(disk);
  raw->disk_top = std::move(disk_top);
  raw->config.disk = raw->disk.empty() ? nullptr : raw->disk.c_str();
  raw->config.disk_top = raw->disk_top.empty() ? nullptr : raw->disk_top.c_str();
  raw->config.nr_volumes = nr_volumes;
  for (int i = 0; i < nr_volumes; i++) {
    raw->volume_base[i] = std::move(volume_base[i]);
    raw->volume_top[i] = std::move(volume_top[i]);
    raw->config.volumes[i].base = raw->volume_base[i].c_str();
    raw->config.volumes[i].top = raw->volume_top[i].empty() ? nullptr : raw->volume_top[i].c_str();
  }
  raw->vsock_path = std::move(vsock_path);
  raw->config.vsock_path = raw->vsock_path.empty() ? nullptr : raw->vsock_path.c_str();
  raw->resources = std::move(boot_resources);
  raw->resource_view = raw->resources.View();
  raw->config.resources = raw->resource_view.empty() ? nullptr : raw->resource_view.data();
  raw->config.nr_resources = raw->resource_view.size();
  auto* worker = new CreateWorker(env, raw);
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

static Napi::Object WrapHost(Napi::Env env, VmWrap::Host* host, bool running) {
  Napi::Object obj = constructor_ref(env)->New({Napi::External<VmWrap::Host>::New(env, host)});
  host->self = Napi::Weak(obj);
  if (running && !host->exited) {
    host->self.Ref();  // the event function is still referenced, as it was made
  } else {
    host->tsfn.Unref(env);
  }
  return obj;
}

Napi::Value VmWrap::Restore(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 4 || !info[0].IsString() || !info[1].IsObject() || !info[2].IsFunction() ||
      !info[3].IsFunction())
    throw Napi::TypeError::New(env, "restoreVm(dir, options, onConsole, onExit) expects a string, an object and two functions");
  Napi::Object options = info[1].As<Napi::Object>();
  uint64_t console_limit = 0;
  if (!options.Get("consoleBufferBytes").IsUndefined())
    console_limit = static_cast<uint64_t>(IntProp(options, "consoleBufferBytes"));
  Resources resources = ResourcesOption(options, "restoreVm");
  VmWrap::Host* host = NewHost(env, info[2].As<Napi::Function>(), info[3].As<Napi::Function>());
  host->config.console_limit = console_limit;
  host->resources = std::move(resources);
  auto* worker = new CreateWorker(env, host, info[0].As<Napi::String>().Utf8Value());
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

namespace {

struct Progress {
  uint64_t done, total;
};

// checkpoint(dir): capture and freeze (the VM is held only for that), then write the snapshot with progress events.
class CheckpointWorker : public Napi::AsyncProgressWorker<Progress> {
 public:
  CheckpointWorker(const Napi::Object& wrapper, VmWrap::Host* host, std::string dir, Napi::Value on_progress,
                   Resources resources)
      : Napi::AsyncProgressWorker<Progress>(wrapper.Env(), "smol:checkpoint"),
        held_(wrapper, host),
        dir_(std::move(dir)),
        resources_(std::move(resources)),
        asked_at_(trace_now_ms()) {
    if (on_progress.IsFunction()) on_progress_ = Napi::Persistent(on_progress.As<Napi::Function>());
  }
  Napi::Promise Promise() { return held_.deferred.Promise(); }

  void Execute(const ExecutionProgress& progress) override {
    struct vm_error err = {};
    struct vm_snapshot* snap = nullptr;
    progress_ = &progress;
    std::vector<struct vm_device_resource> resources = resources_.View();
    struct vm_checkpoint_params params = {resources.data(), resources.size()};
    BeginTrace(&trace_, asked_at_);  // its steps: the checkpoint's, then the write's (docs/snapshots.md)
    if (vm_checkpoint(held_.host->vm, &params, &snap, &stats_, &err) < 0) {
      vm_trace_use(nullptr);
      Fail(err);
      return;
    }
    if (vm_snapshot_disk(snap)) disk_ = vm_snapshot_disk(snap);
    auto t1 = std::chrono::steady_clock::now();
    if (vm_snapshot_write(snap, dir_.c_str(), OnCProgress, this, &info_, &err) < 0) Fail(err);
    write_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
    vm_snapshot_put(snap);
    trace_step("release the checkpoint");
    vm_trace_use(nullptr);
  }
  void OnProgress(const Progress* data, size_t count) override {
    if (count == 0 || on_progress_.IsEmpty()) return;
    Napi::Object p = Napi::Object::New(Env());
    p.Set("phase", "memory");
    p.Set("done", static_cast<double>(data[count - 1].done));
    p.Set("total", static_cast<double>(data[count - 1].total));
    on_progress_.Call({p});
  }
  void OnOK() override {
    Napi::Env env = Env();
    Napi::Object r = Napi::Object::New(env);
    r.Set("id", info_.id);
    r.Set("dir", dir_);
    r.Set("kind", info_.full ? "full" : "diff");
    r.Set("parentDir", info_.parent_dir[0] ? Napi::Value(Napi::String::New(env, info_.parent_dir)) : env.Null());
    r.Set("pauseMs", stats_.pause_ms);
    r.Set("writeMs", write_ms_);
    r.Set("dirtyPages", static_cast<double>(stats_.dirty_pages));
    r.Set("pages", static_cast<double>(info_.pages));
    r.Set("bytesWritten", static_cast<double>(info_.bytes_written));
    r.Set("memoryBytes", static_cast<double>(info_.mem_size));
    r.Set("cpus", info_.nr_cpus);
    r.Set("disk", disk_.empty() ? env.Null() : Napi::Value(Napi::String::New(env, disk_)));
    r.Set("trace", TraceObject(env, trace_, nullptr));
    held_.Resolve(r);
  }
  void OnError(const Napi::Error& e) override { held_.Reject(WithVmCode(e, code_)); }

 private:
  void Fail(const struct vm_error& err) {
    code_ = err.code;
    SetError(err.msg);
  }
  int code_ = 0;
  static void OnCProgress(void* opaque, uint64_t done, uint64_t total) {
    auto* self = static_cast<CheckpointWorker*>(opaque);
    // At most about a hundred events per checkpoint.
    if (total && done != total && (done - self->last_sent_) * 100 < total) return;
    self->last_sent_ = done;
    Progress p = {done, total};
    self->progress_->Send(&p, 1);
  }
  HeldHost held_;
  std::string dir_, disk_;
  Resources resources_;
  Napi::FunctionReference on_progress_;
  const ExecutionProgress* progress_ = nullptr;
  uint64_t last_sent_ = 0;
  struct vm_checkpoint_stats stats_ = {};
  struct vm_snapshot_info info_ = {};
  double write_ms_ = 0;
  double asked_at_;
  struct vm_trace trace_ = {};
};

// Threads that make a fork's children: one per 8 children, at most one per online CPU and at most 8.
unsigned ForkThreads(size_t children) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  size_t n = children / 8;
  if (cpus > 0 && n > static_cast<size_t>(cpus)) n = static_cast<size_t>(cpus);
  if (n > 8) n = 8;
  return n < 1 ? 1 : static_cast<unsigned>(n);
}

// fork(n): one in-memory checkpoint of the parent, restored n times on several threads (ForkThreads); the children
// start before this resolves.
class ForkWorker : public Napi::AsyncWorker {
 public:
  ForkWorker(const Napi::Object& wrapper, VmWrap::Host* parent, std::vector<VmWrap::Host*> children,
             Resources resources)
      : Napi::AsyncWorker(wrapper.Env(), "smol:fork"),
        held_(wrapper, parent),
        children_(std::move(children)),
        resources_(std::move(resources)),
        asked_at_(trace_now_ms()) {}
  Napi::Promise Promise() { return held_.deferred.Promise(); }

  void Execute() override {
    struct vm_error err = {};
    struct vm_snapshot* snap = nullptr;
    std::vector<struct vm_device_resource> resources = resources_.View();
    struct vm_checkpoint_params params = {resources.data(), resources.size()};
    // Each child's trace: the checkpoint's steps, the time its thread took to start or made its elder siblings in,
    // then its own restore.
    auto base = std::make_unique<struct vm_trace>();
    BeginTrace(base.get(), asked_at_);
    if (vm_checkpoint(held_.host->vm, &params, &snap, &stats_, &err) < 0) {
      vm_trace_use(nullptr);
      code_ = err.code;
      SetError(std::string("cannot fork: ") + err.msg);
      return;
    }
    vm_pool_want(static_cast<unsigned>(children_.size()));  // prepared VMs for the whole batch (vm_pool.c)
    vm_trace_use(nullptr);
    // The children are made on several threads at once, each taking the next child not yet taken: each one's
    // restore is its own VM's ioctls and mappings, and only the parsed checkpoint (read-only) is shared.
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    std::mutex fail_lock;
    auto make_children = [&]() {
      struct vm_trace trace;
      struct vm_error child_err = {};
      for (bool first = true;; first = false) {  // a thread's first child: no step of its own
        size_t i = next.fetch_add(1);
        if (i >= children_.size() || failed.load()) break;
        VmWrap::Host* child = children_[i];
        struct vm_callbacks cb = {child, OnOutput, OnExit};
        std::vector<struct vm_device_resource> child_resources = child->resources.View();
        struct vm_restore_params child_params = {held_.host->config.console_limit, &cb, child_resources.data(),
                                                 child_resources.size()};
        trace = *base;
        vm_trace_use(&trace);
        if (!first) trace_step("fork: the children before this one");  // on this thread
        if (vm_restore(snap, &child_params, &child->vm, &child_err) < 0 || vm_start(child->vm, &child_err) < 0) {
          std::lock_guard<std::mutex> g(fail_lock);
          if (!failed.exchange(true)) {
            code_ = child_err.code;
            SetError("cannot fork child " + std::to_string(i + 1) + " of " + std::to_string(children_.size()) +
                     ": " + child_err.msg);
          }
          break;
        }
        trace_step("start the vCPU threads");
        vm_trace_keep(child->vm, &trace);
      }
      vm_trace_use(nullptr);
    };
    std::vector<std::thread> helpers;
    for (unsigned t = 1; t < ForkThreads(children_.size()); t++) {
      try {
        helpers.emplace_back(make_children);
      } catch (const std::system_error&) {
        break;  // no more threads: the ones there are make the rest
      }
    }
    make_children();
    for (std::thread& t : helpers) t.join();
    vm_snapshot_put(snap);
  }
  void OnOK() override {
    Napi::Env env = Env();
    Napi::Array out = Napi::Array::New(env, children_.size());
    for (size_t i = 0; i < children_.size(); i++) out.Set(static_cast<uint32_t>(i), WrapHost(env, children_[i], true));
    held_.Resolve(out);
  }
  void OnError(const Napi::Error& e) override {
    for (VmWrap::Host* child : children_) {
      if (child->vm) {
        child->on_exit.Reset();  // a child that never reached JavaScript reports nothing
        vm_destroy(child->vm);
        child->vm = nullptr;
      }
      child->ReleaseFromWrapper();
    }
    held_.Reject(WithVmCode(e, code_));
  }

 private:
  int code_ = 0;
  HeldHost held_;
  std::vector<VmWrap::Host*> children_;
  Resources resources_;
  struct vm_checkpoint_stats stats_ = {};
  double asked_at_;
};

class MemoryStatsWorker : public Napi::AsyncWorker {
 public:
  MemoryStatsWorker(const Napi::Object& wrapper, VmWrap::Host* host)
      : Napi::AsyncWorker(wrapper.Env(), "smol:memoryStats"), held_(wrapper, host) {}
  Napi::Promise Promise() { return held_.deferred.Promise(); }
  void Execute() override {
    struct vm_error err = {};
    if (vm_memory_stats(held_.host->vm, &stats_, &err) < 0) {
      code_ = err.code;
      SetError(err.msg);
    }
  }
  void OnOK() override {
    Napi::Object r = Napi::Object::New(Env());
    r.Set("guestBytes", static_cast<double>(stats_.guest_bytes));
    r.Set("residentBytes", static_cast<double>(stats_.resident_bytes));
    r.Set("privateBytes", static_cast<double>(stats_.private_bytes));
    r.Set("sharedBytes", static_cast<double>(stats_.shared_bytes));
    held_.Resolve(r);
  }
  void OnError(const Napi::Error& e) override { held_.Reject(WithVmCode(e, code_)); }

 private:
  int code_ = 0;
  HeldHost held_;
  struct vm_memory_stats stats_ = {};
};

}  // namespace

Napi::Value VmWrap::Checkpoint(const Napi::CallbackInfo& info) {
  LiveVm(info, host_, "checkpoint");
  if (info.Length() < 1 || !info[0].IsString())
    throw Napi::TypeError::New(info.Env(), "checkpoint(dir, onProgress?) expects a directory path");
  if (info.Length() > 1 && !info[1].IsUndefined() && !info[1].IsFunction())
    throw Napi::TypeError::New(info.Env(), "checkpoint(dir, onProgress?, options?): onProgress must be a function");
  Resources resources = ResourcesOption(info.Length() > 2 ? info[2] : info.Env().Undefined(), "checkpoint");
  auto* worker = new CheckpointWorker(info.This().As<Napi::Object>(), host_, info[0].As<Napi::String>().Utf8Value(),
                                      info.Length() > 1 ? info[1] : info.Env().Undefined(), std::move(resources));
  Napi::Promise p = worker->Promise();
  worker->Queue();
  return p;
}

Napi::Value VmWrap::Fork(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  LiveVm(info, host_, "fork");
  if (info.Length() < 1 || !info[0].IsArray())
    throw Napi::TypeError::New(env, "fork(children) expects an array of {onConsole, onExit}");
  Napi::Array list = info[0].As<Napi::Array>();
  if (list.Length() < 1 || list.Length() > 1024)
    throw Napi::RangeError::New(env, "fork: between 1 and 1024 children (got " + std::to_string(list.Length()) + ")");
  for (uint32_t i = 0; i < list.Length(); i++) {
    Napi::Value v = list.Get(i);
    if (!v.IsObject() || !v.As<Napi::Object>().Get("onConsole").IsFunction() ||
        !v.As<Napi::Object>().Get("onExit").IsFunction())
      throw Napi::TypeError::New(env, "fork: child " + std::to_string(i + 1) + " needs onConsole and onExit functions");
  }
  Resources resources = ResourcesOption(info.Length() > 1 ? info[1] : env.Undefined(), "fork");
  std::vector<Resources> child_resources;
  for (uint32_t i = 0; i < list.Length(); i++)
    child_resources.push_back(ResourcesOption(list.Get(i), "fork: child " + std::to_string(i + 1)));
  std::vector<VmWrap::Host*> children;
  for (uint32_t i = 0; i < list.Length(); i++) {
    Napi::Object o = list.Get(i).As<Napi::Object>();
    children.push_back(NewHost(env, o.Get("onConsole").As<Napi::Function>(), o.Get("onExit").As<Napi::Function>()));
    children.back()->resources = std::move(child_resources[i]);
  }
  auto* worker = new ForkWorker(info.This().As<Napi::Object>(), host_, std::move(children), std::move(resources));
  Napi::Promise p = worker->Promise();
  worker->Queue();
  return p;
}

// trace(): where the time of the operation that made this VM went (docs/snapshots.md, "Where the time goes"), also
// after its exit.
Napi::Value VmWrap::Trace(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto trace = std::make_unique<struct vm_trace>();
  struct vm_trace_times times;
  if (host_->final_trace) {
    *trace = *host_->final_trace;
    times = host_->final_times;
  } else if (host_->vm) {
    vm_trace_get(host_->vm, trace.get(), &times);
  } else {
    throw VmError(env, "cannot read its trace: the VM is gone", ESRCH);
  }
  return TraceObject(env, *trace, &times);
}

Napi::Value VmWrap::MemoryStats(const Napi::CallbackInfo& info) {
  LiveVm(info, host_, "read memory statistics");
  auto* worker = new MemoryStatsWorker(info.This().As<Napi::Object>(), host_);
  Napi::Promise p = worker->Promise();
  worker->Queue();
  return p;
}

Napi::Value VmWrap::CpuTimeNs(const Napi::CallbackInfo& info) {
  struct vm* vm = LiveVm(info, host_, "read CPU time");
  struct vm_error err = {};
  uint64_t ns = 0;
  if (vm_cpu_time_ns(vm, &ns, &err) < 0) throw VmError(info.Env(), err);
  return Napi::Number::New(info.Env(), static_cast<double>(ns));
}

// network(after): the VM's forwards as bound, its refusal counters and the refusal events newer than `after`
// (docs/network.md, "Seen from the host"); null when the VM has no network device.
Napi::Value VmWrap::Network(const Napi::CallbackInfo& info) {
  struct vm* vm = LiveVm(info, host_, "read its network");
  Napi::Env env = info.Env();
  double after = info.Length() > 0 && info[0].IsNumber() ? info[0].As<Napi::Number>().DoubleValue() : 0;
  struct vm_error err = {};
  auto net = std::make_unique<struct vm_network>();
  if (vm_network(vm, after > 0 ? static_cast<uint64_t>(after) : 0, net.get(), &err) < 0) {
    if (err.code == ENODEV) return env.Null();
    throw VmError(env, err);
  }
  Napi::Object out = Napi::Object::New(env);
  Napi::Array forwards = Napi::Array::New(env, net->nr_forwards);
  for (unsigned i = 0; i < net->nr_forwards; i++) {
    Napi::Object f = Napi::Object::New(env);
    f.Set("host", net->forwards[i].host_port);
    f.Set("guest", net->forwards[i].guest_port);
    forwards.Set(i, f);
  }
  out.Set("forwards", forwards);
  Napi::Object refused = Napi::Object::New(env);
  for (int r = 0; r < NET_RULE_COUNT; r++)
    refused.Set(net_rule_name(static_cast<enum net_rule>(r)), static_cast<double>(net->stats.refused[r]));
  out.Set("refused", refused);
  Napi::Array events = Napi::Array::New(env, net->nr_events);
  for (unsigned i = 0; i < net->nr_events; i++) {
    const struct net_event& e = net->events[i];
    char dst[64];
    net_addr_format(&e.dst, dst, sizeof(dst));
    Napi::Object o = Napi::Object::New(env);
    o.Set("seq", static_cast<double>(e.seq));
    o.Set("destination", dst);
    o.Set("port", e.port);
    o.Set("protocol", e.proto == 6 ? "tcp" : e.proto == 17 ? "udp" : e.proto == 1 || e.proto == 58 ? "icmp"
                                                                                                     : "other");
    o.Set("rule", net_rule_name(static_cast<enum net_rule>(e.rule)));
    if (e.name[0]) o.Set("name", e.name);
    events.Set(i, o);
  }
  out.Set("events", events);
  Napi::Object frames = Napi::Object::New(env);
  frames.Set("sent", static_cast<double>(net->stats.tx_frames));
  frames.Set("received", static_cast<double>(net->stats.rx_frames));
  frames.Set("refused", static_cast<double>(net->stats.tx_refused));
  frames.Set("dropped", static_cast<double>(net->stats.rx_dropped));
  frames.Set("connectionsRefused", static_cast<double>(net->stats.conns_refused));
  out.Set("frames", frames);
  out.Set("sockets", net->stats.sockets);
  return out;
}

Napi::Function VmWrap::Define(Napi::Env env) {
  return DefineClass(env, "NativeVm",
                     {InstanceMethod<&VmWrap::Start>("start"), InstanceMethod<&VmWrap::Pause>("pause"),
                      InstanceMethod<&VmWrap::Resume>("resume"), InstanceMethod<&VmWrap::Kill>("kill"),
                      InstanceMethod<&VmWrap::WriteConsole>("writeConsole"),
                      InstanceMethod<&VmWrap::HoldConsole>("holdConsole"),
                      InstanceMethod<&VmWrap::Checkpoint>("checkpoint"), InstanceMethod<&VmWrap::Fork>("fork"),
                      InstanceMethod<&VmWrap::MemoryStats>("memoryStats"),
                      InstanceMethod<&VmWrap::Trace>("trace"),
                      InstanceMethod<&VmWrap::CpuTimeNs>("cpuTimeNs"),
                      InstanceMethod<&VmWrap::Network>("network"),
                      InstanceAccessor<&VmWrap::State>("state")});
}

VmWrap::VmWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<VmWrap>(info) {
  if (info.Length() != 1 || !info[0].IsExternal())
    throw Napi::TypeError::New(info.Env(), "NativeVm cannot be constructed directly; use createVm()");
  host_ = info[0].As<Napi::External<Host>>().Data();
}

VmWrap::~VmWrap() {
  if (!host_) return;
  if (host_->vm) {
    vm_destroy(host_->vm);  // a VM that never ran (or whose exit was never delivered) is dropped with its wrapper
    host_->vm = nullptr;
  }
  host_->ReleaseFromWrapper();
}

static struct vm* LiveVm(const Napi::CallbackInfo& info, VmWrap::Host* host, const char* what) {
  if (!host->vm || host->exited || vm_get_state(host->vm) == VM_EXITED)
    throw VmError(info.Env(), std::string("cannot ") + what + ": the VM has exited", ESRCH);
  return host->vm;
}

Napi::Value VmWrap::Start(const Napi::CallbackInfo& info) {
  struct vm_error err = {};
  if (vm_start(LiveVm(info, host_, "start"), &err) < 0) throw VmError(info.Env(), err);
  host_->tsfn.Ref(info.Env());  // a running VM keeps Node alive until it exits
  host_->self.Ref();            // and is not collected under its threads
  return info.Env().Undefined();
}

Napi::Value VmWrap::Pause(const Napi::CallbackInfo& info) {
  LiveVm(info, host_, "pause");
  auto* worker = new OpWorker(info.This().As<Napi::Object>(), host_, vm_pause, "smol:pause");
  Napi::Promise p = worker->Promise();
  worker->Queue();
  return p;
}

Napi::Value VmWrap::Resume(const Napi::CallbackInfo& info) {
  struct vm_error err = {};
  if (vm_resume(LiveVm(info, host_, "resume"), &err) < 0) throw VmError(info.Env(), err);
  return info.Env().Undefined();
}

Napi::Value VmWrap::Kill(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!host_->vm || host_->exited) {
    auto d = Napi::Promise::Deferred::New(env);
    d.Resolve(env.Undefined());
    return d.Promise();
  }
  auto* worker = new OpWorker(info.This().As<Napi::Object>(), host_, KillOp, "smol:kill");
  Napi::Promise p = worker->Promise();
  worker->Queue();
  return p;
}

Napi::Value VmWrap::WriteConsole(const Napi::CallbackInfo& info) {
  struct vm* vm = LiveVm(info, host_, "write to the console");
  if (info.Length() < 1 || !info[0].IsBuffer())
    throw Napi::TypeError::New(info.Env(), "writeConsole(data) expects a Buffer");
  auto data = info[0].As<Napi::Buffer<uint8_t>>();
  return Napi::Number::New(info.Env(), static_cast<double>(vm_console_write(vm, data.Data(), data.Length())));
}

void VmWrap::HoldConsole(const Napi::CallbackInfo& info) {
  if (info.Length() < 1 || !info[0].IsBoolean())
    throw Napi::TypeError::New(info.Env(), "holdConsole(held) expects a boolean");
  bool held = info[0].As<Napi::Boolean>().Value();
  bool was = host_->console_held;
  host_->console_held = held;
  if (was && !held && host_->vm && !host_->exited) NotifyJs(host_, Event::kOutput);
}

Napi::Value VmWrap::State(const Napi::CallbackInfo& info) {
  if (!host_->vm || host_->exited) return Napi::String::New(info.Env(), "exited");
  return Napi::String::New(info.Env(), vm_state_name(vm_get_state(host_->vm)));
}

Napi::FunctionReference* VmWrapConstructor(Napi::Env env, Napi::Function ctor) {
  auto* ref = new Napi::FunctionReference(Napi::Persistent(ctor));
  env.SetInstanceData(ref);
  return ref;
}
