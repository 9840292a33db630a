#pragma once
// The whole public API of loom.
#include "framework/blas.hpp"
#include "framework/dtype.hpp"
#include "framework/error.hpp"
#include "framework/gradcheck.hpp"
#include "framework/npy.hpp"
#include "framework/ops.hpp"
#include "framework/random.hpp"
#include "framework/shape.hpp"
#include "framework/tape.hpp"
#include "framework/tensor.hpp"
#include "framework/variable.hpp"
#include "layers/losses.hpp"
