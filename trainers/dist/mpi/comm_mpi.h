// trainers/dist/mpi/comm_mpi.h — the MPI communicator (OpenMPI from Debian, or any MPI-3 library).
// Built only when CMake finds MPI (RELPOS_MPI); linked into the `relpos` executable, not into
// the installed library, so library users do not inherit an MPI dependency.
#pragma once

#include <memory>
#include <string>

#include "trainers/dist/comm.h"

namespace relpos::train {

// Initialises MPI (MPI_THREAD_FUNNELED: OpenMP threads never call MPI) on first use and
// finalises it at exit. Call only when the process was started by an MPI launcher.
std::unique_ptr<Communicator> make_mpi_communicator();

// The MPI library's version line (first line of MPI_Get_library_version), without initialising MPI.
std::string mpi_library_version();

}  // namespace relpos::train
