#include <catch2/catch.hpp>

#include <functional>
#include <thread>

#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;

TEST_CASE("gradient of a simple expression", "[tape]") {
  Tensor x = vec({1, 2, 3});
  GradientTape tape;
  tape.watch(x);
  Tensor y = ops::sum(x * x * 3.0);
  auto g = tape.gradient(y, {x});
  REQUIRE(g.size() == 1);
  CHECK(g[0].shape() == x.shape());
  CHECK(values(g[0]) == std::vector<double>{6, 12, 18});
}

TEST_CASE("fan-out accumulates gradients from every use", "[tape]") {
  Tensor x = vec({2, -1});
  GradientTape tape;
  tape.watch(x);
  Tensor y = x * x + x + ops::exp(x * 0.0);  // d/dx = 2x + 1
  CHECK(values(tape.gradient(y, {x})[0]) == std::vector<double>{5, -1});
}

TEST_CASE("broadcast gradients are summed back to the input shape", "[tape]") {
  Tensor a = Tensor::ones({2, 3}, DType::f64);
  Tensor b = vec({1, 2, 3});
  GradientTape tape;
  tape.watch(b);
  auto g = tape.gradient(a * b, {b});
  CHECK(g[0].shape() == Shape{3});
  CHECK(values(g[0]) == std::vector<double>{2, 2, 2});
}

TEST_CASE("output_gradient weights the target", "[tape]") {
  Tensor x = vec({1, 2});
  GradientTape tape;
  tape.watch(x);
  Tensor y = x * 2.0;
  CHECK(values(tape.gradient(y, {x}, vec({10, 100}))[0]) == std::vector<double>{20, 200});
}

TEST_CASE("unconnected sources get zeros, or nothing on request", "[tape]") {
  Tensor x = vec({1, 2});
  Tensor z = vec({5});
  {
    GradientTape tape;
    tape.watch(x);
    tape.watch(z);
    auto g = tape.gradient(ops::sum(x), {x, z});
    CHECK(values(g[1]) == std::vector<double>{0});
    CHECK(g[1].shape() == z.shape());
  }
  {
    GradientTape tape;
    tape.watch(x);
    auto g = tape.gradient(ops::sum(x), {z}, {}, UnconnectedGradients::none);
    CHECK_FALSE(g[0].defined());
  }
  {  // a source that is not watched is not connected either
    GradientTape tape;
    CHECK(values(tape.gradient(ops::sum(x * 2.0), {x})[0]) == std::vector<double>{0, 0});
  }
}

TEST_CASE("a non-persistent tape answers once, a persistent one many times", "[tape]") {
  Tensor x = vec({3});
  GradientTape once;
  once.watch(x);
  Tensor y = x * x;
  once.gradient(y, {x});
  CHECK_THROWS_WITH(once.gradient(y, {x}), Catch::Contains("non-persistent") && Catch::Contains("GradientTape({.persistent = true})"));

  GradientTape many({.persistent = true});
  many.watch(x);
  Tensor y2 = x * x;
  Tensor y3 = y2 * x;
  CHECK(values(many.gradient(y2, {x})[0]) == std::vector<double>{6});
  CHECK(values(many.gradient(y3, {x})[0]) == std::vector<double>{27});
}

TEST_CASE("stop_recording and NoGradGuard pause recording", "[tape]") {
  Tensor x = vec({2});
  GradientTape tape({.persistent = true});
  tape.watch(x);
  Tensor a = x * x;
  Tensor b;
  {
    auto pause = tape.stop_recording();
    b = a * x;  // not recorded: b is a constant for this tape
  }
  const auto recorded = tape.recorded_ops().size();
  Tensor c;
  {
    NoGradGuard no_grad;
    c = a * 5.0;
  }
  CHECK(tape.recorded_ops().size() == recorded);
  CHECK(values(tape.gradient(b, {x})[0]) == std::vector<double>{0});
  CHECK(values(tape.gradient(a + b + c, {x})[0]) == std::vector<double>{4});
}

TEST_CASE("only ops that touch watched tensors are recorded", "[tape]") {
  Tensor x = vec({1});
  Tensor k = vec({2});
  GradientTape tape;
  Tensor unrelated = k * k;
  CHECK(tape.recorded_ops().empty());
  tape.watch(x);
  Tensor y = x * k;
  CHECK(tape.recorded_ops().size() == 1);
  CHECK(tape.recorded_ops()[0] == "mul");
  (void)unrelated;
}

TEST_CASE("trainable variables are watched automatically", "[tape][variable]") {
  Variable w(vec({1, 2}), "w");
  Variable frozen(vec({3, 4}), "frozen", /*trainable=*/false);
  {
    GradientTape tape;
    Tensor y = ops::sum(w * frozen);
    auto g = tape.gradient(y, std::vector<Variable>{w, frozen});
    CHECK(values(g[0]) == std::vector<double>{3, 4});
    CHECK(values(g[1]) == std::vector<double>{0, 0});
  }
  {
    GradientTape tape({.persistent = false, .watch_accessed_variables = false});
    Tensor y = ops::sum(w * 2.0);
    CHECK(tape.recorded_ops().empty());
    CHECK(values(tape.gradient(y, std::vector<Variable>{w})[0]) == std::vector<double>{0, 0});
  }
}

TEST_CASE("nested tapes give second derivatives", "[tape]") {
  Tensor x = vec({2, -1});
  GradientTape outer;
  outer.watch(x);
  Tensor dy_dx;
  {
    GradientTape inner;
    inner.watch(x);
    Tensor y = x * x * x;  // dy/dx = 3x^2, d2y/dx2 = 6x
    dy_dx = inner.gradient(y, {x})[0];
  }
  CHECK(values(dy_dx) == std::vector<double>{12, 3});
  CHECK(values(outer.gradient(dy_dx, {x})[0]) == std::vector<double>{12, -6});
}

TEST_CASE("third derivative through three tapes", "[tape]") {
  Tensor x = vec({1.5});
  GradientTape t3;
  t3.watch(x);
  GradientTape t2;
  t2.watch(x);
  GradientTape t1;
  t1.watch(x);
  Tensor y = x * x * x * x;                 // 4x^3, 12x^2, 24x
  Tensor d1 = t1.gradient(y, {x})[0];
  Tensor d2 = t2.gradient(d1, {x})[0];
  Tensor d3 = t3.gradient(d2, {x})[0];
  CHECK(d1.item<double>() == Approx(4 * 1.5 * 1.5 * 1.5));
  CHECK(d2.item<double>() == Approx(12 * 1.5 * 1.5));
  CHECK(d3.item<double>() == Approx(24 * 1.5));
}

TEST_CASE("each thread has its own tape stack", "[tape][threads]") {
  auto work = [](double start, double& result) {
    Tensor x = vec({start});
    GradientTape tape;
    tape.watch(x);
    Tensor y = x;
    for (int i = 0; i < 200; ++i) y = y * 1.01 + x;
    result = tape.gradient(y, {x})[0].item<double>();
  };
  double expected = 0;
  work(1.0, expected);
  double r1 = 0, r2 = 0;
  std::thread t1(work, 1.0, std::ref(r1));
  std::thread t2(work, 2.0, std::ref(r2));
  t1.join();
  t2.join();
  CHECK(r1 == expected);
  CHECK(r2 == expected);  // linear in x: the same slope from any start
}

TEST_CASE("a tape on one thread does not record another thread's ops", "[tape][threads]") {
  Tensor x = vec({1});
  GradientTape tape;
  tape.watch(x);
  std::thread other([&] { Tensor y = x * x; });
  other.join();
  CHECK(tape.recorded_ops().empty());
}

TEST_CASE("bad gradient requests give loom::Error", "[tape][errors]") {
  Tensor x = vec({1, 2});
  Tensor labels = Tensor::from_vector(std::vector<std::int64_t>{1, 2});
  GradientTape tape({.persistent = true});
  tape.watch(x);
  Tensor y = x * 2.0;
  CHECK_THROWS_WITH(tape.gradient(y, {labels}), Catch::Contains("source 0 is i64") && Catch::Contains("[2]"));
  CHECK_THROWS_WITH(tape.gradient(labels, {x}), Catch::Contains("target must be float"));
  CHECK_THROWS_WITH(tape.gradient(y, {x}, vec({1})), Catch::Contains("output_gradient"));
  CHECK_THROWS_WITH(tape.watch(labels), Catch::Contains("watch") && Catch::Contains("i64"));
  CHECK_THROWS_AS(tape.gradient(Tensor(), {x}), Error);
}
