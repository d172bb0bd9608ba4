/* adapter.c — the registry of ingest formats: every adapter (adapter_*.c) by the name that
 * ingest.format gives it. The names are settings.c's format_names, in the same order. */
#include <config.h>

#include <string.h>

#include "daemon/ingest/adapter.h"

const tl_adapter_ops *tl_adapter_find(const char *name)
{
    static const tl_adapter_ops *const all[] = {
        &tl_adapter_native,  &tl_adapter_dectris2, &tl_adapter_dectris1,    &tl_adapter_std_daq,
        &tl_adapter_concert, &tl_adapter_array10,  &tl_adapter_tomopackets,
    };
    for (size_t i = 0; name && i < sizeof all / sizeof *all; i++)
        if (strcmp(all[i]->name, name) == 0)
            return all[i];
    return NULL;
}
