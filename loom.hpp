#pragma once
// The whole public API of loom: #include "loom.hpp". The xtensor interop is separate
// (framework/io/xtensor.hpp), so that this header pulls no third-party header but fmt.
#include "framework/framework.hpp"
#include "layers/layers.hpp"
#include "models/models.hpp"
#include "optim/optim.hpp"
