/* method.c — the methods by configuration (method.h): the one place that chooses. */
#include "config.h"

#include "gpu/method/method.h"

const tl_method_ops *tl_method_find(const tl_engine_config *c)
{
    (void)c; /* FBP serves every configuration there is now; FDK will serve cone beam */
    return &tl_method_fbp;
}
