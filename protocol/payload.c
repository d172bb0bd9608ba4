/* payload.c — how many payload bytes a shape and dtype need, and whether a payload has them.
 *
 * The product is computed with overflow-checked multiplication and compared with the frame
 * limit (2^31 bytes, exclusive) before anyone allocates or indexes with it: rows and cols can
 * each be up to 2^32-1 when called directly, so even 64-bit arithmetic would wrap.
 */
#include "config.h"

#include <inttypes.h>
#include <lz4.h>

#include "protocol/protocol.h"
#include "protocol/proto_internal.h"

tl_proto_err tl_proto_frame_bytes(uint32_t rows, uint32_t cols, tl_proto_dtype dtype,
                                  size_t *bytes, tl_proto_error *err)
{
    size_t es = tl_proto_dtype_size(dtype);
    if (es == 0)
        return tl_proto_fail(err, TL_PROTO_E_DTYPE, "dtype %d is not a known dtype", (int)dtype);
    if (rows == 0 || cols == 0)
        return tl_proto_fail(err, TL_PROTO_E_RANGE,
                             "shape [%" PRIu32 ", %" PRIu32 "] has a "
                             "zero dimension",
                             rows, cols);
    uint64_t n;
    if (__builtin_mul_overflow((uint64_t)rows, (uint64_t)cols, &n) ||
        __builtin_mul_overflow(n, (uint64_t)es, &n) || n >= TL_PROTO_MAX_FRAME_BYTES)
        return tl_proto_fail(err, TL_PROTO_E_OVERFLOW,
                             "shape [%" PRIu32 ", %" PRIu32 "] of %s "
                             "is 2 GiB or more (limit: under %u bytes)",
                             rows, cols, tl_proto_dtype_name(dtype), TL_PROTO_MAX_FRAME_BYTES);
    if (bytes)
        *bytes = (size_t)n;
    return TL_PROTO_OK;
}

tl_proto_err tl_proto_check_payload(uint32_t rows, uint32_t cols, tl_proto_dtype dtype,
                                    size_t payload_len, tl_proto_error *err)
{
    size_t want;
    tl_proto_err rc = tl_proto_frame_bytes(rows, cols, dtype, &want, err);
    if (rc)
        return rc;
    if (payload_len != want)
        return tl_proto_fail(err, TL_PROTO_E_PAYLOAD,
                             "payload is %zu bytes, shape [%" PRIu32 ", %" PRIu32
                             "] of %s needs %zu",
                             payload_len, rows, cols, tl_proto_dtype_name(dtype), want);
    return TL_PROTO_OK;
}

tl_proto_err tl_proto_check_lz4_payload(uint32_t rows, uint32_t cols, tl_proto_dtype dtype,
                                        size_t payload_len, tl_proto_error *err)
{
    size_t raw;
    tl_proto_err rc = tl_proto_frame_bytes(rows, cols, dtype, &raw, err);
    if (rc)
        return rc;
    size_t bound = (size_t)LZ4_compressBound((int)raw); /* raw < 2 GiB: within LZ4's range */
    if (payload_len == 0 || payload_len > bound)
        return tl_proto_fail(err, TL_PROTO_E_PAYLOAD,
                             "LZ4 payload is %zu bytes, shape [%" PRIu32 ", %" PRIu32
                             "] of %s compresses to 1..%zu",
                             payload_len, rows, cols, tl_proto_dtype_name(dtype), bound);
    return TL_PROTO_OK;
}
