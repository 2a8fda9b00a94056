// relpos data inspect FILE [--shard-vocab N] [--tokens N]
// A token file (relpos RPTOKENS or an llm.c shard, docs/data.md): its header, counts, example
// lengths, channel ranges (declared and found) and the first tokens, decoded when the file stores
// vocabulary strings. The whole file is verified (checksum, every token and channel value against
// the header) as it is read, streamed through a memory mapping.
#include <fmt/format.h>

#include "cli/command.h"
#include "trainers/data/token_file.h"

namespace relpos::cli {
namespace {

struct Args {
  std::string file;
  uint64_t shard_vocab = 0;
  int64_t tokens = 32;
};

int inspect(const Args& a) {
  const train::TokenFile f(a.file, a.shard_vocab);
  if (f.info().file_bytes > train::kVerifyOnOpenBytes) f.verify();  // smaller files were verified when opened
  fmt::print("{}", train::describe_token_file(f, a.tokens));
  return 0;
}

Action setup(CLI::App& cmd) {
  cmd.require_subcommand(1);
  auto a = std::make_shared<Args>();
  CLI::App* ins = cmd.add_subcommand("inspect", "header, counts, channel ranges and a decoded sample of a token file");
  ins->add_option("file", a->file, "a relpos token file (.rptok) or an llm.c shard (.bin)")->required();
  ins->add_option("--shard-vocab", a->shard_vocab, "an llm.c shard's vocabulary size (default: by its magic)");
  ins->add_option("--tokens", a->tokens, "how many leading tokens to show")->check(CLI::NonNegativeNumber);
  return [a](Context&) { return inspect(*a); };
}

}  // namespace

Command data_command() { return {"data", "prepared token files: `relpos data inspect FILE`", setup}; }

}  // namespace relpos::cli
