// core/enum_names.h — the names of a closed choice, written once, next to its enum.
//
// A config choice such as model.norm_type is an enum in the code and a word in YAML. The words
// live in one table per enum, a specialisation of EnumTable declared beside the enum:
//
//   enum class NormType { LayerNorm, RMSNorm };
//   template <> struct EnumTable<nn::NormType> {
//     static constexpr EnumName<nn::NormType> items[] = {{nn::NormType::LayerNorm, "layernorm"}, ...};
//   };
//
// and everything else derives from it: enum_name(e) for messages and saved configs,
// parse_enum<E>(word) for parsing, enum_names<E>() for "expected one of" lists and the
// generated docs, and fmt formatting ("{}" prints the word). Code compares enum values,
// never the words.
#pragma once
#include <fmt/format.h>

#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/dtype.h"

namespace relpos {

template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

// Specialise with `static constexpr EnumName<E> items[] = {...};` (the first item is listed
// first in messages and docs, nothing else).
template <typename E>
struct EnumTable;

template <typename E, typename = void>
struct has_enum_table : std::false_type {};
template <typename E>
struct has_enum_table<E, std::void_t<decltype(EnumTable<E>::items)>> : std::true_type {};

template <typename E>
constexpr std::string_view enum_name(E e) {
  for (const auto& item : EnumTable<E>::items)
    if (item.value == e) return item.name;
  return "?";
}

template <typename E>
constexpr std::optional<E> parse_enum(std::string_view word) {
  for (const auto& item : EnumTable<E>::items)
    if (item.name == word) return item.value;
  return std::nullopt;
}

template <typename E>
const std::vector<std::string>& enum_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& item : EnumTable<E>::items) v.emplace_back(item.name);
    return v;
  }();
  return names;
}

template <>
struct EnumTable<Device> {
  static constexpr EnumName<Device> items[] = {{Device::CPU, device_name(Device::CPU)},
                                               {Device::CUDA, device_name(Device::CUDA)}};
};

}  // namespace relpos

// "{}" of any enum with a table prints its word.
template <typename E>
struct fmt::formatter<E, char, std::enable_if_t<relpos::has_enum_table<E>::value>> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(E e, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(relpos::enum_name(e), ctx);
  }
};
