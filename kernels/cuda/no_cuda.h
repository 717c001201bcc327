// The body of every kernels/cuda/ function in a build without the CUDA backend: the functions exist
// so that callers need no #ifdefs, and throw (no device tensor can exist in such a build anyway).
#pragma once

#include "core/error.h"

#define LINATTN_NO_CUDA() LINATTN_FAIL("linattn was built without CUDA (configure with -DLINATTN_CUDA=ON)")
