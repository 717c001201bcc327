// Fixture: a layer header that names a CPU kernel header; cmake/check_layers.cmake must refuse it.
#pragma once

#include "kernels/cpu/linear_attn.h"
