// The smol native module: kvmProbe(), createVm(), restoreVm(), the disk layer calls and snapshotInfo(). See
// docs/vmm.md.
#include <napi.h>

#include <cerrno>

#include "disk_wrap.h"
#include "zstd_wrap.h"
#include "vm_error_js.h"
#include "vm_wrap.h"

extern "C" {
#include "jail.h"
#include "kvm_probe.h"
#include "vm.h"
}

#include <cstdio>
#include <string>
#include <vector>

Napi::FunctionReference* VmWrapConstructor(Napi::Env env, Napi::Function ctor);

static Napi::Value KvmProbe(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  struct kvm_probe p;
  kvm_probe(&p);
  Napi::Object out = Napi::Object::New(env);
  out.Set("present", p.present != 0);
  out.Set("usable", p.usable != 0);
  out.Set("implementation", p.implementation);
  if (p.api_version > 0) out.Set("apiVersion", p.api_version);
  if (p.error[0]) out.Set("error", p.error);
  Napi::Object caps = Napi::Object::New(env);
  Napi::Array required = Napi::Array::New(env);
  for (int i = 0; i < p.nr_caps; i++) {
    caps.Set(p.caps[i].name, p.caps[i].present != 0);
    if (p.caps[i].required) required.Set(required.Length(), p.caps[i].name);
  }
  out.Set("capabilities", caps);
  out.Set("required", required);
  return out;
}

// jailLockdown({ reportFd?, nofile?, root? }): the vmhost's jail (docs/security.md); throws with the reason it
// failed. root: { binds: [{ path, write?, device? }], hostMntNs } makes the root hold only those paths.
static Napi::Value JailLockdown(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  struct jail_options o = {-1, 0, nullptr, 0, nullptr};
  std::vector<std::string> paths;
  std::vector<struct jail_bind> binds;
  std::string hostMnt;
  if (info.Length() > 0 && info[0].IsObject()) {
    Napi::Object opts = info[0].As<Napi::Object>();
    Napi::Value root = opts.Get("root");
    if (!root.IsUndefined()) {
      Napi::Value list = root.IsObject() ? root.As<Napi::Object>().Get("binds") : env.Undefined();
      Napi::Value ns = root.IsObject() ? root.As<Napi::Object>().Get("hostMntNs") : env.Undefined();
      if (!list.IsArray() || !ns.IsString()) {
        Napi::TypeError::New(env, "jailLockdown: root must be { binds: [...], hostMntNs: string }")
            .ThrowAsJavaScriptException();
        return env.Undefined();
      }
      Napi::Array arr = list.As<Napi::Array>();
      paths.reserve(arr.Length());
      for (uint32_t i = 0; i < arr.Length(); i++) {
        Napi::Value item = arr.Get(i);
        Napi::Value path = item.IsObject() ? item.As<Napi::Object>().Get("path") : env.Undefined();
        if (!path.IsString()) {
          Napi::TypeError::New(env, "jailLockdown: root.binds[" + std::to_string(i) + "].path must be a string")
              .ThrowAsJavaScriptException();
          return env.Undefined();
        }
        Napi::Object b = item.As<Napi::Object>();
        paths.push_back(path.As<Napi::String>().Utf8Value());
        binds.push_back({nullptr, b.Get("write").ToBoolean().Value() ? 1 : 0,
                         b.Get("device").ToBoolean().Value() ? 1 : 0});
      }
      for (size_t i = 0; i < binds.size(); i++) binds[i].path = paths[i].c_str();
      hostMnt = ns.As<Napi::String>().Utf8Value();
      o.binds = binds.data();
      o.nbinds = static_cast<int>(binds.size());
      o.host_mnt_ns = hostMnt.c_str();
    }
    Napi::Value fd = opts.Get("reportFd");
    if (!fd.IsUndefined()) {
      if (!fd.IsNumber() || fd.As<Napi::Number>().Int32Value() < 0) {
        Napi::TypeError::New(env, "jailLockdown: reportFd must be a file descriptor").ThrowAsJavaScriptException();
        return env.Undefined();
      }
      o.report_fd = fd.As<Napi::Number>().Int32Value();
    }
    Napi::Value nofile = opts.Get("nofile");
    if (!nofile.IsUndefined()) {
      if (!nofile.IsNumber() || nofile.As<Napi::Number>().Int64Value() < 64) {
        Napi::TypeError::New(env, "jailLockdown: nofile must be a number of at least 64").ThrowAsJavaScriptException();
        return env.Undefined();
      }
      o.nofile = nofile.As<Napi::Number>().Uint32Value();
    }
  }
  struct jail_status st = {};
  struct vm_error err = {};
  if (jail_lockdown(&o, &st, &err) < 0) {
    Napi::Error e = Napi::Error::New(env, err.msg);
    e.Set("code", Napi::String::New(env, err.code == EBUSY ? "EBUSY" : "EJAIL"));
    e.Set("errno", Napi::Number::New(env, err.code));
    e.ThrowAsJavaScriptException();
    return env.Undefined();
  }
  char caps[24];
  snprintf(caps, sizeof(caps), "%016llx", st.cap_eff);
  Napi::Object out = Napi::Object::New(env);
  out.Set("seccomp", st.seccomp != 0);
  out.Set("noNewPrivs", st.no_new_privs != 0);
  out.Set("capEff", caps);
  out.Set("nofile", st.nofile);
  out.Set("mounts", st.mounts != 0);
  out.Set("binds", st.binds);
  return out;
}

// A test hook (the vmhost offers it only with SMOL_TEST_HOOKS=1): a call no allow-list has, or with "ioctl" an ioctl
// request none has.
static Napi::Value JailTestForbidden(const Napi::CallbackInfo& info) {
  jail_test_forbidden(info.Length() > 0 && info[0].IsString() && info[0].As<Napi::String>().Utf8Value() == "ioctl");
  return info.Env().Undefined();
}

// vmPool(options?): the prepared VMs (docs/snapshots.md, "Prepared VMs"); { max } sets how many at most (0: none).
// vmPool({ drain: true }) closes every prepared one and stops its thread. Returns the pool's counters.
static Napi::Value VmPool(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() > 0 && !info[0].IsUndefined()) {
    if (!info[0].IsObject()) throw Napi::TypeError::New(env, "vmPool(options): options must be an object");
    Napi::Object o = info[0].As<Napi::Object>();
    Napi::Value max = o.Get("max");
    if (!max.IsUndefined()) {
      double d = max.IsNumber() ? max.As<Napi::Number>().DoubleValue() : -1;
      if (!(d >= 0 && d <= VM_POOL_LIMIT) || d != static_cast<double>(static_cast<unsigned>(d)))
        throw Napi::RangeError::New(env, "vmPool: max must be a whole number from 0 to " +
                                             std::to_string(VM_POOL_LIMIT));
      struct vm_error err = {};
      if (vm_pool_set_max(static_cast<unsigned>(d), &err) < 0) throw VmError(env, err);
    }
    if (o.Get("drain").ToBoolean().Value()) vm_pool_drain();
  }
  struct vm_pool_stats st;
  vm_pool_get_stats(&st);
  Napi::Object out = Napi::Object::New(env);
  out.Set("max", st.max);
  out.Set("target", st.target);
  out.Set("ready", st.ready);
  out.Set("taken", static_cast<double>(st.taken));
  out.Set("missed", static_cast<double>(st.missed));
  out.Set("made", static_cast<double>(st.made));
  out.Set("closed", static_cast<double>(st.closed));
  out.Set("failed", static_cast<double>(st.failed));
  out.Set("reaped", static_cast<double>(st.reaped));
  out.Set("reaping", st.reaping);
  out.Set("thread", st.thread != 0);
  return out;
}

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  // Prepared VMs and their thread go before the module's code does (a worker thread's environment, or the exit).
  napi_add_env_cleanup_hook(env, [](void*) { vm_pool_drain(); }, nullptr);
  Napi::Function ctor = VmWrap::Define(env);
  VmWrapConstructor(env, ctor);
  exports.Set("NativeVm", ctor);
  exports.Set("createVm", Napi::Function::New<VmWrap::Create>(env, "createVm"));
  exports.Set("restoreVm", Napi::Function::New<VmWrap::Restore>(env, "restoreVm"));
  exports.Set("kvmProbe", Napi::Function::New<KvmProbe>(env, "kvmProbe"));
  exports.Set("createDiskLayer", Napi::Function::New<CreateDiskLayer>(env, "createDiskLayer"));
  exports.Set("diskInfo", Napi::Function::New<DiskInfo>(env, "diskInfo"));
  exports.Set("flattenDiskLayer", Napi::Function::New<FlattenDiskLayer>(env, "flattenDiskLayer"));
  exports.Set("exportDisk", Napi::Function::New<ExportDisk>(env, "exportDisk"));
  exports.Set("dataExtents", Napi::Function::New<DataExtents>(env, "dataExtents"));
  exports.Set("zstdDecompress", Napi::Function::New<ZstdDecompress>(env, "zstdDecompress"));
  exports.Set("zstdCompress", Napi::Function::New<ZstdCompress>(env, "zstdCompress"));
  exports.Set("zstdStreamNew", Napi::Function::New<ZstdStreamNew>(env, "zstdStreamNew"));
  exports.Set("zstdStreamDecode", Napi::Function::New<ZstdStreamDecode>(env, "zstdStreamDecode"));
  exports.Set("snapshotInfo", Napi::Function::New<SnapshotInfo>(env, "snapshotInfo"));
  exports.Set("jailLockdown", Napi::Function::New<JailLockdown>(env, "jailLockdown"));
  exports.Set("jailTestForbidden", Napi::Function::New<JailTestForbidden>(env, "jailTestForbidden"));
  exports.Set("vmPool", Napi::Function::New<VmPool>(env, "vmPool"));
  return exports;
}

NODE_API_MODULE(smol, Init)
