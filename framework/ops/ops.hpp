#pragma once
// Every op in loom::ops. Each file below holds one family; ops.md in docs/ tables their backward rules.
#include "framework/ops/attention.hpp"
#include "framework/ops/convolution.hpp"
#include "framework/ops/elementwise.hpp"
#include "framework/ops/linalg.hpp"
#include "framework/ops/nn.hpp"
#include "framework/ops/normalization.hpp"
#include "framework/ops/pooling.hpp"
#include "framework/ops/reduction.hpp"
#include "framework/ops/shape.hpp"
#include "framework/ops/updates.hpp"
