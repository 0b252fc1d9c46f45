// A header that includes a later stage of the pipeline: scripts/check_layers.sh must reject it.
#pragma once
#include "kiln/autodiff/grad.hpp"
