/* pool.h — forwards to gpu/base/pool.h, where the thread pool lives now (the engine's lower
 * layer, usable by the backends too). Only daemon/ still includes this path; once it
 * includes "gpu/base/pool.h" this file goes. */
#include "gpu/base/pool.h"
