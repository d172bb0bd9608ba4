/* cuda_backend.h — the CUDA backend, as the engine sees it (C, no CUDA headers): its operation
 * table (gpu/base/backend.h), device discovery, page-locked host memory (tl_host_alloc in
 * gpu/host.c) and memory shared between processes (the engine's gpu/ipc.h forwards here).
 * Only in builds with CUDA (HAVE_CUDA); everything else of the backend is internal to
 * gpu/cuda/.
 */
#ifndef TL_CUDA_BACKEND_H
#define TL_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/base/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const tl_backend_ops tl_cuda_backend;
/* Device count, or -1 with the reason in why when CUDA cannot be used. */
int tl_cuda_device_count(char *why, size_t why_len);
/* tl_host_alloc / tl_host_free for the CUDA backend: cudaHostAlloc (portable). */
tl_status tl_cuda_host_alloc(size_t bytes, void **out, char *why, size_t why_len);
void tl_cuda_host_free(void *p);
tl_status tl_cuda_host_register(void *p, size_t bytes, char *why, size_t why_len);
void tl_cuda_host_unregister(void *p);

/* CUDA IPC: gpu/ipc.h says what each does. */
#define TL_CUDA_IPC_HANDLE_BYTES 64 /* sizeof(cudaIpcMemHandle_t) */
#define TL_CUDA_IPC_UUID_LEN 40     /* "GPU-" + 8-4-4-4-12 hex digits */
tl_status tl_cuda_ipc_device_uuid(int device, char *uuid, char *why, size_t why_len);
tl_status tl_cuda_ipc_device_ordinal(const char *uuid, int *device, char *why, size_t why_len);
tl_status tl_cuda_ipc_open(int device, const uint8_t handle[TL_CUDA_IPC_HANDLE_BYTES], void **ptr,
                           size_t *bytes, char *why, size_t why_len);
void tl_cuda_ipc_close(int device, void *ptr);
tl_status tl_cuda_ipc_alloc(int device, size_t bytes, void **ptr,
                            uint8_t handle[TL_CUDA_IPC_HANDLE_BYTES], char *why, size_t why_len);
void tl_cuda_ipc_free(int device, void *ptr);
tl_status tl_cuda_ipc_copy(int device, void *dst, const void *src, size_t bytes, char *why,
                           size_t why_len);

#ifdef __cplusplus
}
#endif
#endif
