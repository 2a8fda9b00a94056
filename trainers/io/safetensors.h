// trainers/io/safetensors.h — read and write named tensors in the safetensors format
// (huggingface/safetensors), the file format of relpos checkpoints:
//   [0, 8)        N, the header length in bytes, unsigned 64-bit little-endian
//   [8, 8 + N)    a UTF-8 JSON object, padded with spaces (0x20) to a multiple of 8 bytes:
//                   {"__metadata__": {"key": "value", ...},          (only when metadata given)
//                    "<name>": {"dtype": "F32" | "F64" | "I64", "shape": [d0, ...],
//                               "data_offsets": [begin, end]}, ...}
//   [8 + N, EOF)  the data buffer: each tensor's row-major little-endian bytes at
//                 [begin, end) relative to the buffer start.
//
// Writer: tensors are laid out in the order given, back to back, no gaps; the header is
// compact JSON (no whitespace) with "__metadata__" first (omitted when metadata is empty),
// then the tensors in the order given, each with its keys in the order dtype, shape,
// data_offsets. Non-contiguous or CUDA tensors are written as contiguous cpu copies. Names
// must be non-empty, unique, valid UTF-8 and not "__metadata__". Everything is checked
// before a byte is written; the bytes go to "<path>.tmp", which is fsynced and renamed over
// <path> (so a failed write never leaves a partial file at <path>).
//
// Reader: returns the tensors (fresh contiguous cpu tensors) in the order of their data in
// the file: sorted by data_offsets (begin, then end; ties — empty tensors at one offset —
// in header order), which is exactly the order a relpos writer was given.
// It validates everything and throws relpos::Error, whose message starts with
// "safetensors file '<path>':", for: a file shorter than 8 bytes, a header length over
// 100,000,000 or past the end of the file, a header that is not a JSON object (or not valid
// UTF-8), duplicate keys, a missing or extra key in a tensor entry, an unknown or
// unsupported dtype (relpos reads F32, F64, I64), a bad shape (not non-negative integers, or
// too many elements), data_offsets that are not [begin <= end] integers, whose byte count
// is not numel * dtype size, that overlap, leave a gap or do not cover the data buffer
// exactly, and "__metadata__" that is not an object of strings.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace relpos {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// The largest header a reader accepts (the reference implementation's MAX_HEADER_SIZE).
inline constexpr uint64_t kSafetensorsMaxHeader = 100'000'000;

// require_finite: every F32/F64 element must be finite (checked on the host bytes before a
// byte is written); the error names the file, the tensor and the first bad element.
void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {},
                       bool require_finite = false);

// The exact bytes write_safetensors puts in a file (header length, header, data).
std::string serialize_safetensors(const NamedTensors& tensors,
                                  const std::map<std::string, std::string>& metadata = {});

// What a reader may demand beyond a well-formed file. All header checks run before any
// tensor data is read or allocated.
struct SafetensorsExpect {
  bool require_finite = false;        // F32/F64 data must be finite (error: file, tensor, index)
  uint64_t max_data_bytes = UINT64_MAX;  // the header may declare at most this many data bytes
  // When set: exactly these tensors, with these dtypes and shapes (a checkpoint against its
  // model); a missing, extra or mismatched tensor is an error naming file and tensor.
  const NamedTensors* like = nullptr;
};

NamedTensors read_safetensors(const std::string& path,
                              std::map<std::string, std::string>* metadata = nullptr,
                              const SafetensorsExpect& expect = {});

}  // namespace relpos
