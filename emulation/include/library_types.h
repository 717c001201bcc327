// linattn's stand-in for the CUDA toolkit's library_types.h in the emulation build: the element types
// the CUDA libraries take as arguments (cublasGemmEx's Atype, Btype, Ctype), with CUDA's values.
#pragma once

enum cudaDataType_t {
  CUDA_R_32F = 0,
  CUDA_R_64F = 1,
  CUDA_R_16F = 2,
  CUDA_R_16BF = 14,
};
typedef cudaDataType_t cudaDataType;
