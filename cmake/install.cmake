# Install rules: headers under <prefix>/include/relpos/<layer>/, static (or shared, with
# BUILD_SHARED_LIBS) libraries, the relpos executable, and a CMake package exporting
# relpos::relpos (everything) plus relpos::core, ::kernels, ::autograd, ::nn, ::trainers, ::experiments.
#   cmake --install build --prefix /opt/relpos
#   find_package(relpos 0.1 REQUIRED)  +  target_link_libraries(app PRIVATE relpos::relpos)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# relpos::relpos — one name for the whole library stack.
add_library(relpos_all INTERFACE)
target_link_libraries(relpos_all INTERFACE relpos_experiments)
add_library(relpos::relpos ALIAS relpos_all)

set_target_properties(relpos_all PROPERTIES EXPORT_NAME relpos)
foreach(layer core kernels autograd nn trainers experiments)
  set_target_properties(relpos_${layer} PROPERTIES EXPORT_NAME ${layer})
endforeach()
set_target_properties(relpos_flags PROPERTIES EXPORT_NAME flags)

install(TARGETS relpos_flags relpos_core relpos_kernels relpos_autograd relpos_nn relpos_trainers relpos_experiments relpos_all
  EXPORT relposTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS relpos RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

foreach(layer core kernels autograd nn trainers experiments)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${layer}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/relpos/${layer}
          FILES_MATCHING PATTERN "*.h" PATTERN "*.inc")
endforeach()
install(FILES ${PROJECT_BINARY_DIR}/generated/relpos/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/relpos)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/relpos_torch DESTINATION ${CMAKE_INSTALL_DATADIR}/relpos/python
        PATTERN "__pycache__" EXCLUDE)

install(EXPORT relposTargets NAMESPACE relpos:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/relpos)
set(RELPOS_CONFIG_CUDA ${RELPOS_CUDA})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/relposConfig.cmake.in
  ${PROJECT_BINARY_DIR}/relposConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/relpos)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/relposConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/relposConfig.cmake ${PROJECT_BINARY_DIR}/relposConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/relpos)

# pkg-config (relpos.pc) for non-CMake builds: static libraries in link order plus their
# dependencies (BLAS, the CUDA runtime and libdl when built with CUDA).
string(REPLACE ";" " " RELPOS_PC_LIBS "${BLAS_LIBRARIES}")
if(RELPOS_DNNL_FOUND)
  string(APPEND RELPOS_PC_LIBS " ${RELPOS_DNNL_LIBRARY}")  # kernels/cpu/gemm.cpp
endif()
set(RELPOS_PC_DEFINES "")
if(RELPOS_CUDA)
  string(APPEND RELPOS_PC_LIBS " ${CUDA_cudart_LIBRARY} -ldl")  # cuBLAS: dlopen at first use (kernels/cuda/cublas_loader.cu)
  set(RELPOS_PC_DEFINES "-DRELPOS_WITH_CUDA=1")
endif()
file(RELATIVE_PATH RELPOS_PC_UP "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")  # relocatable: prefix from the .pc's place
string(REGEX REPLACE "/$" "" RELPOS_PC_UP "${RELPOS_PC_UP}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/relpos.pc.in ${PROJECT_BINARY_DIR}/relpos.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/relpos.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
