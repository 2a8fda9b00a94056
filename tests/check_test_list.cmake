# tests/check_test_list.cmake — the ctest `test_list_matches_catch_cases`: every Catch2 case of
# relpos_tests is exactly one ctest entry, and every ctest entry runs exactly one Catch2 case.
#
# catch_discover_tests (Catch2 v2) splits a name containing ';' (a CMake list separator) into
# several ctest entries that name no real case; Catch then prints "No tests ran" and, without
# `-w NoTests`, exits 0, so the real case never runs while ctest counts passes. This check
# compares three lists:
#   1. the Catch2 cases:     relpos_tests --list-test-names-only
#   2. the ctest entries:    ctest -N --show-only=json-v1, those whose command is relpos_tests
#   3. per entry, the cases its own test spec (the argument ctest passes) selects: exactly one,
#      the entry's own name.
# Usage: cmake -DTESTS=<relpos_tests> -DBUILD_DIR=<build dir> -DCTEST=<ctest> -P check_test_list.cmake
cmake_minimum_required(VERSION 3.19)  # string(JSON)

foreach(v TESTS BUILD_DIR CTEST)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "check_test_list.cmake: -D${v}=... is required")
  endif()
endforeach()

# 1. Catch2's own list, one name per line (names never contain a newline).
execute_process(COMMAND "${TESTS}" --list-test-names-only
                OUTPUT_VARIABLE catch_out RESULT_VARIABLE catch_rc)
string(REPLACE ";" "<SEMICOLON>" catch_out "${catch_out}")
string(REGEX REPLACE "\n+$" "" catch_out "${catch_out}")
string(REPLACE "\n" ";" catch_cases "${catch_out}")
list(LENGTH catch_cases n_catch)
if(n_catch EQUAL 0)
  message(FATAL_ERROR "relpos_tests lists no test case (exit ${catch_rc})")
endif()

# 2. ctest's entries for relpos_tests.
execute_process(COMMAND "${CTEST}" -N --show-only=json-v1
                WORKING_DIRECTORY "${BUILD_DIR}" OUTPUT_VARIABLE json RESULT_VARIABLE ctest_rc)
if(NOT ctest_rc EQUAL 0)
  message(FATAL_ERROR "ctest -N --show-only=json-v1 failed in ${BUILD_DIR} (exit ${ctest_rc})")
endif()
string(JSON n_entries LENGTH "${json}" tests)
math(EXPR last "${n_entries} - 1")
set(entries "")
set(errors "")
get_filename_component(tests_name "${TESTS}" NAME)
foreach(i RANGE ${last})
  string(JSON name GET "${json}" tests ${i} name)
  string(JSON cmd_len ERROR_VARIABLE no_cmd LENGTH "${json}" tests ${i} command)
  if(no_cmd OR cmd_len LESS 2)
    continue()
  endif()
  string(JSON exe GET "${json}" tests ${i} command 0)
  get_filename_component(exe_name "${exe}" NAME)
  if(NOT exe_name STREQUAL tests_name)
    continue()
  endif()
  string(JSON spec GET "${json}" tests ${i} command 1)
  string(REPLACE ";" "<SEMICOLON>" name_escaped "${name}")
  list(APPEND entries "${name_escaped}")
  # 3. the spec ctest passes must select exactly this one case
  execute_process(COMMAND "${TESTS}" "${spec}" --list-test-names-only OUTPUT_VARIABLE sel)
  string(REGEX REPLACE "\n+$" "" sel "${sel}")
  string(REPLACE ";" "<SEMICOLON>" sel "${sel}")
  if(NOT sel STREQUAL name_escaped)
    string(REPLACE "\n" " | " sel_one_line "${sel}")
    string(APPEND errors "  ctest entry '${name}': its spec '${spec}' selects [${sel_one_line}], not exactly this case\n")
  endif()
endforeach()

list(LENGTH entries n_entries_tests)
foreach(c IN LISTS catch_cases)
  list(FIND entries "${c}" at)
  if(at EQUAL -1)
    string(REPLACE "<SEMICOLON>" ";" c_show "${c}")
    string(APPEND errors "  Catch2 case '${c_show}' has no ctest entry of its own (a ';' or other separator in its name?)\n")
  endif()
endforeach()
foreach(e IN LISTS entries)
  list(FIND catch_cases "${e}" at)
  if(at EQUAL -1)
    string(REPLACE "<SEMICOLON>" ";" e_show "${e}")
    string(APPEND errors "  ctest entry '${e_show}' is not a Catch2 case\n")
  endif()
endforeach()
if(NOT n_catch EQUAL n_entries_tests)
  string(APPEND errors "  ${n_catch} Catch2 cases but ${n_entries_tests} ctest entries run relpos_tests\n")
endif()
if(errors)
  message(FATAL_ERROR "the ctest entries do not match the Catch2 cases one to one:\n${errors}")
endif()
message(STATUS "${n_catch} Catch2 cases = ${n_entries_tests} ctest entries, each selecting exactly its own case")
