// trainers/io/checkpoint.cpp — see checkpoint.h.
#include "trainers/io/checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>

#include "core/error.h"
#include "trainers/io/file_io.h"

namespace relpos {

namespace {

namespace fs = std::filesystem;

constexpr const char* kCheckpointsDir = "checkpoints";
constexpr const char* kTmpPrefix = ".tmp-";

std::string step_name(int64_t step) { return fmt::format("step_{:08d}", step); }

// step_<digits> -> the step; anything else -> nullopt.
std::optional<int64_t> parse_step_name(const std::string& name) {
  const std::string prefix = "step_";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  std::string digits = name.substr(prefix.size());
  if (digits.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

// Move the finished temporary directory to `final_dir`. An existing final_dir is swapped out
// atomically when the file system supports RENAME_EXCHANGE; its old contents end up in `tmp`.
// Returns true when `tmp` now holds an old checkpoint to delete.
bool move_into_place(const fs::path& tmp, const fs::path& final_dir, const fs::path& parent) {
  std::error_code ec;
  if (!fs::exists(final_dir, ec)) {
    fs::rename(tmp, final_dir, ec);
    if (ec) fail("cannot rename '{}' to '{}': {}", tmp.string(), final_dir.string(), ec.message());
    return false;
  }
#ifdef RENAME_EXCHANGE
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) == 0)
    return true;
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
    fail("cannot swap '{}' into '{}': {}", tmp.string(), final_dir.string(), std::strerror(errno));
#endif
  // Fallback: move the old checkpoint aside (a crash here leaves no step_<S>, only .tmp-*
  // directories that the next save removes), then move the new one in.
  fs::path old = parent / (std::string(kTmpPrefix) + "old-" + final_dir.filename().string());
  fs::remove_all(old, ec);
  fs::rename(final_dir, old, ec);
  if (ec) fail("cannot move '{}' aside: {}", final_dir.string(), ec.message());
  fs::rename(tmp, final_dir, ec);
  if (ec) {
    std::error_code ec2;
    fs::rename(old, final_dir, ec2);  // put the old one back
    fail("cannot rename '{}' to '{}': {}", tmp.string(), final_dir.string(), ec.message());
  }
  fs::remove_all(old, ec);
  return false;
}

void write_json_file(const fs::path& path, const nlohmann::json& j) {
  std::string text;
  try {
    text = j.dump(2) + "\n";
  } catch (const nlohmann::json::exception& e) {
    fail("cannot encode '{}' (strings must be valid UTF-8): {}", path.string(), e.what());
  }
  OutputFile f(path.string());
  f.write(text);
  f.close_synced();
}

void prune(const fs::path& ckdir, const std::string& run_dir, int64_t saved_step, int keep_last) {
  if (keep_last <= 0) return;
  std::vector<std::pair<int64_t, std::string>> older;
  for (auto& [s, p] : list_checkpoints(run_dir))
    if (s <= saved_step) older.emplace_back(s, p);
  std::sort(older.begin(), older.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = size_t(keep_last); i < older.size(); ++i) {
    // Renamed out of the step_* namespace first (atomic), then deleted: a kill -9 in the
    // middle of remove_all leaves a .tmp-* leftover, never a half-deleted step_<S>.
    std::error_code ec;
    const fs::path victim = ckdir / (std::string(kTmpPrefix) + "prune-" + fs::path(older[i].second).filename().string());
    fs::rename(older[i].second, victim, ec);
    if (!ec) fsync_directory(ckdir.string());
    fs::remove_all(ec ? fs::path(older[i].second) : victim, ec);
    if (ec)
      fail("checkpoint of step {} saved, but removing the old checkpoint '{}' failed: {}", saved_step,
           older[i].second, ec.message());
  }
  fsync_directory(ckdir.string());
}

}  // namespace

std::string checkpoint_dir(const std::string& run_dir, int64_t step) {
  return (fs::path(run_dir) / kCheckpointsDir / step_name(step)).string();
}

std::string save_checkpoint(const std::string& run_dir, int64_t step, const Checkpoint& ckpt,
                            int keep_last) {
  RELPOS_CHECK(step >= 0, "save_checkpoint: step must be >= 0, got {}", step);
  const fs::path ckdir = fs::path(run_dir) / kCheckpointsDir;
  const fs::path final_dir = ckdir / step_name(step);
  const fs::path tmp = ckdir / (std::string(kTmpPrefix) + step_name(step));
  std::error_code ec;
  fs::create_directories(ckdir, ec);
  if (ec) fail("save_checkpoint: cannot create directory '{}': {}", ckdir.string(), ec.message());

  // Leftovers of crashed saves (best effort: a leftover that cannot be removed is harmless,
  // unless it is our own temporary name, which create_directory reports below).
  try {
    std::vector<fs::path> leftovers;
    for (const auto& entry : fs::directory_iterator(ckdir))
      if (entry.path().filename().string().rfind(kTmpPrefix, 0) == 0) leftovers.push_back(entry.path());
    for (const auto& p : leftovers) fs::remove_all(p, ec);
  } catch (const fs::filesystem_error&) {
  }

  bool old_in_tmp = false;
  try {
    fs::create_directory(tmp, ec);
    if (ec) fail("cannot create directory '{}': {}", tmp.string(), ec.message());
    const std::map<std::string, std::string> md = {{"format", "relpos-checkpoint"},
                                                   {"step", std::to_string(step)}};
    write_safetensors((tmp / kModelFile).string(), ckpt.model, md, /*require_finite=*/true);
    write_safetensors((tmp / kOptimizerFile).string(), ckpt.optimizer, md, /*require_finite=*/true);
    write_json_file(tmp / kTrainerStateFile, ckpt.state);
    fsync_directory(tmp.string());
    old_in_tmp = move_into_place(tmp, final_dir, ckdir);
    fsync_directory(ckdir.string());
  } catch (const std::exception& e) {
    // tmp holds the partial new checkpoint, or (after a swap) the replaced old one.
    std::error_code ec2;
    fs::remove_all(tmp, ec2);
    fail("save_checkpoint '{}' (step {}) failed: {}", final_dir.string(), step, e.what());
  }
  if (old_in_tmp) fs::remove_all(tmp, ec);  // the replaced checkpoint of the same step
  prune(ckdir, run_dir, step, keep_last);
  return final_dir.string();
}

namespace {
void check_complete(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) fail("checkpoint '{}' does not exist", dir);
  if (!fs::is_directory(dir, ec)) fail("checkpoint '{}' is not a directory", dir);
  for (const char* f : {kModelFile, kOptimizerFile, kTrainerStateFile})
    if (!fs::exists(fs::path(dir) / f, ec)) fail("checkpoint '{}' is incomplete: {} is missing", dir, f);
}
}  // namespace

nlohmann::json load_checkpoint_state(const std::string& dir) {
  check_complete(dir);
  const std::string state_path = (fs::path(dir) / kTrainerStateFile).string();
  std::string text = read_whole_file(state_path, "trainer state", 64u << 20);
  nlohmann::json state;
  try {
    state = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("trainer state '{}' is not valid JSON: {}", state_path, e.what());
  }
  if (!state.is_object()) fail("trainer state '{}' is not a JSON object", state_path);
  return state;
}

void load_checkpoint_tensors(const std::string& dir, const NamedTensors& model_like, uint64_t optimizer_max_bytes,
                             Checkpoint& out) {
  check_complete(dir);
  SafetensorsExpect m;
  m.require_finite = true;
  m.like = &model_like;
  out.model = read_safetensors((fs::path(dir) / kModelFile).string(), nullptr, m);
  SafetensorsExpect o;
  o.require_finite = true;
  o.max_data_bytes = optimizer_max_bytes;
  out.optimizer = read_safetensors((fs::path(dir) / kOptimizerFile).string(), nullptr, o);
}

Checkpoint load_checkpoint(const std::string& dir) {
  Checkpoint c;
  c.state = load_checkpoint_state(dir);
  SafetensorsExpect finite;
  finite.require_finite = true;
  c.model = read_safetensors((fs::path(dir) / kModelFile).string(), nullptr, finite);
  c.optimizer = read_safetensors((fs::path(dir) / kOptimizerFile).string(), nullptr, finite);
  return c;
}

std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& run_dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  const fs::path ckdir = fs::path(run_dir) / kCheckpointsDir;
  std::error_code ec;
  if (!fs::is_directory(ckdir, ec)) return out;
  try {
    for (const auto& entry : fs::directory_iterator(ckdir)) {
      std::error_code ec2;
      if (!entry.is_directory(ec2)) continue;
      if (auto s = parse_step_name(entry.path().filename().string()))
        out.emplace_back(*s, entry.path().string());
    }
  } catch (const fs::filesystem_error& e) {
    fail("cannot list checkpoints in '{}': {}", ckdir.string(), e.what());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<std::string> latest_checkpoint(const std::string& run_dir) {
  auto all = list_checkpoints(run_dir);
  if (all.empty()) return std::nullopt;
  return all.back().second;
}

}  // namespace relpos
