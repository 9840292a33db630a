#pragma once
// Models and their training: Model, Sequential, the training loop, losses, metrics, callbacks, the progress
// bar and the summary.
#include "models/callback.hpp"
#include "models/callbacks.hpp"
#include "models/losses.hpp"
#include "models/metrics.hpp"
#include "models/model.hpp"
#include "models/progbar.hpp"
#include "models/sequential.hpp"
#include "models/summary.hpp"
