// trainers/io/safetensors.cpp — see safetensors.h. The writer builds the header with
// nlohmann::ordered_json (insertion order, compact dump); the reader parses it with a
// callback that catches duplicate keys (plain nlohmann keeps the last one silently) and
// checks every number with overflow-safe arithmetic before anything is allocated.
#include "trainers/io/safetensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "trainers/io/file_io.h"

namespace relpos {

namespace {

using ojson = nlohmann::ordered_json;
namespace fs = std::filesystem;

constexpr const char* kMetadataKey = "__metadata__";

std::string_view st_dtype(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    case DType::I64: return "I64";
  }
  return "?";
}

// Reverse the bytes of each element (only used on big-endian hosts).
[[maybe_unused]] void swap_elements(char* p, size_t nbytes, size_t elem) {
  for (size_t i = 0; i + elem <= nbytes; i += elem) std::reverse(p + i, p + i + elem);
}

void put_u64_le(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(char((v >> (8 * i)) & 0xff));
}

// Everything the writer needs: the padded header (with its 8-byte length in front) and the
// contiguous cpu tensors, in order.
struct Prepared {
  std::string prefix;
  std::vector<Tensor> tensors;
};

Prepared prepare(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata,
                 const std::string& who) {
  Prepared p;
  ojson header = ojson::object();
  if (!metadata.empty()) {
    ojson md = ojson::object();
    for (const auto& [k, v] : metadata) md[k] = v;
    header[kMetadataKey] = std::move(md);
  }
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    RELPOS_CHECK(!name.empty(), "{}: a tensor has an empty name", who);
    RELPOS_CHECK(name != kMetadataKey, "{}: '{}' is reserved and cannot name a tensor", who,
                 kMetadataKey);
    RELPOS_CHECK(seen.insert(name).second, "{}: duplicate tensor name '{}'", who, name);
    RELPOS_CHECK(t.defined(), "{}: tensor '{}' is undefined", who, name);
    Tensor c = t.device() == Device::CPU ? t : t.to(Device::CPU);
    c = c.contiguous();
    uint64_t nbytes = uint64_t(c.numel()) * dtype_size(c.dtype());
    ojson info = ojson::object();
    info["dtype"] = st_dtype(c.dtype());
    info["shape"] = c.shape();
    info["data_offsets"] = {offset, offset + nbytes};
    header[name] = std::move(info);
    offset += nbytes;
    p.tensors.push_back(std::move(c));
  }
  std::string text;
  try {
    text = header.dump();  // compact; strict: throws on invalid UTF-8
  } catch (const nlohmann::json::exception& e) {
    fail("{}: cannot encode the header (tensor names and metadata must be valid UTF-8): {}", who,
         e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  put_u64_le(p.prefix, text.size());
  p.prefix += text;
  return p;
}

// Calls sink(ptr, n) with the little-endian bytes of each tensor in turn.
template <typename Sink>
void emit_data(const std::vector<Tensor>& tensors, Sink&& sink) {
  for (const Tensor& t : tensors) {
    size_t n = size_t(t.numel()) * dtype_size(t.dtype());
    if (n == 0) continue;
    if constexpr (std::endian::native == std::endian::little) {
      sink(static_cast<const char*>(t.raw_data()), n);
    } else {
      std::string tmp(static_cast<const char*>(t.raw_data()), n);
      swap_elements(tmp.data(), n, dtype_size(t.dtype()));
      sink(tmp.data(), n);
    }
  }
}

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  fail("safetensors file '{}': {}", path, what);
}

// Index of the first non-finite element in the little-endian bytes of an F32/F64 tensor, or
// -1. Runs on the host bytes being serialised / deserialised (no tensor ops).
int64_t first_nonfinite(const char* bytes, size_t nbytes, DType dt) {
  if (dt == DType::F32) {
    for (size_t i = 0; i + 4 <= nbytes; i += 4) {
      float v;
      std::memcpy(&v, bytes + i, 4);
      if (!std::isfinite(v)) return int64_t(i / 4);
    }
  } else if (dt == DType::F64) {
    for (size_t i = 0; i + 8 <= nbytes; i += 8) {
      double v;
      std::memcpy(&v, bytes + i, 8);
      if (!std::isfinite(v)) return int64_t(i / 8);
    }
  }
  return -1;
}

std::string nonfinite_value(const char* bytes, int64_t idx, DType dt) {
  double v;
  if (dt == DType::F32) {
    float f;
    std::memcpy(&f, bytes + idx * 4, 4);
    v = f;
  } else {
    std::memcpy(&v, bytes + idx * 8, 8);
  }
  return fmt::format("{}", v);
}

// One validated header entry.
struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
  size_t header_index;
};

bool is_known_unsupported_dtype(const std::string& s) {
  static const std::set<std::string> known = {
      "BOOL", "U8",  "I8",  "I16", "U16",     "F16",     "BF16",    "I32",  "U32",
      "U64",  "C64", "F4",  "F6_E2M3", "F6_E3M2", "F8_E4M3", "F8_E5M2", "F8_E8M0"};
  return known.count(s) > 0;
}

// A non-negative JSON integer that fits in int64 (the header limit keeps them small anyway).
bool as_index(const ojson& v, uint64_t& out) {
  if (!v.is_number_unsigned()) return false;
  out = v.get<uint64_t>();
  return out <= uint64_t(std::numeric_limits<int64_t>::max());
}

Entry parse_entry(const std::string& path, const std::string& name, const ojson& v, size_t index) {
  if (!v.is_object()) bad(path, fmt::format("entry '{}' is not an object but {}", name, v.type_name()));
  for (const char* k : {"dtype", "shape", "data_offsets"})
    if (!v.contains(k)) bad(path, fmt::format("entry '{}' has no \"{}\"", name, k));
  for (const auto& [k, _] : v.items())
    if (k != "dtype" && k != "shape" && k != "data_offsets")
      bad(path, fmt::format("entry '{}' has an unexpected key \"{}\"", name, k));
  Entry e{name, DType::F32, {}, 0, 0, index};

  const ojson& dt = v["dtype"];
  if (!dt.is_string()) bad(path, fmt::format("entry '{}': dtype is not a string", name));
  std::string d = dt.get<std::string>();
  if (d == "F32") e.dtype = DType::F32;
  else if (d == "F64") e.dtype = DType::F64;
  else if (d == "I64") e.dtype = DType::I64;
  else if (is_known_unsupported_dtype(d))
    bad(path, fmt::format("entry '{}': dtype {} is not supported (relpos reads F32, F64, I64)", name, d));
  else
    bad(path, fmt::format("entry '{}': unknown dtype \"{}\"", name, d));

  const ojson& sh = v["shape"];
  if (!sh.is_array()) bad(path, fmt::format("entry '{}': shape is not an array", name));
  // The product of max(dim, 1) bounds numel, every prefix/suffix product and the byte
  // count, so Tensor's own (unchecked) shape arithmetic cannot overflow later.
  const uint64_t limit = uint64_t(std::numeric_limits<int64_t>::max()) / 8;
  uint64_t bound = 1, numel = 1;
  for (const ojson& x : sh) {
    uint64_t dim;
    if (!as_index(x, dim))
      bad(path, fmt::format("entry '{}': shape {} must hold non-negative integers", name, sh.dump()));
    uint64_t f = std::max<uint64_t>(dim, 1);
    if (bound > limit / f) bad(path, fmt::format("entry '{}': shape {} is too large", name, sh.dump()));
    bound *= f;
    numel *= dim;
    e.shape.push_back(int64_t(dim));
  }
  uint64_t nbytes = numel * dtype_size(e.dtype);

  const ojson& off = v["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !as_index(off[0], e.begin) || !as_index(off[1], e.end))
    bad(path, fmt::format("entry '{}': data_offsets {} must be two non-negative integers [begin, end]",
                          name, off.dump()));
  if (e.end < e.begin)
    bad(path, fmt::format("entry '{}': data_offsets [{}, {}] end before they begin", name, e.begin, e.end));
  if (e.end - e.begin != nbytes)
    bad(path, fmt::format("entry '{}': data_offsets [{}, {}] span {} bytes, but {} {} needs {} "
                          "({} elements x {} bytes)",
                          name, e.begin, e.end, e.end - e.begin, d, shape_str(e.shape), nbytes,
                          numel, dtype_size(e.dtype)));
  return e;
}

}  // namespace

std::string serialize_safetensors(const NamedTensors& tensors,
                                  const std::map<std::string, std::string>& metadata) {
  Prepared p = prepare(tensors, metadata, "serialize_safetensors");
  std::string out = std::move(p.prefix);
  emit_data(p.tensors, [&](const char* d, size_t n) { out.append(d, n); });
  return out;
}

void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata, bool require_finite) {
  Prepared p = prepare(tensors, metadata, fmt::format("write_safetensors '{}'", path));
  if (require_finite)
    for (size_t i = 0; i < p.tensors.size(); ++i) {
      const Tensor& t = p.tensors[i];
      const char* bytes = static_cast<const char*>(t.raw_data());
      int64_t k = t.numel() > 0 ? first_nonfinite(bytes, size_t(t.numel()) * dtype_size(t.dtype()), t.dtype()) : -1;
      if (k >= 0)
        fail("write_safetensors '{}': tensor '{}' holds a non-finite value ({} at element {}); only finite state is "
             "saved", path, tensors[i].first, nonfinite_value(bytes, k, t.dtype()), k);
    }
  // Written to a sibling and renamed, so a failed write never leaves a half file at `path`.
  std::string tmp = path + ".tmp";
  try {
    OutputFile f(tmp);
    f.write(p.prefix);
    emit_data(p.tensors, [&](const char* d, size_t n) { f.write(d, n); });
    f.close_synced();
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) fail("cannot rename '{}' to '{}': {}", tmp, path, ec.message());
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
  fs::path parent = fs::path(path).parent_path();
  fsync_directory(parent.empty() ? std::string(".") : parent.string());
}

namespace {

// The header's JSON text: the 8-byte little-endian length, checked against the file, then the
// text (a JSON object without NUL bytes). `in` is left at the first data byte.
std::string read_header_text(std::ifstream& in, const std::string& path, uint64_t file_size) {
  if (file_size < 8)
    bad(path, fmt::format("the file is {} bytes, too short for the 8-byte header length", file_size));
  unsigned char lenbuf[8];
  if (!in.read(reinterpret_cast<char*>(lenbuf), 8)) bad(path, "cannot read the header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | lenbuf[i];
  if (n > kSafetensorsMaxHeader)
    bad(path, fmt::format("header length {} is absurd (the limit is {} bytes; file is {} bytes)", n,
                          kSafetensorsMaxHeader, file_size));
  if (n > file_size - 8)
    bad(path, fmt::format("header length {} runs past the end of the file ({} bytes, so at most {})", n, file_size,
                          file_size - 8));
  if (n == 0) bad(path, "header length is 0 (the header must be a JSON object)");
  std::string text(size_t(n), '\0');
  if (!in.read(text.data(), std::streamsize(n))) bad(path, "the file ended inside the header");
  if (text[0] != '{') bad(path, "the header does not start with '{' (not a JSON object)");
  // nlohmann's lexer takes a NUL byte for the end of input; JSON never holds a raw NUL.
  if (size_t z = text.find('\0'); z != std::string::npos)
    bad(path, fmt::format("the header is not valid JSON: a NUL byte at header offset {}", z));
  return text;
}

// The header as a JSON object, refusing duplicate keys in any object (nlohmann would keep the
// last silently).
ojson parse_header(const std::string& path, const std::string& text) {
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  ojson header;
  try {
    header = ojson::parse(text, [&](int /*depth*/, ojson::parse_event_t ev, ojson& parsed) {
      if (ev == ojson::parse_event_t::object_start) {
        open_objects.emplace_back();
      } else if (ev == ojson::parse_event_t::object_end) {
        if (!open_objects.empty()) open_objects.pop_back();
      } else if (ev == ojson::parse_event_t::key && !open_objects.empty() && parsed.is_string()) {
        if (!open_objects.back().insert(parsed.get<std::string>()).second && duplicate.empty())
          duplicate = parsed.get<std::string>();
      }
      return true;
    });
  } catch (const nlohmann::json::exception& e) {
    bad(path, fmt::format("the header is not valid JSON: {}", e.what()));
  }
  if (!duplicate.empty()) bad(path, fmt::format("the header has the key \"{}\" twice", duplicate));
  if (!header.is_object()) bad(path, "the header is not a JSON object");
  return header;
}

// The tensor entries in header order, and the string-to-string "__metadata__".
std::vector<Entry> header_entries(const std::string& path, const ojson& header,
                                  std::map<std::string, std::string>& md) {
  std::vector<Entry> entries;
  for (const auto& [key, val] : header.items()) {
    if (key == kMetadataKey) {
      if (!val.is_object()) bad(path, "\"__metadata__\" is not an object");
      for (const auto& [mk, mv] : val.items()) {
        if (!mv.is_string()) bad(path, fmt::format("\"__metadata__\" value of \"{}\" is not a string", mk));
        md[mk] = mv.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(path, key, val, entries.size()));
  }
  return entries;
}

// Sorts the entries by data offset and checks that they tile the data buffer exactly: no
// entry past its end, no overlap, no gap. Ties (only empty tensors share a begin with their
// successor) keep header order, so an empty tensor stays before the tensor written after it.
void check_layout(const std::string& path, std::vector<Entry>& entries, uint64_t data_size) {
  for (const Entry& e : entries)
    if (e.end > data_size)
      bad(path, fmt::format("entry '{}': data_offsets [{}, {}] point past the end of the data buffer ({} bytes)",
                            e.name, e.begin, e.end, data_size));
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < covered)
      bad(path, fmt::format("entry '{}': data_offsets [{}, {}] overlap entry '{}' (which ends at {})", e.name, e.begin,
                            e.end, prev->name, covered));
    if (e.begin > covered)
      bad(path, fmt::format("bytes [{}, {}) of the data buffer belong to no tensor (gap before '{}')", covered,
                            e.begin, e.name));
    covered = e.end;
    prev = &e;
  }
  if (covered != data_size)
    bad(path, fmt::format("the tensors cover {} bytes but the data buffer is {} bytes", covered, data_size));
}

// The caller's expectations, from the header alone (a sparse file may claim any size).
void check_expected(const std::string& path, const std::vector<Entry>& entries, uint64_t data_size,
                    const SafetensorsExpect& expect) {
  if (data_size > expect.max_data_bytes)
    bad(path, fmt::format("the header declares {} bytes of tensor data, more than the {} expected", data_size,
                          expect.max_data_bytes));
  if (!expect.like) return;
  std::map<std::string, const Tensor*> want;
  for (const auto& [name, t] : *expect.like) want[name] = &t;
  for (const Entry& e : entries) {
    auto it = want.find(e.name);
    if (it == want.end()) bad(path, fmt::format("unexpected tensor '{}' (the model has no such entry)", e.name));
    const Tensor& t = *it->second;
    if (t.dtype() != e.dtype)
      bad(path, fmt::format("tensor '{}' is {} but the model expects {}", e.name, st_dtype(e.dtype), st_dtype(t.dtype())));
    if (t.shape() != e.shape)
      bad(path, fmt::format("tensor '{}' has shape {} but the model expects {}", e.name, shape_str(e.shape),
                            shape_str(t.shape())));
    want.erase(it);
  }
  if (!want.empty()) bad(path, fmt::format("tensor '{}' is missing", want.begin()->first));
}

// The entries' data, read from data_start on (and checked finite when asked).
NamedTensors read_tensors(std::ifstream& in, const std::string& path, const std::vector<Entry>& entries,
                          uint64_t data_start, bool require_finite) {
  NamedTensors out;
  out.reserve(entries.size());
  for (const Entry& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    const size_t nbytes = size_t(e.end - e.begin);
    if (nbytes > 0) {
      char* dst = static_cast<char*>(t.raw_data());
      in.seekg(std::streamoff(data_start + e.begin));
      if (!in.read(dst, std::streamsize(nbytes)))
        bad(path, fmt::format("cannot read the data of '{}' (did the file change?)", e.name));
      if constexpr (std::endian::native != std::endian::little) swap_elements(dst, nbytes, dtype_size(e.dtype));
      if (require_finite)
        if (int64_t k = first_nonfinite(dst, nbytes, e.dtype); k >= 0)
          bad(path, fmt::format("tensor '{}' holds a non-finite value ({} at element {})", e.name,
                                nonfinite_value(dst, k, e.dtype), k));
    }
    out.emplace_back(e.name, std::move(t));
  }
  return out;
}

}  // namespace

NamedTensors read_safetensors(const std::string& path, std::map<std::string, std::string>* metadata,
                              const SafetensorsExpect& expect) {
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) bad(path, "no such file");
  if (!fs::is_regular_file(st)) bad(path, "not a regular file");
  const uint64_t file_size = fs::file_size(path, ec);
  if (ec) bad(path, fmt::format("cannot get its size: {}", ec.message()));
  std::ifstream in(path, std::ios::binary);
  if (!in) bad(path, "cannot open it for reading");
  const std::string text = read_header_text(in, path, file_size);
  std::map<std::string, std::string> md;
  std::vector<Entry> entries = header_entries(path, parse_header(path, text), md);
  const uint64_t data_start = 8 + text.size(), data_size = file_size - data_start;
  check_layout(path, entries, data_size);
  check_expected(path, entries, data_size, expect);
  NamedTensors out = read_tensors(in, path, entries, data_start, expect.require_finite);
  if (metadata) *metadata = std::move(md);
  return out;
}

}  // namespace relpos
