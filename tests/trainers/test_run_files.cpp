// Run directories and the files relpos reads: one process at a time per run
// directory (an advisory lock, named in the error), no output.dir inside another run's
// checkpoints, and every file read is a bounded read of a regular file — a FIFO, a device or an
// endless file is refused with its path and kind before anything is read or written.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "trainers/io/checkpoint.h"
#include "trainers/io/file_io.h"
#include "experiments/sweep.h"
#include "trainers/trainer.h"

using namespace relpos;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

std::string tmp(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("run_files_" + name);
  fs::remove_all(d);
  return d.string();
}

train::Config tiny(const std::string& dir, int64_t steps = 4) {
  return train::parse_config("model: {d_model: 16, n_layers: 1, n_heads: 2, d_ff: 32, position: {type: t5}}\n"
                             "data: {task: copy, vocab_size: 6, seq_len: 3, batch_size: 4}\n"
                             "train: {steps: " + std::to_string(steps) +
                                 ", eval_every: 2, eval_batches: 1, checkpoint_every: 2}\noutput: {dir: " + dir + "}\n",
                             "test.yaml");
}

}  // namespace

TEST_CASE("run directory: a second process on a locked run stops, naming the directory and the holder", "[trainer][lock]") {
  const std::string dir = tmp("locked");
  fs::create_directories(dir);
  {
    DirLock held(dir, "run directory");  // another process holds it (flock conflicts per open file)
    REQUIRE_THROWS_WITH(train::train(tiny(dir)), Contains(dir) && Contains("in use by another relpos process") &&
                                                     Contains("pid " + std::to_string(::getpid())));
    REQUIRE_FALSE(fs::exists(dir + "/metrics.jsonl"));  // nothing written by the refused run
  }
  // released: the run trains, and a --resume of it is locked the same way while held
  REQUIRE(train::train(tiny(dir)).steps_done >= 0);
  DirLock held(dir, "run directory");
  train::TrainOptions opt;
  opt.resume = dir;
  REQUIRE_THROWS_WITH(train::train(tiny(dir, 6), opt), Contains("in use by another relpos process"));
}

TEST_CASE("run directory: the lock file of a finished run does not make a directory look used", "[trainer][lock]") {
  const std::string dir = tmp("lock_only");
  fs::create_directories(dir);
  { DirLock l(dir, "run directory"); }
  REQUIRE(fs::exists(dir + "/" + DirLock::kFileName));
  REQUIRE_NOTHROW(train::train(tiny(dir)));
}

TEST_CASE("run directory: output.dir inside another run's checkpoints is refused", "[trainer][lock]") {
  const std::string run = tmp("outer");
  train::train(tiny(run));
  const std::string inner = run + "/checkpoints/step_00000002/nested";
  REQUIRE_THROWS_WITH(train::train(tiny(inner)), Contains("inside the checkpoints of the run") && Contains("outer"));
  REQUIRE_NOTHROW(train::load_run(run));  // the outer run still loads
}

TEST_CASE("file reads: FIFOs, devices and endless files are refused with path and kind", "[trainer][files]") {
  const std::string dir = tmp("special");
  fs::create_directories(dir);
  const std::string fifo = dir + "/fifo.yaml";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  // would block forever in open() or read() without a writer
  REQUIRE_THROWS_WITH(train::load_config(fifo), Contains(fifo) && Contains("FIFO"));
  REQUIRE_THROWS_WITH(train::load_config("/dev/zero"), Contains("/dev/zero") && Contains("character device"));
  fs::create_symlink("/dev/urandom", dir + "/random.yaml");
  REQUIRE_THROWS_WITH(train::load_config(dir + "/random.yaml"), Contains("character device"));
  REQUIRE_THROWS_WITH(train::load_sweep_spec(fifo), Contains(fifo) && Contains("FIFO"));
  // data.path
  auto c = tiny(tmp("fifo_data"));
  c.data.task = "text";
  c.data.path = fifo;
  REQUIRE_THROWS_WITH(train::train(c), Contains(fifo) && Contains("FIFO"));
  // a size cap while reading, not only from the size the file claims
  REQUIRE_THROWS_WITH(read_whole_file("/dev/zero", "test file", 1024), Contains("character device"));
  const std::string big = dir + "/big.txt";
  std::ofstream(big) << std::string(4096, 'a');
  REQUIRE_THROWS_WITH(read_whole_file(big, "test file", 1024), Contains("4096 bytes") && Contains("1024"));
  REQUIRE(read_whole_file(big, "test file", 4096).size() == 4096);
}

TEST_CASE("file reads: --resume with metrics.jsonl replaced by an endless device fails and keeps the run", "[trainer][files]") {
  const std::string run = tmp("endless_metrics");
  train::train(tiny(run, 4));
  fs::remove(run + "/metrics.jsonl");
  fs::create_symlink("/dev/zero", run + "/metrics.jsonl");
  train::TrainOptions opt;
  opt.resume = run;
  REQUIRE_THROWS_WITH(train::train(tiny(run, 6), opt), Contains("metrics.jsonl") && Contains("character device"));
  REQUIRE(fs::is_symlink(run + "/metrics.jsonl"));  // not silently replaced
  REQUIRE(fs::exists(checkpoint_dir(run, 4)));
}
