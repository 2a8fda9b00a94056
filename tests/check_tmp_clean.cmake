# tests/check_tmp_clean.cmake — the ctest `test_tmp_is_clean` (cleanup of the fixture relpos_tmp):
# after the Catch2 tests ran, their temporary folder (TMPDIR of every test process) is empty.
# A leftover is a test process that did not remove its own directory (tests/temp_root.h), e.g.
# one that crashed, or a file written outside the process's own directory.
if(NOT DEFINED DIR)
  message(FATAL_ERROR "check_tmp_clean.cmake: -DDIR=... is required")
endif()
file(GLOB left RELATIVE "${DIR}" "${DIR}/*" "${DIR}/.*")
if(left)
  list(JOIN left "\n  " shown)
  message(FATAL_ERROR "test processes left files in ${DIR}:\n  ${shown}")
endif()
message(STATUS "${DIR} is empty: every test removed what it created")
