#pragma once
// Every op in loom::ops. Each file below holds one family; ops.md in docs/ tables their backward rules.
#include "framework/attention.hpp"
#include "framework/ops_elementwise.hpp"
#include "framework/ops_linalg.hpp"
#include "framework/ops_nn.hpp"
#include "framework/ops_normalization.hpp"
#include "framework/ops_reduction.hpp"
#include "framework/ops_shape.hpp"
