/* ipc.c — gpu/ipc.h: the CUDA backend's IPC (gpu/cuda/ipc.cu) where the build has CUDA;
 * elsewhere every call says that it cannot be done. */
#include <config.h>

#include <stdio.h>

#include "gpu/ipc.h"

#ifdef HAVE_CUDA
#include "gpu/cuda/cuda_backend.h"

_Static_assert(TL_IPC_HANDLE_BYTES == TL_CUDA_IPC_HANDLE_BYTES, "IPC handle size");
_Static_assert(TL_IPC_UUID_LEN == TL_CUDA_IPC_UUID_LEN, "device UUID length");

tl_status tl_ipc_device_uuid(int device, char *uuid, char *why, size_t why_len)
{
    return tl_cuda_ipc_device_uuid(device, uuid, why, why_len);
}

tl_status tl_ipc_device_ordinal(const char *uuid, int *device, char *why, size_t why_len)
{
    return tl_cuda_ipc_device_ordinal(uuid, device, why, why_len);
}

tl_status tl_ipc_open(int device, const uint8_t handle[TL_IPC_HANDLE_BYTES], void **ptr,
                      size_t *bytes, char *why, size_t why_len)
{
    return tl_cuda_ipc_open(device, handle, ptr, bytes, why, why_len);
}

void tl_ipc_close(int device, void *ptr)
{
    tl_cuda_ipc_close(device, ptr);
}

tl_status tl_ipc_alloc(int device, size_t bytes, void **ptr, uint8_t handle[TL_IPC_HANDLE_BYTES],
                       char *why, size_t why_len)
{
    return tl_cuda_ipc_alloc(device, bytes, ptr, handle, why, why_len);
}

void tl_ipc_free(int device, void *ptr)
{
    tl_cuda_ipc_free(device, ptr);
}

tl_status tl_ipc_copy(int device, void *dst, const void *src, size_t bytes, char *why,
                      size_t why_len)
{
    return tl_cuda_ipc_copy(device, dst, src, bytes, why, why_len);
}
#else
static tl_status no_cuda(char *why, size_t why_len)
{
    if (why && why_len)
        snprintf(why, why_len,
                 "frames in GPU memory need CUDA, and this build has none "
                 "(configure --with-cuda)");
    return TL_EUNSUPPORTED;
}

tl_status tl_ipc_device_uuid(int device, char *uuid, char *why, size_t why_len)
{
    (void)device;
    uuid[0] = 0;
    return no_cuda(why, why_len);
}

tl_status tl_ipc_device_ordinal(const char *uuid, int *device, char *why, size_t why_len)
{
    (void)uuid;
    *device = -1;
    return no_cuda(why, why_len);
}

tl_status tl_ipc_open(int device, const uint8_t handle[TL_IPC_HANDLE_BYTES], void **ptr,
                      size_t *bytes, char *why, size_t why_len)
{
    (void)device, (void)handle;
    *ptr = NULL;
    *bytes = 0;
    return no_cuda(why, why_len);
}

void tl_ipc_close(int device, void *ptr)
{
    (void)device, (void)ptr;
}

tl_status tl_ipc_alloc(int device, size_t bytes, void **ptr, uint8_t handle[TL_IPC_HANDLE_BYTES],
                       char *why, size_t why_len)
{
    (void)device, (void)bytes, (void)handle;
    *ptr = NULL;
    return no_cuda(why, why_len);
}

void tl_ipc_free(int device, void *ptr)
{
    (void)device, (void)ptr;
}

tl_status tl_ipc_copy(int device, void *dst, const void *src, size_t bytes, char *why,
                      size_t why_len)
{
    (void)device, (void)dst, (void)src, (void)bytes;
    return no_cuda(why, why_len);
}
#endif
