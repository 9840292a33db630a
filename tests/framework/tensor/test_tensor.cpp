#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "framework/io/xtensor.hpp"
#include "framework/ops/ops.hpp"
#include "framework/tensor/detail/buffer_pool.hpp"
#include "framework/tensor/memory_stats.hpp"
#include "framework/tensor/random.hpp"
#include "framework/tensor/tensor.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using loom::testing::skip_test;

TEST_CASE("factories fill shape, dtype and values", "[tensor]") {
  Tensor z = Tensor::zeros({2, 3}, DType::f64);
  CHECK(z.shape() == Shape{2, 3});
  CHECK(z.dtype() == DType::f64);
  CHECK(z.numel() == 6);
  CHECK(z.ndim() == 2);
  CHECK(z.to_vector<double>() == std::vector<double>(6, 0.0));
  CHECK(Tensor::ones({4}).to_vector<float>() == std::vector<float>(4, 1.0f));
  CHECK(Tensor::full({2, 2}, 2.5, DType::f32).to_vector<float>() == std::vector<float>(4, 2.5f));
  CHECK(Tensor::full({3}, 7, DType::i64).to_vector<std::int64_t>() == std::vector<std::int64_t>{7, 7, 7});
  CHECK(Tensor::arange(0.0, 1.0, 0.25, DType::f64).to_vector<double>() == std::vector<double>{0, 0.25, 0.5, 0.75});
  CHECK(Tensor::arange(4).to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1, 2, 3});
  CHECK(Tensor::arange(3).dtype() == DType::i64);
  Tensor s = Tensor::scalar(3.5, DType::f64);
  CHECK(s.ndim() == 0);
  CHECK(s.numel() == 1);
  CHECK(s.item<double>() == 3.5);
}

TEST_CASE("from_vector copies and picks the dtype from the element type", "[tensor]") {
  std::vector<float> values{1, 2, 3, 4, 5, 6};
  Tensor t = Tensor::from_vector(values, {2, 3});
  values[0] = 100;
  CHECK(t.dtype() == DType::f32);
  CHECK(t.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(Tensor::from_vector(std::vector<double>{1.5}).dtype() == DType::f64);
  CHECK(Tensor::from_vector(std::vector<std::int64_t>{1, 2}).dtype() == DType::i64);
  Tensor mask = Tensor::from_vector(std::vector<bool>{true, false, true});
  CHECK(mask.dtype() == DType::boolean);
  CHECK(mask.to_vector<bool>() == std::vector<bool>{true, false, true});
  CHECK(t.to_vector<double>() == std::vector<double>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("storage is 64-byte aligned and ids are unique", "[tensor]") {
  Tensor a = Tensor::zeros({3, 5});
  Tensor b = Tensor::zeros({3, 5});
  CHECK(reinterpret_cast<std::uintptr_t>(a.data<float>()) % 64 == 0);
  CHECK(a.id() != b.id());
  Tensor c = a;  // a shallow copy is the same tensor
  CHECK(c.id() == a.id());
  c.data<float>()[0] = 4.0f;
  CHECK(a.to_vector<float>()[0] == 4.0f);
}

TEST_CASE("a freed buffer of 1 MiB or more serves the next one of its size, zeroed when asked", "[tensor]") {
  // glibc would unmap it and hand out fresh pages (a page fault each); loom keeps it unless malloc was tuned
  // by the user.
  if (!detail::buffers_are_pooled()) return skip_test("malloc is tuned by the user (MALLOC_*_ or GLIBC_TUNABLES)");
  const Shape large{std::int64_t(8) << 20};  // 32 MiB of float
  auto page_faults = [] {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_minflt;
  };
  const float* first = nullptr;
  {
    const Tensor t = Tensor::full(large, 3.0);
    first = t.data<float>();
  }
  const long before = page_faults();
  const Tensor zeros = Tensor::zeros(large);  // clears all 32 MiB
  // Fresh pages would fault at least 16 times (2 MiB pages; 8192 with 4 KiB ones).
  CHECK(page_faults() - before < 8);
  CHECK(zeros.data<float>() == first);
  const std::vector<float> values = zeros.to_vector<float>();
  CHECK(std::all_of(values.begin(), values.end(), [](float x) { return x == 0.0f; }));
  // Another size does not take it.
  const Tensor other = Tensor::zeros({(std::int64_t(8) << 20) + 16});
  CHECK(other.data<float>() != first);
  CHECK(reinterpret_cast<std::uintptr_t>(other.data<float>()) % 64 == 0);
}

TEST_CASE("nearby large sizes share a size class", "[tensor]") {
  if (!detail::buffers_are_pooled()) return skip_test("malloc is tuned by the user (MALLOC_*_ or GLIBC_TUNABLES)");
  // 1100 KiB and 1050 KiB of float both round up to 1152 KiB (eight classes per power of two); 1200 KiB does not.
  const float* first = nullptr;
  {
    const Tensor t = Tensor::empty({std::int64_t(1100) << 8});
    first = t.data<float>();
  }
  {
    const Tensor near = Tensor::empty({std::int64_t(1050) << 8});
    CHECK(near.data<float>() == first);
  }
  const Tensor far = Tensor::empty({std::int64_t(1200) << 8});
  CHECK(far.data<float>() != first);
}

TEST_CASE("a freed working set is kept whole for the next step, and no more than the most ever in use", "[tensor]") {
  if (!detail::buffers_are_pooled()) return skip_test("malloc is tuned by the user (MALLOC_*_ or GLIBC_TUNABLES)");
  constexpr std::size_t kMiB = std::size_t(1) << 20;
  const Shape block{std::int64_t(9) << 18};  // 9 MiB of float, a class of its own
  auto step = [&] {  // 360 MiB at once; returns where the buffers were
    std::vector<Tensor> activations;
    std::vector<const float*> where;
    for (int i = 0; i < 40; ++i) {
      activations.push_back(Tensor::full(block, 1.0));
      where.push_back(activations.back().data<float>());
    }
    std::sort(where.begin(), where.end());
    return where;
  };
  const std::vector<const float*> first = step();
  const detail::PoolBytes after_first = detail::pool_bytes();
  CHECK(after_first.most_in_use >= 360 * kMiB);
  CHECK(after_first.kept >= 360 * kMiB);  // all 40 kept: the cap is the most ever in use
  // The second step runs on the first one's buffers, whose pages are already resident.
  CHECK(step() == first);
  // A stream of buffers of other classes, one alive at a time, totalling far more than the high-water mark:
  // the oldest kept ones are unmapped, so what is kept never exceeds it (or the 256 MiB floor).
  for (std::int64_t i = 0; i < 200; ++i) { const Tensor t = Tensor::empty({(std::int64_t(5) << 18) + (i << 15)}); }
  const detail::PoolBytes after_stream = detail::pool_bytes();
  CHECK(after_stream.kept <= std::max(256 * kMiB, after_stream.most_in_use));
  CHECK(after_stream.in_use == after_first.in_use);
}

TEST_CASE("views share storage, contiguous and clone copy", "[tensor]") {
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor t = a.transpose();
  CHECK(t.shape() == Shape{3, 2});
  CHECK(t.shares_storage_with(a));
  CHECK_FALSE(t.is_contiguous());
  CHECK(t.to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
  Tensor c = t.contiguous();
  CHECK(c.is_contiguous());
  CHECK_FALSE(c.shares_storage_with(a));
  CHECK(c.to_vector<float>() == t.to_vector<float>());
  CHECK(a.contiguous().id() == a.id());  // already contiguous: the same tensor

  Tensor r = a.reshape({3, 2});
  CHECK(r.shares_storage_with(a));
  Tensor s = a.slice(1, 1, 3);
  CHECK(s.shares_storage_with(a));
  CHECK(s.to_vector<float>() == std::vector<float>{2, 3, 5, 6});
  Tensor b = Tensor::from_vector(std::vector<float>{1, 2, 3}).broadcast_to({2, 3});
  CHECK(b.strides() == Strides{0, 1});
  CHECK(b.to_vector<float>() == std::vector<float>{1, 2, 3, 1, 2, 3});

  Tensor k = a.clone();
  CHECK_FALSE(k.shares_storage_with(a));
  k.data<float>()[0] = -1;
  CHECK(a.to_vector<float>()[0] == 1.0f);
  CHECK(a.permute({1, 0}).to_vector<float>() == t.to_vector<float>());
}

TEST_CASE("to converts dtypes", "[tensor]") {
  Tensor a = Tensor::from_vector(std::vector<double>{1.5, -2.25}, {2});
  Tensor f = a.to(DType::f32);
  CHECK(f.dtype() == DType::f32);
  CHECK(f.to_vector<float>() == std::vector<float>{1.5f, -2.25f});
  CHECK(a.to(DType::i64).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, -2});
}

TEST_CASE("randn and uniform are reproducible from a seed", "[tensor][random]") {
  Tensor a = Tensor::randn({1000}, DType::f64, 7);
  Tensor b = Tensor::randn({1000}, DType::f64, 7);
  Tensor c = Tensor::randn({1000}, DType::f64, 8);
  CHECK(a.to_vector<double>() == b.to_vector<double>());
  CHECK(a.to_vector<double>() != c.to_vector<double>());
  double sum = 0, sum_sq = 0;
  for (double v : a.to_vector<double>()) {
    sum += v;
    sum_sq += v * v;
  }
  CHECK(std::abs(sum / 1000) < 0.15);
  CHECK(std::abs(sum_sq / 1000 - 1.0) < 0.15);
  for (float v : Tensor::uniform({500}, -2.0, 3.0, DType::f32, 1).to_vector<float>()) {
    CHECK(v >= -2.0f);
    CHECK(v < 3.0f);
  }
  // f32 and f64 draw the same samples
  CHECK(Tensor::randn({4}, DType::f32, 3).to_vector<double>() ==
        Tensor::randn({4}, DType::f64, 3).to(DType::f32).to_vector<double>());

  random::set_seed(42);
  Tensor u = Tensor::randn({5});
  random::set_seed(42);
  CHECK(Tensor::randn({5}).to_vector<float>() == u.to_vector<float>());
}

TEST_CASE("printing shows shape, dtype and values like NumPy", "[tensor]") {
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2.5, 3, 4, 5, 6}, {2, 3});
  CHECK(fmt::format("{}", a) ==
        "Tensor(shape=[2, 3], dtype=f32,\n"
        "       [[1, 2.5, 3],\n"
        "        [4, 5, 6]])");
  CHECK(fmt::format("{}", Tensor::scalar(2, DType::f64)) == "Tensor(shape=[], dtype=f64,\n       2)");
  CHECK(fmt::format("{}", Tensor::from_vector(std::vector<bool>{true, false})) ==
        "Tensor(shape=[2], dtype=bool,\n       [true, false])");
  const std::string big = fmt::format("{}", Tensor::arange(0.0, 2000.0, 1.0, DType::f64));
  CHECK(big == "Tensor(shape=[2000], dtype=f64,\n       [0, 1, 2, ..., 1997, 1998, 1999])");
  const std::string big2d = fmt::format("{}", Tensor::zeros({100, 100}));
  CHECK(big2d.find("...") != std::string::npos);
  CHECK(big2d.size() < 400);
  CHECK(fmt::format("{}", Tensor()) == "Tensor(undefined)");
}

TEST_CASE("conversion to and from xt::xarray", "[tensor]") {
  Tensor a = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  xt::xarray<double> x = to_xarray<double>(a.transpose());
  CHECK(x.shape()[0] == 3);
  CHECK(x(0, 1) == 4.0);
  xt::xarray<float> y = {{1.0f, 2.0f}, {3.0f, 4.0f}};
  Tensor t = from_xarray(y);
  CHECK(t.shape() == Shape{2, 2});
  CHECK(t.dtype() == DType::f32);
  CHECK(t.to_vector<float>() == std::vector<float>{1, 2, 3, 4});
}

TEST_CASE("bad tensor input gives loom::Error naming the problem", "[tensor][errors]") {
  CHECK_THROWS_WITH(Tensor::from_vector(std::vector<float>{1, 2, 3}, {2, 2}),
                    Catch::Contains("Tensor::from_vector") && Catch::Contains("[2, 2]"));
  CHECK_THROWS_WITH(Tensor::zeros({2, -1}), Catch::Contains("negative dimension") && Catch::Contains("[2, -1]"));
  CHECK_THROWS_WITH(Tensor::ones({2}).item<float>(), Catch::Contains("item") && Catch::Contains("[2]"));
  CHECK_THROWS_WITH(Tensor::ones({2}).data<double>(), Catch::Contains("f32") && Catch::Contains("f64"));
  CHECK_THROWS_WITH(Tensor().shape(), Catch::Contains("undefined"));
  CHECK_THROWS_WITH(Tensor::ones({2, 3}).size(2), Catch::Contains("axis 2") && Catch::Contains("rank 2"));
  CHECK_THROWS_AS(Tensor::randn({2}, DType::i64, 1), Error);
  CHECK_THROWS_AS(Tensor::arange(0.0, 1.0, 0.0), Error);
  CHECK_THROWS_AS(Tensor::uniform({2}, 1.0, 0.0), Error);
}
