/* clock.h — forwards to gpu/base/clock.h, where the clocks live now (the engine's lower
 * layer, usable by the backends too). Only daemon/ and clients/ still include this path;
 * once they include "gpu/base/clock.h" this file goes. */
#include "gpu/base/clock.h"
