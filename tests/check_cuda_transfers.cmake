# tests/check_cuda_transfers.cmake — the ctest `cuda_transfers_are_counted` (runs on every
# build, no GPU needed): every host<->device copy and every host wait of relpos goes through
# the counted functions of core/cuda_runtime.cu (copy_to_device, copy_to_host,
# copy_device_to_device, synchronize: transfer_stats() counts them), and the CUDA backend's
# entry points (kernels/cuda/*.cpp) read nothing back to the host. Fails naming file:line of
#   - a CUDA runtime copy, memset or wait (cudaMemcpy*, cudaMemset*, *Synchronize, pinned
#     allocations) outside core/cuda_runtime.cu, in core/, kernels/, autograd/, nn/,
#     trainers/ or cli/;
#   - a host read (to_vector, item(), .to(Device::CPU), a host-built upload with .to(Device::CUDA))
#     in kernels/cuda/*.cpp: bounds checks belong on the device (core/cuda_runtime.h,
#     begin_device_check).
# Comments (// to the end of the line) are not searched.
if(NOT DEFINED SOURCE_DIR)
  message(FATAL_ERROR "check_cuda_transfers.cmake: -DSOURCE_DIR=... is required")
endif()
set(runtime_calls "cuda(Memcpy|Memset|DeviceSynchronize|StreamSynchronize|EventSynchronize|MallocHost|HostAlloc|FreeHost)")
set(host_reads "(to_vector|\\.item\\(\\)|Device::CPU|to\\(Device::CUDA\\))")
set(found "")

# Lines of `file` (relative path rel) matching `pattern` outside comments, as "rel:line: text".
function(scan file rel pattern)
  file(STRINGS "${file}" hits REGEX "${pattern}")
  if(NOT hits)
    return()
  endif()
  file(READ "${file}" text)
  # characters that would break the list of lines: ';' separates, '\' escapes, '[' ']' group
  string(REPLACE ";" "," text "${text}")
  string(REPLACE "\\" "/" text "${text}")
  string(REPLACE "[" "(" text "${text}")
  string(REPLACE "]" ")" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(n 0)
  set(out "")
  foreach(line IN LISTS lines)
    math(EXPR n "${n} + 1")
    string(REGEX REPLACE "//.*$" "" code "${line}")
    if(code MATCHES "${pattern}")
      string(STRIP "${line}" shown)
      list(APPEND out "${rel}:${n}: ${shown}")
    endif()
  endforeach()
  set(found ${found} ${out} PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE sources RELATIVE "${SOURCE_DIR}"
     "${SOURCE_DIR}/core/*" "${SOURCE_DIR}/kernels/*" "${SOURCE_DIR}/autograd/*" "${SOURCE_DIR}/nn/*"
     "${SOURCE_DIR}/trainers/*" "${SOURCE_DIR}/experiments/*" "${SOURCE_DIR}/cli/*")
set(checked 0)
foreach(rel IN LISTS sources)
  if(NOT rel MATCHES "\\.(cpp|h|cu|cuh)$" OR rel STREQUAL "core/cuda_runtime.cu")
    continue()
  endif()
  math(EXPR checked "${checked} + 1")
  scan("${SOURCE_DIR}/${rel}" "${rel}" "${runtime_calls}")
  if(rel MATCHES "^kernels/cuda/[^/]*\\.cpp$")
    scan("${SOURCE_DIR}/${rel}" "${rel}" "${host_reads}")
  endif()
endforeach()
if(checked LESS 50)
  message(FATAL_ERROR "check_cuda_transfers.cmake: only ${checked} sources under ${SOURCE_DIR}")
endif()
if(found)
  list(JOIN found "\n  " shown)
  message(FATAL_ERROR "uncounted host<->device transfers or host reads on the CUDA path (route them through "
                      "core/cuda_runtime.h's counted copies; check indices on the device):\n  ${shown}")
endif()
message(STATUS "${checked} sources: every CUDA copy and wait goes through core/cuda_runtime.cu")
