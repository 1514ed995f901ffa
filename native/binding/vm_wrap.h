// The JavaScript face of one VM: a Napi::ObjectWrap over struct vm, with console output and the exit delivered
// to JavaScript through one thread-safe function.
#pragma once

#include <napi.h>

#include <string>

extern "C" {
#include "vm.h"
}

class VmWrap : public Napi::ObjectWrap<VmWrap> {
 public:
  static Napi::Function Define(Napi::Env env);
  static Napi::Value Create(const Napi::CallbackInfo& info);  // createVm(config, onConsole, onExit) -> Promise
  // restoreVm(dir, options, onConsole, onExit) -> Promise<NativeVm> (created, not started)
  static Napi::Value Restore(const Napi::CallbackInfo& info);
  explicit VmWrap(const Napi::CallbackInfo& info);
  ~VmWrap() override;

  struct Host;

 private:
  Napi::Value Start(const Napi::CallbackInfo& info);
  Napi::Value Pause(const Napi::CallbackInfo& info);
  Napi::Value Resume(const Napi::CallbackInfo& info);
  Napi::Value Kill(const Napi::CallbackInfo& info);
  Napi::Value WriteConsole(const Napi::CallbackInfo& info);
  void HoldConsole(const Napi::CallbackInfo& info);
  Napi::Value State(const Napi::CallbackInfo& info);
  Napi::Value Checkpoint(const Napi::CallbackInfo& info);   // checkpoint(dir, onProgress?) -> Promise<info>
  Napi::Value Fork(const Napi::CallbackInfo& info);         // fork([{onConsole, onExit}, ...]) -> Promise<NativeVm[]>
  Napi::Value MemoryStats(const Napi::CallbackInfo& info);  // memoryStats() -> Promise<stats>
  Napi::Value Trace(const Napi::CallbackInfo& info);        // trace() -> the steps of the operation that made it
  Napi::Value CpuTimeNs(const Napi::CallbackInfo& info);
  Napi::Value Network(const Napi::CallbackInfo& info);      // network(after) -> forwards, refusals, counters    // cpuTimeNs() -> number (vCPU threads' CPU time)

  Host* host_ = nullptr;
};
