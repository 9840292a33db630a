#include "optim/adamw.hpp"

namespace loom::optim {

AdamW::AdamW(AdamWOptions options)
    : Adam("adamw", {.learning_rate = std::move(options.learning_rate),
                     .beta_1 = options.beta_1,
                     .beta_2 = options.beta_2,
                     .epsilon = options.epsilon,
                     .amsgrad = options.amsgrad,
                     .weight_decay = options.weight_decay,
                     .clipnorm = options.clipnorm,
                     .clipvalue = options.clipvalue,
                     .global_clipnorm = options.global_clipnorm,
                     .use_ema = options.use_ema,
                     .ema_momentum = options.ema_momentum,
                     .ema_overwrite_frequency = options.ema_overwrite_frequency,
                     .loss_scale_factor = options.loss_scale_factor,
                     .gradient_accumulation_steps = options.gradient_accumulation_steps,
                     .name = std::move(options.name)}) {}

}  // namespace loom::optim
