// The Catch2 (v2) main of relpos_tests: the test run happens inside a temporary directory owned by
// this process (tests/temp_root.h), removed with its contents when the process ends.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "temp_root.h"
#ifdef RELPOS_WITH_SENTENCEPIECE
#include "trainers/data/sentencepiece/sentencepiece.h"
#endif

int main(int argc, char** argv) {
  int rc = 0;
#ifdef RELPOS_WITH_SENTENCEPIECE
  relpos::train::register_sentencepiece();
#endif
  {
    relpos::test::TempRoot tmp;
    rc = Catch::Session().run(argc, argv);
  }
  return rc;
}
