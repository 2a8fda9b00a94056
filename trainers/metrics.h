// trainers/metrics.h — per-step metrics of a run, written twice:
//   <run_dir>/metrics.jsonl  one JSON object per logged row, {"step": S, <keys in order>}
//   <run_dir>/metrics.csv    the same rows as a table, one column per scalar, arrays spread
//                            over the columns name.0, name.1, ...
// Values are numbers, strings, bools, or arrays of numbers (per-layer statistics). Each row
// is written and flushed as soon as it is logged (a crash loses at most the row in flight).
// NaN and +-Inf, which JSON cannot hold, are written as the strings "nan", "inf", "-inf"
// (in both files; Python's float() reads them back).
//
// CSV columns: the first row's keys in insertion order ("step" first). When a later row
// brings a key (or a longer array) the header does not have, the CSV is regenerated from
// metrics.jsonl with the extended header (written to a temporary file and renamed), so no
// value ever exists in the JSONL only. Cells of keys a row lacks are empty. Columns keep the
// order in which keys were first seen. Strings are quoted as RFC 4180 says when needed.
//
// Resume: opening a run directory whose metrics.jsonl exists appends to it. With
// resume_from_step set, rows with step > resume_from_step are dropped first, so a run
// resumed from a checkpoint does not log those steps twice. A last line cut short by a crash
// (no newline, not valid JSON) is dropped; any other invalid line is an error naming the
// file and line. On open, metrics.csv is regenerated from metrics.jsonl, so the two always
// agree. Steps must not decrease (several rows may share a step, e.g. train and eval).
// One writer per run directory at a time.
#pragma once
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace relpos {

struct MetricsOptions {
  std::optional<int64_t> resume_from_step;  // drop existing rows with step > this
};

class MetricsWriter {
 public:
  explicit MetricsWriter(std::string run_dir, MetricsOptions opt = {});

  // Appends the row {"step": step, <row's keys>}. `row` is a JSON object whose values are
  // numbers, strings, bools or arrays of numbers; it must not contain "step". Errors name
  // the key and leave both files unchanged.
  void log(int64_t step, const nlohmann::ordered_json& row);

  const std::string& jsonl_path() const { return jsonl_path_; }
  const std::string& csv_path() const { return csv_path_; }
  const std::vector<std::string>& csv_columns() const { return columns_; }
  std::optional<int64_t> last_step() const { return last_step_; }

 private:
  void rewrite_csv();  // from metrics.jsonl, with columns_ extended by every row's columns
  void open_streams();

  std::string run_dir_, jsonl_path_, csv_path_;
  std::vector<std::string> columns_;
  std::optional<int64_t> last_step_;
  std::ofstream jsonl_, csv_;
};

}  // namespace relpos
