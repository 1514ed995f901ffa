// VMM errors as JavaScript sees them (docs/vmm.md, "Errors"): an Error with the VMM's message, `code` the name of
// its errno value ('EBUSY') and `errno` the number (16), as Node's own system errors carry them.
#pragma once

#include <napi.h>

#include <string.h>

extern "C" {
#include "error.h"
}

// Adds the code to an Error made from a VMM message (an AsyncWorker's SetError(msg) arrives in OnError as one).
inline Napi::Value WithVmCode(const Napi::Error& e, int code) {
  Napi::Object o = e.Value();
  if (code > 0) {
    const char* name = strerrorname_np(code);
    if (name) o.Set("code", name);
    o.Set("errno", code);
  }
  return o;
}

inline Napi::Error VmError(Napi::Env env, const std::string& message, int code) {
  Napi::Error e = Napi::Error::New(env, message);
  WithVmCode(e, code);
  return e;
}

inline Napi::Error VmError(Napi::Env env, const struct vm_error& err) { return VmError(env, err.msg, err.code); }
