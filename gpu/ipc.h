/* ipc.h — GPU memory shared between processes (CUDA IPC), for frames that a producer
 * already holds on the GPU (PROTOCOL.md §8.4).
 *
 * The producer allocates exportable device memory once (tl_ipc_alloc), writes frames into
 * it, and names each frame by the allocation's 64-byte handle plus an offset. The consumer
 * opens each handle once (tl_ipc_open: the pointer stays valid until tl_ipc_close) and
 * reads frames in place. Devices are named by UUID ("GPU-…", as nvidia-smi -L prints it),
 * because ordinals differ between processes that see different CUDA_VISIBLE_DEVICES.
 *
 *   producer:  tl_ipc_alloc(dev, bytes, &ring, handle, why, n);  ... tl_ipc_copy(...)
 *   consumer:  tl_ipc_device_ordinal(uuid, &dev, ...);
 *              tl_ipc_open(dev, handle, &ptr, &bytes, ...);  frames at ptr + offset
 *              tl_ipc_close(dev, ptr);
 *
 * Without CUDA in the build every function fails with TL_EUNSUPPORTED and says so.
 */
#ifndef TL_IPC_H
#define TL_IPC_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TL_IPC_HANDLE_BYTES 64 /* sizeof(cudaIpcMemHandle_t) */
#define TL_IPC_UUID_LEN 40     /* "GPU-" + 8-4-4-4-12 hex digits */

/* The UUID of CUDA device `device` (uuid gets TL_IPC_UUID_LEN + 1 bytes). */
tl_status tl_ipc_device_uuid(int device, char *uuid, char *why, size_t why_len);
/* The ordinal, in this process, of the device with this UUID; TL_ENOTFOUND when no visible
 * device has it. */
tl_status tl_ipc_device_ordinal(const char *uuid, int *device, char *why, size_t why_len);

/* Opens another process's allocation on `device` (the device that holds it). *bytes is
 * the allocation's real size, as the driver knows it, so a claimed size can be checked.
 * A handle that does not open (forged, stale: its allocation was freed, or exported by
 * this very process) is TL_EINVAL with the driver's reason. The same handle may not be
 * opened twice by one process: callers cache the pointer. */
tl_status tl_ipc_open(int device, const uint8_t handle[TL_IPC_HANDLE_BYTES], void **ptr,
                      size_t *bytes, char *why, size_t why_len);
void tl_ipc_close(int device, void *ptr);

/* Producer side: allocates `bytes` of exportable device memory on `device` and its
 * handle; tl_ipc_free releases it. */
tl_status tl_ipc_alloc(int device, size_t bytes, void **ptr, uint8_t handle[TL_IPC_HANDLE_BYTES],
                       char *why, size_t why_len);
void tl_ipc_free(int device, void *ptr);
/* Copies `bytes` from src to dst, each host or device memory of any device, and returns when
 * the copy is complete (so a frame written this way may be announced at once). */
tl_status tl_ipc_copy(int device, void *dst, const void *src, size_t bytes, char *why,
                      size_t why_len);

#ifdef __cplusplus
}
#endif
#endif
