/* check.cuh — CUDA and cuFFT failures as a tl_status plus a message naming the failing call
 * (ARCHITECTURE.md §3.7). Every runtime call, cuFFT call and kernel launch in gpu/cuda/
 * goes through one of these macros; nothing here prints or exits. They return from the
 * calling function, so use them in functions that return tl_status.
 *
 *   TL_CUDA(s->eb, cudaMemsetAsync(p, 0, n, s->stream));
 *   TL_CUFFT(s->eb, cufftExecR2C(plan, in, out));
 *   kernel<<<grid, block, 0, s->stream>>>(...);
 *   TL_CUDA_LAUNCHED(s->eb, "kernel");   // launch errors (bad configuration, no image)
 *
 * Errors of kernels that already ran asynchronously surface at the next call that waits
 * (an event or stream synchronisation); the message then names that call and the CUDA
 * error says what happened ("an illegal memory access was encountered").
 */
#ifndef TL_CUDA_CHECK_CUH
#define TL_CUDA_CHECK_CUH

#include <cuda_runtime.h>
#include <cufft.h>

#include "gpu/base/backend.h"

/* Formats "<call> failed: <error> [file:line]" into eb, clears CUDA's last (non-sticky)
 * error, and returns TL_ENOMEM for allocation failures, TL_EDEVICE otherwise. */
tl_status tl_cuda_fail_call(tl_errbuf *eb, cudaError_t e, const char *call, const char *file,
                            int line);
tl_status tl_cuda_fail_fft(tl_errbuf *eb, cufftResult r, const char *call, const char *file,
                           int line);

#define TL_CUDA(eb, call)                                                     \
    do {                                                                      \
        cudaError_t tl_e_ = (call);                                           \
        if (tl_e_ != cudaSuccess)                                             \
            return tl_cuda_fail_call((eb), tl_e_, #call, __FILE__, __LINE__); \
    } while (0)

#define TL_CUFFT(eb, call)                                                   \
    do {                                                                     \
        cufftResult tl_r_ = (call);                                          \
        if (tl_r_ != CUFFT_SUCCESS)                                          \
            return tl_cuda_fail_fft((eb), tl_r_, #call, __FILE__, __LINE__); \
    } while (0)

/* After every <<<...>>> launch: a launch that was refused reports here, by kernel name. */
#define TL_CUDA_LAUNCHED(eb, kernel_name)                                                        \
    do {                                                                                         \
        cudaError_t tl_e_ = cudaGetLastError();                                                  \
        if (tl_e_ != cudaSuccess)                                                                \
            return tl_cuda_fail_call((eb), tl_e_, "launch of " kernel_name, __FILE__, __LINE__); \
    } while (0)

/* Propagates a tl_status from a helper. */
#define TL_TRY(expr)               \
    do {                           \
        tl_status tl_st_ = (expr); \
        if (tl_st_ != TL_OK)       \
            return tl_st_;         \
    } while (0)

#endif
