#include "vm_wrap.h"

#include <cmath>
#include <optional>
#include <vector>

namespace {

enum class Event { kOutput, kExit };

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
  struct vm_config config = {};
  int ops_in_flight = 0;       // pause/kill workers that still use `vm`
  bool exited = false;
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

namespace {

class CreateWorker : public Napi::AsyncWorker {
 public:
  CreateWorker(Napi::Env env, VmWrap::Host* host)
      : Napi::AsyncWorker(env, "smol:createVm"), host_(host), deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    struct vm_callbacks cb = {host_, OnOutput, OnExit};
    struct vm_error err = {};
    if (vm_create(&host_->config, &cb, &host_->vm, &err) < 0) SetError(err.msg);
  }
  void OnOK() override {
    Napi::Env env = Env();
    Napi::Object obj = constructor_ref(env)->New({Napi::External<VmWrap::Host>::New(env, host_)});
    // Until start(), neither the wrapper nor the event function keeps anything alive: a VM that is dropped before
    // it runs is collected and destroyed. start() takes both references; the exit gives them back.
    host_->self = Napi::Weak(obj);
    host_->tsfn.Unref(env);
    deferred_.Resolve(obj);
  }
  void OnError(const Napi::Error& e) override {
    host_->ReleaseFromWrapper();  // no wrapper will ever exist
    deferred_.Reject(e.Value());
  }

 private:
  VmWrap::Host* host_;
  Napi::Promise::Deferred deferred_;
};

// Runs a blocking VM operation (pause, kill) off the JavaScript thread.
class OpWorker : public Napi::AsyncWorker {
 public:
  using Op = int (*)(struct vm*, struct vm_error*);
  // The worker holds the VM's wrapper, so it cannot be collected (and free `host`) while `op` runs.
  OpWorker(const Napi::Object& wrapper, VmWrap::Host* host, Op op, const char* name)
      : Napi::AsyncWorker(wrapper.Env(), name),
        host_(host),
        op_(op),
        deferred_(Napi::Promise::Deferred::New(wrapper.Env())),
        wrapper_(Napi::Persistent(wrapper)) {
    host_->ops_in_flight++;
  }
  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    struct vm_error err = {};
    if (op_(host_->vm, &err) < 0) SetError(err.msg);
  }
  void OnOK() override {
    Finish();
    deferred_.Resolve(Env().Undefined());
  }
  void OnError(const Napi::Error& e) override {
    Finish();
    deferred_.Reject(e.Value());
  }

 private:
  void Finish() {
    host_->ops_in_flight--;
    host_->DestroyWhenIdle();
  }
  VmWrap::Host* host_;
  Op op_;
  Napi::Promise::Deferred deferred_;
  Napi::ObjectReference wrapper_;
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
  auto host = std::make_unique<Host>();
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
  Napi::Value console_buffer = config.Get("consoleBufferBytes");
  if (!console_buffer.IsUndefined()) host->config.console_limit = static_cast<uint64_t>(IntProp(config, "consoleBufferBytes"));
  host->on_console = Napi::Persistent(info[1].As<Napi::Function>());
  host->on_exit = Napi::Persistent(info[2].As<Napi::Function>());
  VmWrap::Host* raw = host.get();
  host->tsfn = Napi::ThreadSafeFunction::New(env, info[1].As<Napi::Function>(), "smol:vm-events", 0, 1,
                                             [raw](Napi::Env) {
                                               raw->tsfn_finalized = true;
                                               if (raw->wrapper_gone) delete raw;
                                             });
  auto* worker = new CreateWorker(env, host.release());
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

Napi::Function VmWrap::Define(Napi::Env env) {
  return DefineClass(env, "NativeVm",
                     {InstanceMethod<&VmWrap::Start>("start"), InstanceMethod<&VmWrap::Pause>("pause"),
                      InstanceMethod<&VmWrap::Resume>("resume"), InstanceMethod<&VmWrap::Kill>("kill"),
                      InstanceMethod<&VmWrap::WriteConsole>("writeConsole"),
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
    throw Napi::Error::New(info.Env(), std::string("cannot ") + what + ": the VM has exited");
  return host->vm;
}

Napi::Value VmWrap::Start(const Napi::CallbackInfo& info) {
  struct vm_error err = {};
  if (vm_start(LiveVm(info, host_, "start"), &err) < 0) throw Napi::Error::New(info.Env(), err.msg);
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
  if (vm_resume(LiveVm(info, host_, "resume"), &err) < 0) throw Napi::Error::New(info.Env(), err.msg);
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

Napi::Value VmWrap::State(const Napi::CallbackInfo& info) {
  if (!host_->vm || host_->exited) return Napi::String::New(info.Env(), "exited");
  return Napi::String::New(info.Env(), vm_state_name(vm_get_state(host_->vm)));
}

Napi::FunctionReference* VmWrapConstructor(Napi::Env env, Napi::Function ctor) {
  auto* ref = new Napi::FunctionReference(Napi::Persistent(ctor));
  env.SetInstanceData(ref);
  return ref;
}
