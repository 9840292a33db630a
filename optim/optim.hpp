#pragma once
// Every optimizer and learning-rate schedule.
#include "optim/adam.hpp"
#include "optim/adamw.hpp"
#include "optim/optimizer.hpp"
#include "optim/rmsprop.hpp"
#include "optim/schedules.hpp"
#include "optim/sgd.hpp"
