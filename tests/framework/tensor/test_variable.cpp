#include <catch2/catch.hpp>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "framework/tensor/variable.hpp"

using namespace loom;

TEST_CASE("a variable holds a private copy and keeps its id across assign", "[variable]") {
  Tensor init = Tensor::from_vector(std::vector<float>{1, 2, 3});
  Variable v(init, "dense/kernel");
  CHECK(v.name() == "dense/kernel");
  CHECK(v.trainable());
  CHECK_FALSE(v.value().shares_storage_with(init));
  const auto id = v.id();
  v.assign(Tensor::from_vector(std::vector<float>{4, 5, 6}));
  CHECK(v.id() == id);
  CHECK(v.value().to_vector<float>() == std::vector<float>{4, 5, 6});
  CHECK(init.to_vector<float>() == std::vector<float>{1, 2, 3});
  v.assign_sub(Tensor::ones({3}));
  v.assign_add(Tensor::full({3}, 0.5));
  CHECK(v.value().to_vector<float>() == std::vector<float>{3.5, 4.5, 5.5});
  v.assign(Tensor::from_vector(std::vector<float>{1}).broadcast_to({3}));  // a non-contiguous source
  CHECK(v.value().to_vector<float>() == std::vector<float>{1, 1, 1});
}

TEST_CASE("a Variable is usable wherever a Tensor is", "[variable]") {
  Variable w(Tensor::from_vector(std::vector<double>{2, 3}), "w");
  Tensor x = Tensor::from_vector(std::vector<double>{1, 1});
  Tensor y = w * x;
  CHECK(y.to_vector<double>() == std::vector<double>{2, 3});
  CHECK(ops::sum(w).item<double>() == 5);
}

TEST_CASE("assign is never recorded and set_trainable controls watching", "[variable]") {
  Variable w(Tensor::from_vector(std::vector<double>{2}), "w");
  GradientTape tape({.persistent = true});
  Tensor y = w * w;
  w.assign(Tensor::from_vector(std::vector<double>{5}));
  CHECK(tape.recorded_ops().size() == 1);
  w.set_trainable(false);
  CHECK_FALSE(w.trainable());
  Tensor z = w * 3.0;
  CHECK(tape.recorded_ops().size() == 1);
}

TEST_CASE("bad variable use gives loom::Error", "[variable][errors]") {
  Variable v(Tensor::zeros({2, 2}), "gamma");
  CHECK_THROWS_WITH(v.assign(Tensor::zeros({3})), Catch::Contains("gamma") && Catch::Contains("[2, 2]") &&
                                                      Catch::Contains("[3]"));
  CHECK_THROWS_WITH(v.assign(Tensor::zeros({2, 2}, DType::f64)), Catch::Contains("f64"));
  CHECK_THROWS_WITH(Variable().value(), Catch::Contains("undefined"));
  CHECK_THROWS_AS(Variable(Tensor(), "x"), Error);
}
