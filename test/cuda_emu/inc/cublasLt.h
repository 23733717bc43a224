/* test/cuda_emu/inc/cublasLt.h — stands in for cuBLASLt's header in test/cuda_emu/run.sh's host
 * builds (see cuda_runtime.h next to it): only the names cuda/cuda_common.cuh declares with (its
 * context's handle, CUBLAS_CHECK's status); none of the emulated kernels calls cuBLASLt. Test
 * harness only. */
#pragma once
typedef struct emu_cublaslt *cublasLtHandle_t;
typedef int cublasStatus_t;
enum { CUBLAS_STATUS_SUCCESS = 0 };
static inline const char *cublasLtGetStatusString(cublasStatus_t) { return "emulated cuBLASLt status"; }
