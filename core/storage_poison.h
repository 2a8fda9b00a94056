// core/storage_poison.h — poison mode of the guard (core/storage.h), for test harnesses.
// With guard mode and poison on, the data of every Storage not asked to be zeroed starts as
// kPoison bytes (NaN in float32 / float64, -1 in int64), fresh block or reused, so a kernel that
// leaves part of its output unwritten yields NaN instead of a stale value that may match.
#pragma once

namespace relpos::guard {
constexpr unsigned char kPoison = 0xFF;
void set_poison(bool on);
bool poison();
}  // namespace relpos::guard
