#pragma once
// Every optimizer and learning-rate schedule, and the data-parallel wrapper.
#include "optim/adadelta.hpp"
#include "optim/adagrad.hpp"
#include "optim/adam.hpp"
#include "optim/adamax.hpp"
#include "optim/adamw.hpp"
#include "optim/distributed_optimizer.hpp"
#include "optim/lion.hpp"
#include "optim/optimizer.hpp"
#include "optim/rmsprop.hpp"
#include "optim/schedules.hpp"
#include "optim/sgd.hpp"
