/* split.h — one engine on several devices (split.c): detector rows split across child
 * backends, one per entry of config.devices, behind the ordinary operation table. Its
 * estimate() and create() take a configuration whose backend is resolved (CPU or CUDA: the
 * children's kind, never AUTO) and whose ndevices >= 2.
 */
#ifndef TL_SPLIT_H
#define TL_SPLIT_H

#include "gpu/base/backend.h"

extern const tl_backend_ops tl_split_backend;

#endif
