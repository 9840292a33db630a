#pragma once
// Models and their training: Model, Sequential, the training loop, losses, metrics, callbacks, the progress
// bar, the summary, and Keras's files (models/saving/): .weights.h5 weights and whole models in .keras
// archives (Model::save, models::load_model).
#include "models/callback.hpp"
#include "models/callbacks.hpp"
#include "models/losses.hpp"
#include "models/metrics.hpp"
#include "models/model.hpp"
#include "models/progbar.hpp"
#include "models/saving/keras_weights_h5.hpp"
#include "models/saving/keras_archive.hpp"
#include "models/sequential.hpp"
#include "models/summary.hpp"
