// The smol native module: kvmProbe(), createVm(), restoreVm(), the disk layer calls and snapshotInfo(). See
// docs/vmm.md.
#include <napi.h>

#include "disk_wrap.h"
#include "vm_wrap.h"

extern "C" {
#include "kvm_probe.h"
}

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

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  Napi::Function ctor = VmWrap::Define(env);
  VmWrapConstructor(env, ctor);
  exports.Set("NativeVm", ctor);
  exports.Set("createVm", Napi::Function::New<VmWrap::Create>(env, "createVm"));
  exports.Set("restoreVm", Napi::Function::New<VmWrap::Restore>(env, "restoreVm"));
  exports.Set("kvmProbe", Napi::Function::New<KvmProbe>(env, "kvmProbe"));
  exports.Set("createDiskLayer", Napi::Function::New<CreateDiskLayer>(env, "createDiskLayer"));
  exports.Set("diskInfo", Napi::Function::New<DiskInfo>(env, "diskInfo"));
  exports.Set("flattenDiskLayer", Napi::Function::New<FlattenDiskLayer>(env, "flattenDiskLayer"));
  exports.Set("snapshotInfo", Napi::Function::New<SnapshotInfo>(env, "snapshotInfo"));
  return exports;
}

NODE_API_MODULE(smol, Init)
