// experiments/sweep.cpp — the sweep runner (see sweep.h): spec parsing, the point list,
// skip/resume bookkeeping in the index files (sweep.jsonl, sweep.shard-*.jsonl,
// sweep.point-*.jsonl), shards and single points, N points at once on split threads.
#include "experiments/sweep.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>
#include <tuple>

#include "kernels/ops.h"
#include "nn/positional/params.h"
#include "trainers/io/checkpoint.h"
#include "trainers/data/data.h"
#include "trainers/data/data_tasks.h"
#include "trainers/evaluate.h"
#include "trainers/io/file_io.h"
#include "trainers/limits.h"
#include "trainers/trainer.h"

namespace fs = std::filesystem;

namespace relpos::train {

namespace {

// Rows of <run_dir>/metrics.jsonl (a last line cut short is ignored).
std::vector<nlohmann::json> read_metrics(const std::string& run_dir) {
  std::vector<nlohmann::json> rows;
  const std::string path = run_dir + "/metrics.jsonl";
  if (!fs::exists(path)) return rows;
  std::istringstream f(read_whole_file(path, "metrics file", kMaxMetricsBytes));
  for (std::string line; std::getline(f, line);) {
    if (line.empty()) continue;
    try {
      rows.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::exception&) {
    }
  }
  return rows;
}

nlohmann::json num_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

// A finished point's "eval" records: every eval length in every mode of the spec (text data;
// other tasks, whose examples are independent: random windows only).
nlohmann::json evaluate_point(const SweepSpec& spec, const std::string& run_dir) {
  LoadedRun base = load_run(run_dir);
  const bool by_example = std::count(spec.eval_modes.begin(), spec.eval_modes.end(), "examples") > 0;
  const std::vector<std::string> modes = find_data_task(base.cfg.data.task).text ? spec.eval_modes
                                         : by_example ? std::vector<std::string>{"examples"}
                                                      : std::vector<std::string>{"random"};
  nlohmann::json evs = nlohmann::json::array();
  for (const std::string& mode : modes) {
    for (size_t li = 0; li < spec.eval_lengths.size(); ++li) {
      const int64_t L = spec.eval_lengths[li];
      const std::string val_path = spec.eval_val_paths.empty() ? std::string() : spec.eval_val_paths[li];
      LoadedRun other = val_path.empty() ? LoadedRun() : load_run(run_dir, val_path);
      LoadedRun& run = val_path.empty() ? base : other;
      EvalOptions eo;
      eo.seq_len = L;
      eo.mode = mode;
      eo.stride = spec.eval_stride;
      eo.bucket = spec.eval_bucket;
      eo.max_tokens = spec.eval_max_tokens;
      eo.subset_channel = spec.eval_subset_channel;
      eo.subset_min = spec.eval_subset_min;
      PositionEval e = evaluate_positions(*run.model, *run.data, run.cfg, eo);
      nlohmann::json bj = nlohmann::json::array();
      for (auto& b : e.buckets) bj.push_back({{"lo", b.lo}, {"hi", b.hi}, {"loss", num_or_null(b.loss)}, {"tokens", b.tokens}});
      evs.push_back({{"seq_len", L}, {"mode", e.mode}, {"stride", e.stride}, {"loss", e.loss},
                     {"accuracy", e.accuracy}, {"tokens", e.tokens}, {"beyond_loss", num_or_null(e.beyond_loss)},
                     {"beyond_tokens", e.beyond_tokens}, {"buckets", bj}});
      if (!val_path.empty()) evs.back()["val_path"] = val_path;
      if (!e.subset.empty()) {
        evs.back()["subset"] = e.subset;
        evs.back()["subset_loss"] = num_or_null(e.subset_loss);
        evs.back()["subset_tokens"] = e.subset_tokens;
      }
    }
  }
  return evs;
}

}  // namespace

namespace {

// A non-negative decimal integer, the whole of `t` (no sign, no spaces).
bool parse_count(std::string_view t, int64_t& out) {
  if (t.empty() || !std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
  return ec == std::errc() && p == t.data() + t.size();
}

bool starts_ends(const std::string& s, const std::string& pre, const std::string& suf) {
  return s.size() > pre.size() + suf.size() && s.compare(0, pre.size(), pre) == 0 &&
         s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

// sweep.json, written whole or not at all: a temporary file unique to this host and process,
// then rename (atomic on POSIX file systems and NFS), so shards starting together never leave a
// mixed or truncated file.
void write_atomically(const fs::path& path, const std::string& text) {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = 0;
  const fs::path tmp = path.parent_path() / fmt::format(".{}.tmp-{}-{}", path.filename().string(), host, getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    RELPOS_CHECK(f.good(), "sweep: cannot write '{}'", tmp.string());
    f << text;
    f.flush();
    RELPOS_CHECK(f.good(), "sweep: writing '{}' failed", tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp);
    RELPOS_CHECK(false, "sweep: cannot rename '{}' to '{}': {}", tmp.string(), path.string(), ec.message());
  }
}

}  // namespace

std::pair<int, int> parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  int64_t i = -1, n = -1;
  const bool ok = slash != std::string::npos && parse_count(std::string_view(text).substr(0, slash), i) &&
                  parse_count(std::string_view(text).substr(slash + 1), n) && n >= 1 && i < n &&
                  n <= std::numeric_limits<int>::max();
  RELPOS_CHECK_CONFIG(ok, "--shard: expected I/N with 0 <= I < N, got '{}'", text);
  return {int(i), int(n)};
}

int64_t find_point(const SweepSpec& spec, const std::string& text) {
  int64_t i = -1;
  if (parse_count(text, i) && i < int64_t(spec.points.size())) return i;
  for (const auto& p : spec.points)
    if (p.name == text) return p.index;
  fail_config("--point: expected a point index 0..{} or a point name of {}, got '{}'",
              int64_t(spec.points.size()) - 1, spec.source, text);
}

std::vector<int64_t> selected_points(const SweepSpec& spec, const SweepOptions& opt) {
  RELPOS_CHECK_CONFIG(opt.shard_count >= 1 && opt.shard_index >= 0 && opt.shard_index < opt.shard_count,
                      "--shard: expected I/N with 0 <= I < N, got '{}/{}'", opt.shard_index, opt.shard_count);
  RELPOS_CHECK_CONFIG(opt.point < int64_t(spec.points.size()) && opt.point >= -1,
                      "--point: expected a point index 0..{}, got {}", int64_t(spec.points.size()) - 1, opt.point);
  RELPOS_CHECK_CONFIG(opt.point < 0 || opt.shard_count == 1, "--point and --shard: give one of them, not both");
  std::vector<int64_t> sel;
  for (const auto& p : spec.points)
    if (opt.point >= 0 ? p.index == opt.point : p.index % opt.shard_count == opt.shard_index) sel.push_back(p.index);
  return sel;
}

std::string sweep_index_name(const SweepOptions& opt) {
  if (opt.point >= 0) return fmt::format("sweep.point-{}.jsonl", opt.point);
  if (opt.shard_count > 1) return fmt::format("sweep.shard-{}-of-{}.jsonl", opt.shard_index, opt.shard_count);
  return "sweep.jsonl";
}

std::vector<std::string> sweep_index_files(const std::string& dir) {
  std::vector<std::string> out, more;
  std::error_code ec;
  if (fs::is_regular_file(fs::path(dir) / "sweep.jsonl", ec)) out.push_back((fs::path(dir) / "sweep.jsonl").string());
  if (!fs::is_directory(dir, ec)) return out;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if ((starts_ends(n, "sweep.shard-", ".jsonl") || starts_ends(n, "sweep.point-", ".jsonl")) &&
        it->is_regular_file(ec))
      more.push_back(n);
  }
  std::sort(more.begin(), more.end());
  for (const auto& n : more) out.push_back((fs::path(dir) / n).string());
  return out;
}

std::vector<nlohmann::json> read_sweep_index(const std::string& dir) {
  struct Pick {
    nlohmann::json rec;
    bool done;
    double at;
    size_t file, line;
  };
  auto later = [](const Pick& a, const Pick& b) {  // a replaces b
    return std::tie(a.done, a.at, a.file, a.line) > std::tie(b.done, b.at, b.file, b.line);
  };
  std::map<std::string, Pick> by_name;
  const auto files = sweep_index_files(dir);
  for (size_t fi = 0; fi < files.size(); ++fi) {
    std::istringstream f(read_whole_file(files[fi], "sweep index", kMaxMetricsBytes));
    size_t li = 0;
    for (std::string line; std::getline(f, line); ++li) {
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception&) {  // a line cut short by a crash
        continue;
      }
      if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) continue;
      const auto st = j.find("status");
      const auto fa = j.find("finished_at");
      Pick p{j, st != j.end() && *st == "done", fa != j.end() && fa->is_number() ? fa->get<double>() : 0.0, fi, li};
      const std::string name = j["name"].get<std::string>();
      auto it = by_name.find(name);
      if (it == by_name.end())
        by_name.emplace(name, std::move(p));
      else if (later(p, it->second))
        it->second = std::move(p);
    }
  }
  std::vector<nlohmann::json> out;
  for (auto& [n, p] : by_name) out.push_back(std::move(p.rec));
  auto index_of = [](const nlohmann::json& j) {
    const auto it = j.find("index");
    return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : std::numeric_limits<int64_t>::max();
  };
  std::stable_sort(out.begin(), out.end(), [&](const nlohmann::json& a, const nlohmann::json& b) {
    return index_of(a) < index_of(b);  // ties keep name order (by_name is sorted)
  });
  return out;
}

namespace {

// sweep.json: what the sweep is (for report.py), rewritten by every run of it.
void write_sweep_meta(const SweepSpec& spec, const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& p : spec.points) names.push_back(p.name);
  nlohmann::json meta = {{"spec", spec.source},
                         {"point_names", names},
                         {"grid_keys", spec.grid_keys},
                         {"recipes", spec.recipes},
                         {"eval_lengths", spec.eval_lengths},
                         {"eval_modes", spec.eval_modes},
                         {"points", int64_t(spec.points.size())}};
  if (!spec.eval_val_paths.empty()) meta["eval_val_paths"] = spec.eval_val_paths;
  write_atomically(fs::path(dir) / "sweep.json", meta.dump(2) + "\n");
}

// The final numbers of a point's run, from its metrics.jsonl (also right for a point whose
// training finished in an earlier run).
struct PointNumbers {
  double train_loss = NAN, val_loss = NAN;
  int64_t last_step = 0;
  nlohmann::json divergence = nullptr;  // the first first_divergence_step logged
};
PointNumbers point_numbers(const std::string& run_dir) {
  PointNumbers n;
  for (const auto& r : read_metrics(run_dir)) {
    if (r.contains("loss") && r["loss"].is_number()) n.train_loss = r["loss"].get<double>();
    if (r.contains("loss") && r["loss"].is_string()) n.train_loss = NAN;
    if (r.contains("val_loss") && r["val_loss"].is_number()) n.val_loss = r["val_loss"].get<double>();
    if (r.contains("first_divergence_step") && n.divergence.is_null()) n.divergence = r["first_divergence_step"];
    n.last_step = std::max<int64_t>(n.last_step, r.value("step", int64_t(0)));
  }
  return n;
}

// One row per point, one column per evaluation mode and length: L=128 (the first mode),
// s:L=128 (sliding).
std::string summary_table(const SweepSpec& spec, const std::vector<nlohmann::json>& records) {
  std::string t = fmt::format("{:<4} {:<44} {:>7} {:>10} {:>10} {:>6}", "#", "point", "status", "train", "val", "div");
  for (const auto& mode : spec.eval_modes)
    for (int64_t L : spec.eval_lengths)
      t += fmt::format(" {:>9}", fmt::format("{}L={}", mode == spec.eval_modes.front() ? "" : mode.substr(0, 1) + ":", L));
  t += "\n";
  auto f = [](const nlohmann::json& v) {
    return v.is_number() ? fmt::format("{:.4f}", v.get<double>()) : std::string("-");
  };
  for (const auto& r : records) {
    if (r.is_null()) continue;
    t += fmt::format("{:<4} {:<44} {:>7} {:>10} {:>10} {:>6}", r["index"].get<int64_t>(), r["name"].get<std::string>(),
                     r["status"].get<std::string>(), f(r["final_train_loss"]), f(r["final_val_loss"]),
                     r["first_divergence_step"].is_null() ? "-" : r["first_divergence_step"].dump());
    if (r.contains("eval"))
      for (const auto& e : r["eval"]) t += fmt::format(" {:>9}", f(e["loss"]));
    t += "\n";
  }
  // Each failed point's reason under the table (the table's row only says "failed").
  for (const auto& r : records)
    if (!r.is_null() && r.value("status", "") == "failed")
      t += fmt::format("failed: #{} {}: {}\n", r["index"].get<int64_t>(), r["name"].get<std::string>(),
                       r.contains("error") && r["error"].is_string() ? r["error"].get<std::string>()
                                                                      : std::string("(no reason recorded)"));
  return t;
}

// run_sweep in phases: the constructor writes sweep.json, reads what earlier runs finished and
// opens this process's index file; run() starts opt.jobs workers that take the selected points
// in order (skip a finished one, else run_point: train or resume it, evaluate it, append its
// record to the index).
class SweepRunner {
 public:
  SweepRunner(const SweepSpec& spec, const SweepOptions& opt);
  SweepResult run();

 private:
  void say(const std::string& s) const {
    if (opt_.log) opt_.log(s);
  }
  void worker();
  bool skip_if_done(const SweepPoint& pt);
  void run_point(const SweepPoint& pt);
  TrainOptions train_options(const SweepPoint& pt, const std::string& run_dir, const Config& cfg, nlohmann::json& rec);
  void record(const SweepPoint& pt, nlohmann::json rec, const std::string& status, const PointNumbers& n);
  void progress();  // under mu_

  const SweepSpec& spec_;
  const SweepOptions& opt_;
  const std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  const std::string dir_;
  const std::vector<int64_t> sel_;
  std::map<std::string, nlohmann::json> done_;  // points finished by any earlier run, shard or point
  const std::string index_path_;
  std::ofstream index_;
  int jobs_ = 1, per_job_ = 1;
  std::mutex mu_;  // the index file, the log, the counters, records_
  SweepResult res_;
  std::vector<nlohmann::json> records_;
  std::atomic<size_t> next_{0};
  int64_t finished_ = 0;
  std::exception_ptr first_error_;
};

SweepRunner::SweepRunner(const SweepSpec& spec, const SweepOptions& opt)
    : spec_(spec),
      opt_(opt),
      dir_(opt.dir.empty() ? spec.dir : opt.dir),
      sel_(selected_points(spec, opt)),
      index_path_((fs::path(dir_) / sweep_index_name(opt)).string()),
      records_(spec.points.size()) {
  fs::create_directories(dir_);
  write_sweep_meta(spec_, dir_);
  for (auto& j : read_sweep_index(dir_))
    if (j.value("status", "") == "done") {
      const std::string name = j["name"].get<std::string>();
      done_[name] = std::move(j);
    }
  index_.open(index_path_, std::ios::app);
  RELPOS_CHECK(index_.good(), "sweep: cannot open '{}' for appending", index_path_);
  const int total_threads = opt_.threads > 0 ? opt_.threads : k::num_threads();
  jobs_ = std::max(1, std::min<int>(opt_.jobs, int(sel_.size())));
  per_job_ = std::max(1, total_threads / jobs_);
}

SweepResult SweepRunner::run() {
  const std::string share = opt_.point >= 0        ? fmt::format("point {} of {}", opt_.point, spec_.points.size())
                            : opt_.shard_count > 1 ? fmt::format("shard {}/{}: {} of {} points", opt_.shard_index,
                                                                 opt_.shard_count, sel_.size(), spec_.points.size())
                                                   : fmt::format("{} points", spec_.points.size());
  say(fmt::format("sweep: {} in {} ({} at a time, {} threads each), index {}", share, dir_, jobs_, per_job_,
                  sweep_index_name(opt_)));
  if (jobs_ == 1) {
    worker();
  } else {
    std::vector<std::thread> ts;
    for (int j = 0; j < jobs_; ++j) ts.emplace_back([this] { worker(); });
    for (auto& t : ts) t.join();
  }
  if (first_error_) std::rethrow_exception(first_error_);
  res_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  res_.records = records_;
  res_.index_file = index_path_;
  res_.summary = summary_table(spec_, records_);
  return res_;
}

void SweepRunner::worker() {
  k::set_num_threads(per_job_);  // OpenMP's thread count is per calling thread
  for (;;) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (first_error_) return;
    }
    const size_t k = next_.fetch_add(1);
    if (k >= sel_.size()) return;
    const SweepPoint& pt = spec_.points[size_t(sel_[k])];
    if (skip_if_done(pt)) continue;
    try {
      if (opt_.before_point) opt_.before_point(pt);
      run_point(pt);
    } catch (...) {
      std::lock_guard<std::mutex> l(mu_);
      if (!first_error_) first_error_ = std::current_exception();
      return;
    }
  }
}

bool SweepRunner::skip_if_done(const SweepPoint& pt) {
  std::lock_guard<std::mutex> l(mu_);
  const auto it = done_.find(pt.name);
  if (it == done_.end()) return false;
  records_[size_t(pt.index)] = it->second;
  records_[size_t(pt.index)]["index"] = pt.index;  // the spec may have grown since
  ++res_.skipped;
  ++finished_;
  say(fmt::format("[{}] already done, skipped", pt.name));
  return true;
}

// How the point trains: its log lines prefixed with its name; resumed from its last checkpoint
// (recorded in rec), or started again in its own directory when an earlier attempt stopped
// before its first checkpoint (Ctrl-C; the run-directory lock keeps out another process).
TrainOptions SweepRunner::train_options(const SweepPoint& pt, const std::string& run_dir, const Config& cfg,
                                        nlohmann::json& rec) {
  TrainOptions to;
  to.log = [this, name = pt.name](const std::string& s) {
    std::lock_guard<std::mutex> l(mu_);
    say(fmt::format("[{}] {}", name, s));
  };
  if (opt_.train_hook) to.after_backward = [this, pt](int64_t step, nn::Model&) { opt_.train_hook(pt, step); };
  int64_t ck_step = 0;
  if (auto ck = list_checkpoints(run_dir); !ck.empty()) ck_step = ck.back().first;
  if (ck_step > 0 && ck_step < cfg.train.steps) {
    to.resume = run_dir;
    rec["resumed_from"] = ck_step;
  } else if (ck_step == 0) {
    to.overwrite = true;
  }
  return to;
}

void SweepRunner::run_point(const SweepPoint& pt) {
  const std::string run_dir = dir_ + "/" + pt.dir_name;
  std::vector<std::string> ov = spec_.base_overrides;
  ov.insert(ov.end(), pt.overrides.begin(), pt.overrides.end());
  ov.push_back("output.dir=" + run_dir);
  if (jobs_ > 1 || opt_.threads > 0) ov.push_back(fmt::format("train.threads={}", per_job_));
  if (spec_.checkpoint_every > 0) ov.push_back(fmt::format("train.checkpoint_every={}", spec_.checkpoint_every));
  const Config cfg = parse_config(spec_.base_yaml, spec_.source + " (point " + pt.name + ")", ov);
  nlohmann::json grid = nlohmann::json::object();
  for (auto& [k, v] : pt.grid) grid[k] = v;
  nlohmann::json rec = {{"index", pt.index}, {"name", pt.name},     {"run_dir", run_dir},
                        {"grid", grid},      {"recipe", pt.recipe}, {"overrides", pt.overrides}};
  const auto p0 = std::chrono::steady_clock::now();
  const TrainOptions to = train_options(pt, run_dir, cfg, rec);
  std::string status = "done";
  const bool finished_before = !to.resume && !to.overwrite;  // its last checkpoint is at train.steps
  if (!finished_before) {
    try {
      train(cfg, to);
    } catch (const Error& e) {  // e.g. a non-finite loss with nan_policy abort: a result, not a crash
      // ...or no training at all (a run directory locked by another process, a device that is
      // not there, a config the point cannot run): the reason is in the record and printed.
      status = "failed";
      rec["error"] = e.what();
    }
  }
  const PointNumbers n = point_numbers(run_dir);
  if (status == "done" && !spec_.eval_lengths.empty()) rec["eval"] = evaluate_point(spec_, run_dir);
  rec["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count();
  record(pt, std::move(rec), status, n);
}

// Appends the point's record to this process's index file (a full disk is an error: the
// result would be lost silently) and reports it.
void SweepRunner::record(const SweepPoint& pt, nlohmann::json rec, const std::string& status, const PointNumbers& n) {
  rec["status"] = status;
  rec["steps"] = n.last_step;
  rec["final_train_loss"] = num_or_null(n.train_loss);
  rec["final_val_loss"] = num_or_null(n.val_loss);
  rec["first_divergence_step"] = n.divergence;
  rec["finished_at"] =
      double(std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                 .count()) /
      1e3;
  std::lock_guard<std::mutex> l(mu_);
  index_ << rec.dump() << "\n";
  index_.flush();
  if (!index_.good())
    fail("sweep: cannot append point '{}' to the index {}: {}", pt.name, index_path_, std::strerror(errno));
  records_[size_t(pt.index)] = rec;
  ++res_.ran;
  if (status == "failed") ++res_.failed;
  ++finished_;
  if (status == "failed")  // the reason first: a point that never trained has no losses to show
    say(fmt::format("[{}] failed: {} ({:.1f} s)", pt.name, rec.value("error", std::string("(no reason recorded)")),
                    rec["seconds"].get<double>()));
  else
    say(fmt::format("[{}] {}: train loss {:.4f}, val loss {:.4f}{} ({:.1f} s)", pt.name, status, n.train_loss,
                    n.val_loss,
                    n.divergence.is_null() ? "" : fmt::format(", first divergence at step {}", n.divergence.dump()),
                    rec["seconds"].get<double>()));
  progress();
}

void SweepRunner::progress() {
  const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  const int64_t ran = res_.ran;
  const int64_t left = int64_t(sel_.size()) - finished_;
  const double eta = ran > 0 ? el / double(ran) * double(left) / double(jobs_) : 0.0;
  say(fmt::format("sweep: {}/{} points finished ({} skipped), {:.0f} s elapsed{}", finished_, sel_.size(), res_.skipped,
                  el, ran > 0 && left > 0 ? fmt::format(", ETA {:.0f} s", eta) : ""));
}

}  // namespace

SweepResult run_sweep(const SweepSpec& spec, const SweepOptions& opt) {
  return SweepRunner(spec, opt).run();
}

}  // namespace relpos::train
