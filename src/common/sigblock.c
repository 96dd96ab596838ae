/* The per-thread depth of src/common/sigblock.h's guards (one definition for every layer). */
#include "common/sigblock.h"

_Thread_local unsigned sig_depth;
