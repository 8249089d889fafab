// Fixture for scripts/check-public-includes.sh (never compiled): a private header reached
// through an include path, not a relative one.
#include "ggml-backend-impl.h"
