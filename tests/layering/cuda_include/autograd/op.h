// Fixture: an autograd file that includes a CUDA kernel header; cmake/check_layers.cmake must refuse it.
#pragma once

#include "kernels/cuda/elementwise.h"
