// A header that includes the other backend: scripts/check_layers.sh must reject it.
#pragma once
#include "kiln/backend/cpu/row_kernel.hpp"
