/* ipc.cu — CUDA IPC memory for frames that another process holds on the GPU (gpu/ipc.h).
 *
 * A thin layer over cudaIpcGetMemHandle / cudaIpcOpenMemHandle that adds what a daemon
 * facing other processes needs: devices by UUID, and the real size of an opened
 * allocation (cuMemGetAddressRange, reached through the runtime's driver entry point so
 * that nothing links libcuda directly), because a producer's claimed size cannot be
 * trusted. Handles are opened with lazy peer access, so a GPU other than the holder may
 * read them where the two are peers.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "gpu/cuda/cuda_state.cuh"
#include "gpu/cuda/cuda_backend.h"

static tl_status fail(tl_errbuf *eb, char *why, size_t why_len, tl_status st)
{
    if (why && why_len)
        snprintf(why, why_len, "%s", eb->msg);
    return st;
}

/* Runs body (a block using TL_CUDA(&eb, ...)) and copies a failure into why. */
#define TL_IPC_RUN(body)                                             \
    do {                                                             \
        tl_errbuf eb_;                                               \
        eb_.msg[0] = 0;                                              \
        tl_status st_ = [&](tl_errbuf *eb) -> tl_status {            \
            body;                                                    \
            return TL_OK;                                            \
        }(&eb_);                                                     \
        return st_ == TL_OK ? TL_OK : fail(&eb_, why, why_len, st_); \
    } while (0)

void tl_cuda_format_uuid(const cudaUUID_t *u, char *out)
{
    char *p = out + sprintf(out, "GPU-");
    for (int i = 0; i < 16; i++)
        p += sprintf(p, "%s%02x", i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "",
                     (unsigned char)u->bytes[i]);
}

extern "C" tl_status tl_cuda_ipc_device_uuid(int device, char *uuid, char *why, size_t why_len)
{
    TL_IPC_RUN({
        cudaDeviceProp p;
        TL_CUDA(eb, cudaGetDeviceProperties(&p, device));
        tl_cuda_format_uuid(&p.uuid, uuid);
    });
}

extern "C" tl_status tl_cuda_ipc_device_ordinal(const char *uuid, int *device, char *why,
                                                size_t why_len)
{
    TL_IPC_RUN({
        int n = 0;
        TL_CUDA(eb, cudaGetDeviceCount(&n));
        for (int d = 0; d < n; d++) {
            cudaDeviceProp p;
            char u[TL_CUDA_IPC_UUID_LEN + 1];
            TL_CUDA(eb, cudaGetDeviceProperties(&p, d));
            tl_cuda_format_uuid(&p.uuid, u);
            if (strcasecmp(u, uuid) == 0) {
                *device = d;
                return TL_OK;
            }
        }
        return tl_fail(eb, TL_ENOTFOUND, "no visible GPU has the UUID %.40s (%d devices seen)",
                       uuid, n);
    });
}

/* cuMemGetAddressRange, looked up once. */
static PFN_cuMemGetAddressRange_v3020 address_range(void)
{
    static PFN_cuMemGetAddressRange_v3020 fn;
    static bool looked;
    if (!looked) {
        void *p = NULL;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &p, 3020, cudaEnableDefault,
                                             &q) == cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            fn = (PFN_cuMemGetAddressRange_v3020)p;
        else
            cudaGetLastError();
        looked = true;
    }
    return fn;
}

extern "C" tl_status tl_cuda_ipc_open(int device, const uint8_t handle[TL_CUDA_IPC_HANDLE_BYTES],
                                      void **ptr, size_t *bytes, char *why, size_t why_len)
{
    static_assert(sizeof(cudaIpcMemHandle_t) == TL_CUDA_IPC_HANDLE_BYTES, "IPC handle size");
    *ptr = NULL;
    TL_IPC_RUN({
        TL_CUDA(eb, cudaSetDevice(device));
        cudaIpcMemHandle_t h;
        memcpy(&h, handle, sizeof h);
        void *p = NULL;
        cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
        if (e != cudaSuccess) {
            cudaGetLastError();
            return tl_fail(eb, TL_EINVAL,
                           "the CUDA IPC handle does not open on device %d: %s (%s): forged, "
                           "freed by its producer, or exported by this process",
                           device, cudaGetErrorString(e), cudaGetErrorName(e));
        }
        PFN_cuMemGetAddressRange_v3020 range = address_range();
        CUdeviceptr base = 0;
        size_t size = 0;
        if (!range || range(&base, &size, (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS) {
            cudaIpcCloseMemHandle(p);
            return tl_fail(eb, TL_EDEVICE, "cuMemGetAddressRange on an opened IPC handle failed");
        }
        *bytes = size - (size_t)((uintptr_t)p - (uintptr_t)base);
        *ptr = p;
    });
}

extern "C" void tl_cuda_ipc_close(int device, void *ptr)
{
    if (!ptr)
        return;
    if (cudaSetDevice(device) != cudaSuccess || cudaIpcCloseMemHandle(ptr) != cudaSuccess)
        cudaGetLastError(); /* teardown: nothing more to do */
}

extern "C" tl_status tl_cuda_ipc_alloc(int device, size_t bytes, void **ptr,
                                       uint8_t handle[TL_CUDA_IPC_HANDLE_BYTES], char *why,
                                       size_t why_len)
{
    *ptr = NULL;
    TL_IPC_RUN({
        TL_CUDA(eb, cudaSetDevice(device));
        void *p = NULL;
        TL_CUDA(eb, cudaMalloc(&p, bytes ? bytes : 1));
        cudaIpcMemHandle_t h;
        cudaError_t e = cudaIpcGetMemHandle(&h, p);
        if (e != cudaSuccess) {
            cudaFree(p);
            return tl_cuda_fail_call(eb, e, "cudaIpcGetMemHandle", __FILE__, __LINE__);
        }
        memcpy(handle, &h, sizeof h);
        *ptr = p;
    });
}

extern "C" void tl_cuda_ipc_free(int device, void *ptr)
{
    if (!ptr)
        return;
    if (cudaSetDevice(device) != cudaSuccess || cudaFree(ptr) != cudaSuccess)
        cudaGetLastError();
}

extern "C" tl_status tl_cuda_ipc_copy(int device, void *dst, const void *src, size_t bytes,
                                      char *why, size_t why_len)
{
    TL_IPC_RUN({
        TL_CUDA(eb, cudaSetDevice(device));
        TL_CUDA(eb, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, 0));
        TL_CUDA(eb, cudaStreamSynchronize(0));
    });
}
