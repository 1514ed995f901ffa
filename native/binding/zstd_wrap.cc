// zstd for .smolmachine chunks (docs/smolmachine.md, "Compression"), with Debian's libzstd, off the JavaScript
// thread: packing compressed each chunk in a zstd process of its own and opening decompressed them in WebAssembly on
// the JavaScript thread, 2.75 ms a MiB for a guest's mostly-zero pages (a 128 MiB guest's open spent a third of a
// second there). Here a chunk is a call on libuv's thread pool, so two decompress at once on two cores.
#include "zstd_wrap.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include <zstd.h>
#include <zstd_errors.h>

namespace {

/** The highest level the zstd program takes without --ultra. */
constexpr int kMaxLevel = 19;

class ZstdWorker : public Napi::AsyncWorker {
 public:
  ZstdWorker(Napi::Env env, const char* name, Napi::Buffer<uint8_t> input)
      : Napi::AsyncWorker(env, name),
        input_ref_(Napi::Persistent(input)),
        in_(input.Data()),
        in_len_(input.Length()),
        deferred_(Napi::Promise::Deferred::New(env)) {}
  ~ZstdWorker() override { std::free(out_); }
  Napi::Promise Promise() { return deferred_.Promise(); }
  void OnOK() override {
    // The Buffer takes the allocation; the worker must not free it.
    uint8_t* out = out_;
    out_ = nullptr;
    deferred_.Resolve(Napi::Buffer<uint8_t>::New(Env(), out, out_len_, [](Napi::Env, uint8_t* p) { std::free(p); }));
  }
  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 protected:
  Napi::Reference<Napi::Buffer<uint8_t>> input_ref_;  // the input stays alive while the pool reads it
  const uint8_t* in_;
  size_t in_len_;
  uint8_t* out_ = nullptr;
  size_t out_len_ = 0;
  Napi::Promise::Deferred deferred_;
};

// zstdDecompress(data, size[, into]): the frames in `data` decompressed into at most `size` bytes. More than `size`
// is refused ("more than N") as soon as the output passes it, so a frame that inflates without end costs nothing
// beyond size + 1 bytes; fewer come back as they are, for the caller to refuse. With `into` (at least size + 1 bytes)
// the bytes go there and the promise gives their count: a caller that reuses its buffers pays for fresh memory's
// page faults once, not per chunk (on this project's PVM machine they cost more than the decompression).
class DecompressWorker : public ZstdWorker {
 public:
  DecompressWorker(Napi::Env env, Napi::Buffer<uint8_t> input, size_t size, Napi::Buffer<uint8_t>* into)
      : ZstdWorker(env, "smol:zstdDecompress", input), size_(size) {
    if (into) {
      into_ref_ = Napi::Persistent(*into);
      into_ = into->Data();
    }
  }
  void Execute() override {
    size_t capacity = size_ + 1;  // one byte more than allowed: filling it is the "more" case
    uint8_t* dst = into_;
    if (!dst) {
      out_ = static_cast<uint8_t*>(std::malloc(capacity));
      if (!out_) return SetError("out of memory for " + std::to_string(capacity) + " bytes");
      dst = out_;
    }
    size_t n = ZSTD_decompress(dst, capacity, in_, in_len_);
    if (ZSTD_isError(n)) {
      if (ZSTD_getErrorCode(n) == ZSTD_error_dstSize_tooSmall) return SetError("more than " + std::to_string(size_));
      return SetError(std::string("zstd failed: ") + ZSTD_getErrorName(n));
    }
    if (n > size_) return SetError("more than " + std::to_string(size_));
    out_len_ = n;
  }
  void OnOK() override {
    if (into_) deferred_.Resolve(Napi::Number::New(Env(), static_cast<double>(out_len_)));
    else ZstdWorker::OnOK();
  }

 private:
  size_t size_;
  Napi::Reference<Napi::Buffer<uint8_t>> into_ref_;
  uint8_t* into_ = nullptr;
};

// zstdCompress(data, level): one frame with its content size and a checksum, as the zstd program writes.
class CompressWorker : public ZstdWorker {
 public:
  CompressWorker(Napi::Env env, Napi::Buffer<uint8_t> input, int level)
      : ZstdWorker(env, "smol:zstdCompress", input), level_(level) {}
  void Execute() override {
    size_t capacity = ZSTD_compressBound(in_len_);
    out_ = static_cast<uint8_t*>(std::malloc(capacity ? capacity : 1));
    ZSTD_CCtx* cctx = ZSTD_createCCtx();
    if (!out_ || !cctx) {
      ZSTD_freeCCtx(cctx);
      return SetError("out of memory for a zstd compression");
    }
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level_);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
    size_t n = ZSTD_compress2(cctx, out_, capacity, in_, in_len_);
    ZSTD_freeCCtx(cctx);
    if (ZSTD_isError(n)) return SetError(std::string("zstd failed: ") + ZSTD_getErrorName(n));
    out_len_ = n;
  }

 private:
  int level_;
};

// A zstd stream (an OCI layer, `application/vnd.oci.image.layer.v1.tar+zstd`): one decompression context per
// stream, fed a piece of input at a time. Each call gives at most `max` bytes of output and says how much of its input
// it used, so that a layer that inflates a thousandfold is read out as the tar reader takes it, not held whole.
struct ZstdStream {
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  bool busy = false;
  ~ZstdStream() { ZSTD_freeDCtx(dctx); }
};

class StreamWorker : public ZstdWorker {
 public:
  StreamWorker(Napi::Env env, Napi::External<ZstdStream> stream, Napi::Buffer<uint8_t> input, size_t max)
      : ZstdWorker(env, "smol:zstdStreamDecode", input),
        stream_ref_(Napi::Persistent(stream)),
        stream_(stream.Data()),
        max_(max) {}
  void Execute() override {
    out_ = static_cast<uint8_t*>(std::malloc(max_));
    if (!out_) return SetError("out of memory for " + std::to_string(max_) + " bytes");
    ZSTD_inBuffer in = {in_, in_len_, 0};
    ZSTD_outBuffer out = {out_, max_, 0};
    // Until the input is used up or the output is full (then the caller comes back with the rest of its input, or
    // with none to take what libzstd still holds).
    while (out.pos < out.size) {
      size_t r = ZSTD_decompressStream(stream_->dctx, &out, &in);
      if (ZSTD_isError(r)) return SetError(std::string("zstd failed: ") + ZSTD_getErrorName(r));
      ended_ = r == 0;
      if (in.pos == in.size && (out.pos < out.size || ended_)) break;
    }
    consumed_ = in.pos;
    out_len_ = out.pos;
  }
  void OnOK() override {
    stream_->busy = false;
    uint8_t* out = out_;
    out_ = nullptr;
    Napi::Object r = Napi::Object::New(Env());
    r.Set("out", Napi::Buffer<uint8_t>::New(Env(), out, out_len_, [](Napi::Env, uint8_t* p) { std::free(p); }));
    r.Set("consumed", static_cast<double>(consumed_));
    r.Set("ended", ended_);
    deferred_.Resolve(r);
  }
  void OnError(const Napi::Error& e) override {
    stream_->busy = false;
    ZstdWorker::OnError(e);
  }

 private:
  Napi::Reference<Napi::External<ZstdStream>> stream_ref_;
  ZstdStream* stream_;
  size_t max_;
  size_t consumed_ = 0;
  bool ended_ = false;
};

}  // namespace

Napi::Value ZstdStreamNew(const Napi::CallbackInfo& info) {
  auto* stream = new ZstdStream();
  if (!stream->dctx) {
    delete stream;
    throw Napi::Error::New(info.Env(), "out of memory for a zstd stream");
  }
  return Napi::External<ZstdStream>::New(info.Env(), stream, [](Napi::Env, ZstdStream* s) { delete s; });
}

Napi::Value ZstdStreamDecode(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 3 || !info[0].IsExternal() || !info[1].IsBuffer() || !info[2].IsNumber())
    throw Napi::TypeError::New(env, "zstdStreamDecode(stream, data, max) expects a stream, a Buffer and a byte count");
  auto stream = info[0].As<Napi::External<ZstdStream>>();
  double max = info[2].As<Napi::Number>().DoubleValue();
  if (!(max >= 1) || max > (1 << 30)) throw Napi::RangeError::New(env, "zstdStreamDecode: max must be 1 byte to 1 GiB");
  if (stream.Data()->busy) throw Napi::Error::New(env, "zstdStreamDecode: the stream is still decoding");
  stream.Data()->busy = true;
  auto* worker = new StreamWorker(env, stream, info[1].As<Napi::Buffer<uint8_t>>(), static_cast<size_t>(max));
  Napi::Promise p = worker->Promise();
  worker->Queue();
  return p;
}

Napi::Value ZstdDecompress(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsBuffer() || !info[1].IsNumber())
    throw Napi::TypeError::New(env, "zstdDecompress(data, size[, into]) expects a Buffer and a byte count");
  double size = info[1].As<Napi::Number>().DoubleValue();
  if (!(size >= 0) || size > static_cast<double>(SIZE_MAX / 2) || size != static_cast<double>(static_cast<size_t>(size)))
    throw Napi::RangeError::New(env, "zstdDecompress: the size must be a whole number of bytes");
  Napi::Buffer<uint8_t> into;
  bool has_into = info.Length() > 2 && !info[2].IsUndefined();
  if (has_into) {
    if (!info[2].IsBuffer()) throw Napi::TypeError::New(env, "zstdDecompress: `into` must be a Buffer");
    into = info[2].As<Napi::Buffer<uint8_t>>();
    if (into.Length() < static_cast<size_t>(size) + 1)
      throw Napi::RangeError::New(env, "zstdDecompress: `into` must hold at least size + 1 bytes");
  }
  auto* worker = new DecompressWorker(env, info[0].As<Napi::Buffer<uint8_t>>(), static_cast<size_t>(size),
                                      has_into ? &into : nullptr);
  Napi::Promise p = worker->Promise();
  worker->Queue();
  return p;
}

Napi::Value ZstdCompress(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsBuffer() || !info[1].IsNumber())
    throw Napi::TypeError::New(env, "zstdCompress(data, level) expects a Buffer and a level");
  int level = info[1].As<Napi::Number>().Int32Value();
  if (level < 1 || level > kMaxLevel) throw Napi::RangeError::New(env, "zstdCompress: the level must be 1 to 19");
  auto* worker = new CompressWorker(env, info[0].As<Napi::Buffer<uint8_t>>(), level);
  Napi::Promise p = worker->Promise();
  worker->Queue();
  return p;
}
