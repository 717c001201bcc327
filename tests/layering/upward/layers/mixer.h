// Fixture for the layering test (CMakeLists.txt, layering.*): a layer header that includes the
// trainer's config, which cmake/check_layers.cmake must refuse. Never compiled.
#include "layers/modules.h"
#include "train/config.h"
#include <vector>
