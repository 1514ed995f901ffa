// zstdDecompress(data, size) -> Promise<Buffer>: at most `size` bytes ("more than N" past it; "zstd failed: ..." on
// damage). zstdCompress(data, level) -> Promise<Buffer>: one frame with its size and checksum. docs/smolmachine.md.
// zstdStreamNew() -> stream; zstdStreamDecode(stream, data, max) -> Promise<{out, consumed, ended}>: a stream a piece
// at a time, at most `max` bytes out per call (OCI layers, docs/images.md).
#pragma once

#include <napi.h>

Napi::Value ZstdDecompress(const Napi::CallbackInfo& info);
Napi::Value ZstdCompress(const Napi::CallbackInfo& info);
Napi::Value ZstdStreamNew(const Napi::CallbackInfo& info);
Napi::Value ZstdStreamDecode(const Napi::CallbackInfo& info);
