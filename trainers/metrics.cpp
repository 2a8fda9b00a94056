// trainers/metrics.cpp — see metrics.h.
#include "trainers/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <unordered_map>
#include <utility>

#include "core/error.h"
#include "trainers/io/file_io.h"
#include "trainers/limits.h"

namespace relpos {

namespace {

using ojson = nlohmann::ordered_json;
namespace fs = std::filesystem;

// A finite number as JSON, a non-finite one as "nan" / "inf" / "-inf".
ojson normalize_number(const ojson& v) {
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  }
  return v;
}

std::string cell_text(const ojson& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_null()) return "";
  return normalize_number(v).is_string() ? normalize_number(v).get<std::string>() : v.dump();
}

// A row as (column, cell) pairs: scalars as themselves, arrays as name.0, name.1, ...
// Lenient (anything else is dumped as text): it also reads rows written by other tools.
std::vector<std::pair<std::string, std::string>> flatten(const ojson& row) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [k, v] : row.items()) {
    if (v.is_array()) {
      for (size_t i = 0; i < v.size(); ++i) out.emplace_back(fmt::format("{}.{}", k, i), cell_text(v[i]));
    } else if (v.is_object()) {
      out.emplace_back(k, v.dump());
    } else {
      out.emplace_back(k, cell_text(v));
    }
  }
  return out;
}

std::string csv_escape(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

using ColumnIndex = std::unordered_map<std::string, size_t>;

ColumnIndex index_columns(const std::vector<std::string>& columns) {
  ColumnIndex idx;
  for (size_t i = 0; i < columns.size(); ++i) idx.emplace(columns[i], i);
  return idx;
}

// Every cell's column must be in `index`.
std::string csv_line(const ColumnIndex& index, size_t ncols,
                     const std::vector<std::pair<std::string, std::string>>& cells) {
  std::vector<const std::string*> by_col(ncols, nullptr);
  for (const auto& [c, v] : cells) by_col[index.at(c)] = &v;
  std::string line;
  for (size_t i = 0; i < ncols; ++i) {
    if (i) line += ',';
    if (by_col[i]) line += csv_escape(*by_col[i]);
  }
  return line + "\n";
}

std::string csv_header(const std::vector<std::string>& columns) {
  std::string line;
  for (size_t i = 0; i < columns.size(); ++i) {
    if (i) line += ',';
    line += csv_escape(columns[i]);
  }
  return line + "\n";
}

// The rows of a metrics.jsonl text; a last line without newline that does not parse is a
// crash leftover and dropped (`dropped_tail` set). Other bad lines are errors.
std::vector<ojson> parse_jsonl(const std::string& path, const std::string& text, bool* dropped_tail) {
  std::vector<ojson> rows;
  size_t pos = 0, line_no = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    bool last_unterminated = nl == std::string::npos;
    std::string line = text.substr(pos, last_unterminated ? std::string::npos : nl - pos);
    pos = last_unterminated ? text.size() : nl + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    ojson row;
    try {
      row = ojson::parse(line);
    } catch (const nlohmann::json::exception& e) {
      if (last_unterminated) {
        if (dropped_tail) *dropped_tail = true;
        break;
      }
      fail("metrics file '{}' line {}: not valid JSON: {}", path, line_no, e.what());
    }
    if (!row.is_object() || !row.contains("step") || !row.at("step").is_number_integer())
      fail("metrics file '{}' line {}: not a JSON object with an integer \"step\"", path, line_no);
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

MetricsWriter::MetricsWriter(std::string run_dir, MetricsOptions opt)
    : run_dir_(std::move(run_dir)),
      jsonl_path_((fs::path(run_dir_) / "metrics.jsonl").string()),
      csv_path_((fs::path(run_dir_) / "metrics.csv").string()) {
  std::error_code ec;
  fs::create_directories(run_dir_, ec);
  if (ec) fail("metrics: cannot create run directory '{}': {}", run_dir_, ec.message());

  if (fs::exists(jsonl_path_, ec)) {
    std::string text = read_whole_file(jsonl_path_, "metrics file", train::kMaxMetricsBytes);
    bool dropped_tail = false;
    std::vector<ojson> rows = parse_jsonl(jsonl_path_, text, &dropped_tail);
    bool rewrite = dropped_tail || (!text.empty() && text.back() != '\n');
    if (opt.resume_from_step) {
      size_t before = rows.size();
      std::erase_if(rows, [&](const ojson& r) { return r.at("step").get<int64_t>() > *opt.resume_from_step; });
      rewrite = rewrite || rows.size() != before;
    }
    if (rewrite) {
      std::string kept;
      for (const ojson& r : rows) kept += r.dump() + "\n";
      replace_file_atomically(jsonl_path_, kept);
    }
    if (!rows.empty()) last_step_ = rows.back().at("step").get<int64_t>();
  }
  rewrite_csv();
  open_streams();
}

void MetricsWriter::open_streams() {
  if (!jsonl_.is_open()) {
    jsonl_.open(jsonl_path_, std::ios::binary | std::ios::app);
    if (!jsonl_) fail("metrics: cannot open '{}' for appending", jsonl_path_);
  }
  if (!csv_.is_open()) {
    csv_.open(csv_path_, std::ios::binary | std::ios::app);
    if (!csv_) fail("metrics: cannot open '{}' for appending", csv_path_);
  }
}

void MetricsWriter::rewrite_csv() {
  std::vector<std::vector<std::pair<std::string, std::string>>> rows;
  std::error_code ec;
  if (fs::exists(jsonl_path_, ec))
    for (const ojson& r : parse_jsonl(jsonl_path_, read_whole_file(jsonl_path_, "metrics file", train::kMaxMetricsBytes), nullptr))
      rows.push_back(flatten(r));
  std::set<std::string> known(columns_.begin(), columns_.end());
  for (const auto& cells : rows)
    for (const auto& [c, _] : cells)
      if (known.insert(c).second) columns_.push_back(c);
  std::string text = columns_.empty() ? "" : csv_header(columns_);
  ColumnIndex index = index_columns(columns_);
  for (const auto& cells : rows) text += csv_line(index, columns_.size(), cells);
  if (csv_.is_open()) csv_.close();
  replace_file_atomically(csv_path_, text);
}

void MetricsWriter::log(int64_t step, const nlohmann::ordered_json& row) {
  RELPOS_CHECK(row.is_object(), "metrics: a row must be a JSON object, got {}", row.type_name());
  RELPOS_CHECK(!last_step_ || step >= *last_step_,
               "metrics: step {} logged after step {} (steps must not decrease; resuming? pass "
               "resume_from_step)", step, *last_step_);
  ojson out = ojson::object();
  out["step"] = step;
  for (const auto& [k, v] : row.items()) {
    RELPOS_CHECK(k != "step", "metrics: \"step\" is given as the argument, not as a key of the row");
    if (v.is_number() || v.is_string() || v.is_boolean()) {
      out[k] = normalize_number(v);
    } else if (v.is_array()) {
      ojson a = ojson::array();
      for (const ojson& x : v) {
        RELPOS_CHECK(x.is_number(), "metrics: \"{}\" must be an array of numbers, but holds {}", k,
                     x.type_name());
        a.push_back(normalize_number(x));
      }
      out[k] = std::move(a);
    } else {
      fail("metrics: \"{}\" is {}; values must be numbers, strings, bools or arrays of numbers", k,
           v.type_name());
    }
  }
  auto cells = flatten(out);
  std::set<std::string> seen;
  for (const auto& [c, _] : cells)
    RELPOS_CHECK(seen.insert(c).second, "metrics: column \"{}\" given twice in one row (a key "
                 "\"{}\" next to an array that spreads over the same name)", c, c);
  std::string line;
  try {
    line = out.dump() + "\n";
  } catch (const nlohmann::json::exception& e) {
    fail("metrics: cannot encode the row of step {} (strings must be valid UTF-8): {}", step, e.what());
  }

  jsonl_ << line;
  jsonl_.flush();
  if (!jsonl_) fail("metrics: cannot write '{}': {}", jsonl_path_, std::strerror(errno));
  last_step_ = step;

  std::set<std::string> known(columns_.begin(), columns_.end());
  bool new_column = std::any_of(cells.begin(), cells.end(), [&](const auto& c) { return !known.count(c.first); });
  if (new_column) {
    rewrite_csv();  // includes the row just appended to the JSONL
    open_streams();
  } else {
    csv_ << csv_line(index_columns(columns_), columns_.size(), cells);
    csv_.flush();
    if (!csv_) fail("metrics: cannot write '{}': {}", csv_path_, std::strerror(errno));
  }
}

}  // namespace relpos
