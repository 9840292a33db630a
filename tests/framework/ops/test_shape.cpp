#include <catch2/catch.hpp>

#include "framework/autograd/gradcheck.hpp"
#include "framework/autograd/tape.hpp"
#include "framework/ops/ops.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;
using Catch::Contains;

namespace {

/// A view and its base: shared storage, distinct ids.
void require_view_of(const Tensor& view, const Tensor& base) {
  CHECK(view.shares_storage_with(base));
  CHECK(view.id() != base.id());
}

/// Runs fn on f32 and f64 copies of the same data: the forward values and the gradients must agree.
void require_f32_matches_f64(const std::function<Tensor(const Tensor&)>& fn, const Tensor& x64) {
  std::vector<std::vector<double>> results;
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor x = x64.to(dtype);
    GradientTape tape;
    tape.watch(x);
    const Tensor y = fn(x);
    REQUIRE(y.dtype() == dtype);
    const Tensor weights = iota(y.shape(), dtype);  // a non-uniform cotangent
    const Tensor g = tape.gradient(y, {x}, weights)[0];
    REQUIRE(g.dtype() == dtype);
    std::vector<double> both = values(y);
    const std::vector<double> gv = values(g);
    both.insert(both.end(), gv.begin(), gv.end());
    results.push_back(both);
  }
  REQUIRE(results[0].size() == results[1].size());
  for (std::size_t i = 0; i < results[0].size(); ++i) CHECK(results[0][i] == Approx(results[1][i]).epsilon(1e-6));
}

}  // namespace

// ---------------------------------------------------------------- views

TEST_CASE("reshape of contiguous data is a view and -1 is inferred", "[shape]") {
  const Tensor x = iota({2, 3, 4});
  const Tensor y = ops::reshape(x, {4, -1});
  require_view_of(y, x);
  CHECK(y.shape() == Shape{4, 6});
  CHECK(y.is_contiguous());
  CHECK(values(y) == values(x));
  CHECK(ops::reshape(x, {24}).shape() == Shape{24});
  CHECK(ops::reshape(Tensor::zeros({0, 3}), {3, 0}).shape() == Shape{3, 0});
  CHECK(ops::reshape(Tensor::scalar(5.0), {1, 1}).shape() == Shape{1, 1});
  // a slice along the first axis is contiguous with an offset: still a view
  const Tensor rows = ops::slice(x, 0, 1, 2);
  const Tensor r = ops::reshape(rows, {12});
  require_view_of(r, x);
  CHECK(values(r) == std::vector<double>{12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
}

TEST_CASE("reshape of a non-contiguous tensor copies first", "[shape]") {
  const Tensor x = iota({2, 3});
  const Tensor t = ops::transpose(x);
  const Tensor y = ops::reshape(t, {6});
  CHECK(!y.shares_storage_with(x));
  CHECK(values(y) == std::vector<double>{0, 3, 1, 4, 2, 5});
  CHECK(x.reshape({3, 2}).shape() == Shape{3, 2});  // the Tensor method calls the op
}

TEST_CASE("permute and transpose are views with permuted strides", "[shape]") {
  const Tensor x = iota({2, 3, 4});
  const Tensor p = ops::permute(x, {2, 0, 1});
  require_view_of(p, x);
  CHECK(p.shape() == Shape{4, 2, 3});
  CHECK(p.strides() == Strides{1, 12, 4});
  CHECK(values(ops::contiguous(p))[1] == 4.0);   // p[0, 0, 1] = x[0, 1, 0]
  CHECK(values(ops::contiguous(p))[3] == 12.0);  // p[0, 1, 0] = x[1, 0, 0]
  CHECK(ops::permute(x, {-1, 0, -2}).shape() == Shape{4, 2, 3});

  const Tensor m = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor t = ops::transpose(m);
  require_view_of(t, m);
  CHECK(t.shape() == Shape{3, 2});
  CHECK(values(t) == std::vector<double>{1, 4, 2, 5, 3, 6});
  CHECK(ops::transpose(x, 0, -1).shape() == Shape{4, 3, 2});
  CHECK(values(ops::transpose(ops::transpose(x, 0, 2), 0, 2)) == values(x));
}

TEST_CASE("slice follows Python semantics", "[shape]") {
  const Tensor x = iota({10});
  const auto sl = [&](std::int64_t start, std::int64_t stop, std::int64_t step = 1) {
    return values(ops::slice(x, 0, start, stop, step));
  };
  CHECK(sl(2, 5) == std::vector<double>{2, 3, 4});
  CHECK(sl(-3, 10) == std::vector<double>{7, 8, 9});
  CHECK(sl(-3, -1) == std::vector<double>{7, 8});
  CHECK(sl(1, 9, 3) == std::vector<double>{1, 4, 7});
  CHECK(sl(0, 10, 4) == std::vector<double>{0, 4, 8});
  CHECK(sl(-100, 2) == std::vector<double>{0, 1});    // clamped
  CHECK(sl(8, 100) == std::vector<double>{8, 9});     // clamped
  CHECK(sl(5, 2).empty());                            // empty, not an error
  CHECK(sl(12, 20).empty());
  CHECK(ops::slice(x, 0, 5, 2).shape() == Shape{0});

  const Tensor m = iota({3, 4});
  const Tensor s = ops::slice(m, -1, 1, 4, 2);
  require_view_of(s, m);
  CHECK(s.shape() == Shape{3, 2});
  CHECK(values(s) == std::vector<double>{1, 3, 5, 7, 9, 11});
  // a slice of a transposed view
  CHECK(values(ops::slice(ops::transpose(m), 0, 1, 3)) == std::vector<double>{1, 5, 9, 2, 6, 10});
}

TEST_CASE("broadcast_to uses zero strides and follows NumPy rules", "[shape]") {
  const Tensor x = f64({1, 2, 3}, {3});
  const Tensor b = ops::broadcast_to(x, {2, 3});
  require_view_of(b, x);
  CHECK(b.strides() == Strides{0, 1});
  CHECK(values(b) == std::vector<double>{1, 2, 3, 1, 2, 3});

  const Tensor c = ops::broadcast_to(f64({1, 2}, {2, 1}), {2, 2, 3});
  CHECK(c.strides() == Strides{0, 1, 0});
  CHECK(values(c) == std::vector<double>{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2});
  CHECK(ops::broadcast_to(Tensor::scalar(7.0, DType::f64), {2}).to_vector<double>() == std::vector<double>{7, 7});
  CHECK(ops::broadcast_to(x, {3}).shape() == Shape{3});
  CHECK(ops::broadcast_to(f64({1}, {1}), {0}).numel() == 0);
}

TEST_CASE("expand_dims, squeeze and flatten", "[shape]") {
  const Tensor x = iota({2, 3});
  const Tensor e = ops::expand_dims(x, 1);
  require_view_of(e, x);
  CHECK(e.shape() == Shape{2, 1, 3});
  CHECK(e.is_contiguous());
  CHECK(ops::expand_dims(x, -1).shape() == Shape{2, 3, 1});
  CHECK(ops::expand_dims(x, 0).shape() == Shape{1, 2, 3});
  CHECK(ops::expand_dims(Tensor::scalar(1.0), 0).shape() == Shape{1});

  const Tensor s = ops::squeeze(e, -2);
  require_view_of(s, x);
  CHECK(s.shape() == Shape{2, 3});
  CHECK(values(s) == values(x));

  const Tensor y = iota({2, 3, 4});
  const Tensor f = ops::flatten(y);
  require_view_of(f, y);
  CHECK(f.shape() == Shape{24});
  CHECK(ops::flatten(y, 1).shape() == Shape{2, 12});
  CHECK(ops::flatten(y, -1).shape() == Shape{2, 3, 4});
  CHECK(ops::flatten(Tensor::zeros({2, 0, 3}), 1).shape() == Shape{2, 0});
  CHECK(ops::flatten(Tensor::scalar(3.0)).shape() == Shape{1});
  CHECK(values(ops::flatten(ops::transpose(iota({2, 2})))) == std::vector<double>{0, 2, 1, 3});
}

TEST_CASE("contiguous returns itself when contiguous and clone always copies", "[shape]") {
  const Tensor x = iota({2, 3});
  CHECK(ops::contiguous(x).id() == x.id());
  const Tensor t = ops::transpose(x);
  const Tensor c = ops::contiguous(t);
  CHECK(c.is_contiguous());
  CHECK(!c.shares_storage_with(x));
  CHECK(values(c) == std::vector<double>{0, 3, 1, 4, 2, 5});
  // a broadcast view, a strided slice and a permuted 4-d view copy correctly
  CHECK(values(ops::contiguous(ops::broadcast_to(f64({1, 2}, {2, 1}), {2, 3}))) ==
        std::vector<double>{1, 1, 1, 2, 2, 2});
  CHECK(values(ops::contiguous(ops::slice(iota({3, 4}), 1, 0, 4, 3))) == std::vector<double>{0, 3, 4, 7, 8, 11});
  const Tensor p = ops::permute(iota({2, 3, 4, 5}), {0, 2, 1, 3});
  CHECK(values(ops::contiguous(p)) == p.to_vector<double>());
  CHECK(ops::contiguous(p).to_vector<double>()[5] == 20.0);  // [0, 1, 0, 0] = x[0, 0, 1, 0]

  const Tensor k = ops::clone(x);
  CHECK(k.id() != x.id());
  CHECK(!k.shares_storage_with(x));
  CHECK(values(k) == values(x));

  // integer and boolean tensors too
  const Tensor bi = ops::contiguous(ops::transpose(i64({1, 2, 3, 4, 5, 6}, {2, 3})));
  CHECK(bi.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 4, 2, 5, 3, 6});
  const Tensor bb = ops::contiguous(ops::transpose(Tensor::from_vector(std::vector<bool>{true, false, false, true,
                                                                                         true, false}, {2, 3})));
  CHECK(bb.to_vector<bool>() == std::vector<bool>{true, true, false, true, false, false});
}

TEST_CASE("strided copies of larger views match element-wise reads", "[shape]") {
  // sizes that are not multiples of the copy's tile, views with offsets, every permutation of three axes
  const Tensor x = ops::slice(iota({4, 45, 70}, DType::f32), 0, 1, 4);
  for (const std::vector<std::int64_t>& axes :
       {std::vector<std::int64_t>{0, 2, 1}, {2, 1, 0}, {1, 0, 2}, {2, 0, 1}, {1, 2, 0}}) {
    const Tensor p = ops::permute(x, axes);
    CHECK(ops::contiguous(p).to_vector<float>() == p.to_vector<float>());
    const Tensor s = ops::slice(ops::slice(p, 0, 1, 100, 2), -1, 3, -2, 3);
    CHECK(ops::contiguous(s).to_vector<float>() == s.to_vector<float>());
  }
  const Tensor b = ops::broadcast_to(ops::slice(iota({40, 2}, DType::i64), 1, 0, 1), {3, 40, 33});
  CHECK(ops::contiguous(b).to_vector<std::int64_t>() == b.to_vector<std::int64_t>());
}

TEST_CASE("contiguous records only when it copies", "[shape]") {
  const Tensor x = randn({2, 3}, 24);
  GradientTape tape({.persistent = true});
  tape.watch(x);
  CHECK(ops::contiguous(x).id() == x.id());
  CHECK(tape.recorded_ops().empty());
  const Tensor c = ops::contiguous(ops::transpose(x));
  REQUIRE(tape.recorded_ops().size() == 2);
  CHECK(tape.recorded_ops()[1] == "contiguous");
  CHECK(values(tape.gradient(c, {x}, iota({3, 2}))[0]) == std::vector<double>{0, 2, 4, 1, 3, 5});
}

// ---------------------------------------------------------------- copies

TEST_CASE("concat joins along an axis for every dtype", "[shape]") {
  const Tensor a = f64({1, 2, 3, 4}, {2, 2});
  const Tensor b = f64({5, 6}, {2, 1});
  const Tensor c = ops::concat({a, b}, -1);
  CHECK(c.shape() == Shape{2, 3});
  CHECK(values(c) == std::vector<double>{1, 2, 5, 3, 4, 6});
  CHECK(!c.shares_storage_with(a));
  CHECK(values(ops::concat({a, ops::transpose(a)}, 0)) == std::vector<double>{1, 2, 3, 4, 1, 3, 2, 4});
  CHECK(ops::concat({a, Tensor::zeros({0, 2}, DType::f64)}, 0).shape() == Shape{2, 2});

  const Tensor ic = ops::concat({i64({1, 2}, {2}), i64({3}, {1})});
  CHECK(ic.dtype() == DType::i64);
  CHECK(ic.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 2, 3});
  const Tensor bc = ops::concat({Tensor::from_vector(std::vector<bool>{true}), Tensor::from_vector(std::vector<bool>{
                                                                                   false, true})});
  CHECK(bc.to_vector<bool>() == std::vector<bool>{true, false, true});
  const Tensor fc = ops::concat({Tensor::ones({1, 2}), Tensor::zeros({1, 2})}, 1);
  CHECK(fc.dtype() == DType::f32);
  CHECK(fc.to_vector<float>() == std::vector<float>{1, 1, 0, 0});
}

TEST_CASE("stack adds a new axis", "[shape]") {
  const Tensor a = f64({1, 2, 3}, {3});
  const Tensor b = f64({4, 5, 6}, {3});
  CHECK(ops::stack({a, b}).shape() == Shape{2, 3});
  CHECK(values(ops::stack({a, b})) == std::vector<double>{1, 2, 3, 4, 5, 6});
  const Tensor s = ops::stack({a, b}, -1);
  CHECK(s.shape() == Shape{3, 2});
  CHECK(values(s) == std::vector<double>{1, 4, 2, 5, 3, 6});
  const Tensor is = ops::stack({i64({1, 2}, {2}), i64({3, 4}, {2})}, 1);
  CHECK(is.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 3, 2, 4});
}

TEST_CASE("pad surrounds a tensor with a constant for every dtype", "[shape]") {
  const Tensor x = iota({2, 3});
  const Tensor y = ops::pad(x, {{1, 0}, {2, 1}});
  CHECK(y.shape() == Shape{3, 6});
  CHECK(values(y) == std::vector<double>{0, 0, 0, 0, 0, 0,  //
                                         0, 0, 0, 1, 2, 0,  //
                                         0, 0, 3, 4, 5, 0});
  CHECK(values(ops::pad(f64({1, 2}, {2}), {{1, 2}}, 7.0)) == std::vector<double>{7, 1, 2, 7, 7});
  // One pair for every axis (NumPy's pad_width), widths 0, a non-contiguous input.
  CHECK(ops::pad(x, {{1, 1}}).shape() == Shape{4, 5});
  const Tensor same = ops::pad(x, {{0, 0}, {0, 0}});
  CHECK(values(same) == values(x));
  CHECK_FALSE(same.shares_storage_with(x));
  CHECK(values(ops::pad(ops::transpose(x), {{0, 1}, {1, 0}})) ==
        std::vector<double>{0, 0, 3, 0, 1, 4, 0, 2, 5, 0, 0, 0});
  CHECK(ops::pad(i64({4, 5}, {1, 2}), {{0, 0}, {1, 0}}, -1).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{-1, 4, 5});
  CHECK(ops::pad(iota({2}, DType::f32), {{1, 0}}).dtype() == DType::f32);
  CHECK(ops::pad(iota({0, 2}), {{1, 1}, {0, 0}}).shape() == Shape{2, 2});
  CHECK(ops::pad(Tensor::scalar(3.0), {}).item<double>() == 3.0);
}

TEST_CASE("split returns views of equal or given sizes", "[shape]") {
  const Tensor x = iota({2, 6});
  const auto parts = ops::split(x, 3, 1);
  REQUIRE(parts.size() == 3);
  for (const Tensor& p : parts) {
    require_view_of(p, x);
    CHECK(p.shape() == Shape{2, 2});
  }
  CHECK(values(parts[1]) == std::vector<double>{2, 3, 8, 9});
  const auto sized = ops::split(x, std::vector<std::int64_t>{1, 0, 5}, -1);
  REQUIRE(sized.size() == 3);
  CHECK(sized[1].shape() == Shape{2, 0});
  CHECK(values(sized[2]) == std::vector<double>{1, 2, 3, 4, 5, 7, 8, 9, 10, 11});
  const auto ints = ops::split(i64({1, 2, 3, 4}, {4}), 2);
  CHECK(ints[1].to_vector<std::int64_t>() == std::vector<std::int64_t>{3, 4});
}

TEST_CASE("take picks entries along an axis (NumPy take)", "[shape]") {
  const Tensor x = iota({3, 4});
  const Tensor rows = ops::take(x, i64({2, 0, 2}, {3}), 0);
  CHECK(rows.shape() == Shape{3, 4});
  CHECK(values(rows) == std::vector<double>{8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11});
  const Tensor cols = ops::take(x, i64({3, 1, 0, 0}, {2, 2}), -1);
  CHECK(cols.shape() == Shape{3, 2, 2});
  CHECK(values(cols) == std::vector<double>{3, 1, 0, 0, 7, 5, 4, 4, 11, 9, 8, 8});
  const Tensor one = ops::take(x, Tensor::scalar(1.0, DType::i64), 1);  // scalar index drops the axis
  CHECK(one.shape() == Shape{3});
  CHECK(values(one) == std::vector<double>{1, 5, 9});
  // embedding lookup from a non-contiguous table, indices from a transposed view
  const Tensor table = ops::transpose(iota({2, 3}));  // [[0, 3], [1, 4], [2, 5]]
  const Tensor ids = ops::transpose(i64({0, 1, 2, 2}, {2, 2}));  // [[0, 2], [1, 2]]
  CHECK(values(ops::gather(table, ids)) == std::vector<double>{0, 3, 2, 5, 1, 4, 2, 5});
  CHECK(ops::take(i64({10, 20, 30}, {3}), i64({2, 2}, {2})).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{30, 30});
  CHECK(ops::take(x, Tensor::zeros({0}, DType::i64), 0).shape() == Shape{0, 4});
}

TEST_CASE("take_along_axis picks one entry per position", "[shape]") {
  const Tensor x = f64({10, 30, 20, 60, 40, 50}, {2, 3});
  const Tensor idx = i64({1, 0, 0, 2}, {2, 2});
  const Tensor y = ops::take_along_axis(x, idx, 1);
  CHECK(y.shape() == Shape{2, 2});
  CHECK(values(y) == std::vector<double>{30, 10, 60, 50});
  CHECK(values(ops::take_along_axis(x, i64({1, 0, 1}, {1, 3}), 0)) == std::vector<double>{60, 30, 50});
  // indices broadcast against x outside the axis: [1, 1] picks column 1 of each row
  CHECK(values(ops::take_along_axis(x, i64({1}, {1, 1}), 1)) == std::vector<double>{30, 40});
  // and x broadcasts against the indices: x [1, 3] with indices [2, 1]
  const Tensor b = ops::take_along_axis(f64({5, 6, 7}, {1, 3}), i64({2, 0}, {2, 1}), -1);
  CHECK(b.shape() == Shape{2, 1});
  CHECK(values(b) == std::vector<double>{7, 5});
  // works on a transposed x and on integer data
  CHECK(values(ops::take_along_axis(ops::transpose(x), i64({2, 0}, {1, 2}), 0)) == std::vector<double>{20, 60});
  CHECK(ops::take_along_axis(i64({4, 5, 6}, {3}), i64({2, 2, 0}, {3}), 0).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{6, 6, 4});
}

TEST_CASE("the adjoint ops scatter into zeros", "[shape]") {
  CHECK(values(ops::slice_backward(f64({1, 2}, {2}), {5}, 0, 1, 5, 2)) == std::vector<double>{0, 1, 0, 2, 0});
  CHECK(values(ops::slice_backward(f64({1, 2}, {1, 2}), {2, 2}, 0, -1, 2)) == std::vector<double>{0, 0, 1, 2});
  CHECK(values(ops::take_backward(f64({1, 2, 3}, {3}), i64({2, 0, 2}, {3}), 0, 4)) ==
        std::vector<double>{2, 0, 4, 0});
  CHECK(values(ops::take_backward(f64({1, 2, 3, 4}, {2, 2}), i64({1, 1}, {2}), 1, 3)) ==
        std::vector<double>{0, 3, 0, 0, 7, 0});
  CHECK(values(ops::take_along_axis_backward(f64({1, 2, 3, 4}, {2, 2}), i64({1, 1, 0, 2}, {2, 2}), 1, 3)) ==
        std::vector<double>{0, 3, 0, 3, 0, 4});
}

// ---------------------------------------------------------------- gradients

TEST_CASE("gradcheck of the view ops, including non-contiguous inputs and negative axes", "[shape]") {
  const Tensor x = randn({2, 3, 4}, 1);
  const Tensor xt = ops::transpose(randn({4, 3, 2}, 2), 0, 2);  // [2, 3, 4], non-contiguous
  for (const Tensor& in : {x, xt}) {
    require_gradcheck([](const auto& v) { return ops::reshape(v[0], {4, -1}); }, {in});
    require_gradcheck([](const auto& v) { return ops::permute(v[0], {2, -3, 1}); }, {in});
    require_gradcheck([](const auto& v) { return ops::transpose(v[0], -1, 0); }, {in});
    require_gradcheck([](const auto& v) { return ops::slice(v[0], -1, -3, 100, 2); }, {in});
    require_gradcheck([](const auto& v) { return ops::slice(v[0], 1, 1, 2); }, {in});
    require_gradcheck([](const auto& v) { return ops::expand_dims(v[0], -2); }, {in});
    require_gradcheck([](const auto& v) { return ops::squeeze(ops::slice(v[0], 1, 0, 1), -2); }, {in});
    require_gradcheck([](const auto& v) { return ops::flatten(v[0], -2); }, {in});
    require_gradcheck([](const auto& v) { return ops::contiguous(v[0]); }, {in});
    require_gradcheck([](const auto& v) { return ops::clone(v[0]); }, {in});
  }
  require_gradcheck([](const auto& v) { return ops::broadcast_to(v[0], {2, 3, 4}); }, {randn({3, 1}, 3)});
  require_gradcheck([](const auto& v) { return ops::broadcast_to(v[0], {2, 2, 3}); },
                    {ops::slice(randn({2, 4}, 4), 1, 1, 2)});  // [2, 1], non-contiguous
}

TEST_CASE("gradcheck of concat, stack and split", "[shape]") {
  const Tensor a = randn({2, 3}, 5);
  const Tensor b = ops::transpose(randn({2, 2}, 6));
  const Tensor c = randn({2, 1}, 7);
  require_gradcheck([](const auto& v) { return ops::concat(v, -1); }, {a, b, c});
  require_gradcheck([](const auto& v) { return ops::concat({v[0], v[0]}, 0); }, {a});  // fan-out
  require_gradcheck([](const auto& v) { return ops::stack(v, 1); }, {a, ops::transpose(randn({3, 2}, 8))});
  require_gradcheck([](const auto& v) { return ops::stack(v, -1); }, {a, randn({2, 3}, 9)});
  // only some parts used: the tape passes zeros for the others
  require_gradcheck([](const auto& v) { return ops::split(v[0], 3, -1)[1]; }, {randn({2, 6}, 10)});
  require_gradcheck(
      [](const auto& v) {
        const auto parts = ops::split(v[0], std::vector<std::int64_t>{2, 1, 3}, 1);
        return ops::concat({parts[2], parts[0]}, 1);
      },
      {ops::transpose(randn({6, 2}, 11))});
}

TEST_CASE("gradcheck of pad: the gradient is the slice where x sits", "[shape]") {
  const Tensor x = randn({2, 3, 2}, 31);
  require_gradcheck([](const auto& v) { return ops::pad(v[0], {{1, 0}, {0, 2}, {1, 1}}); }, {x});
  require_gradcheck([](const auto& v) { return ops::pad(v[0], {{2, 1}}, 5.0); }, {ops::transpose(x, 0, 2)});
  require_gradgradcheck([](const auto& v) { return ops::square(ops::pad(v[0], {{0, 1}, {1, 0}, {0, 0}})); }, {x});
  GradientTape tape;
  tape.watch(x);
  const Tensor y = ops::pad(x, {{0, 0}, {1, 1}, {0, 0}});
  const Tensor g = tape.gradient(y, {x}, iota(y.shape()))[0];
  CHECK(values(g) == values(ops::slice(iota(y.shape()), 1, 1, 4)));
}

TEST_CASE("gradcheck of take, take_along_axis and the adjoint ops", "[shape]") {
  const Tensor x = randn({4, 3}, 12);
  const Tensor idx = i64({3, 0, 3, 1, 0, 0}, {2, 3});  // repeated indices accumulate
  require_gradcheck([&](const auto& v) { return ops::take(v[0], idx, 0); }, {x});
  require_gradcheck([&](const auto& v) { return ops::take(v[0], i64({2, 2, 0}, {3}), -1); }, {x});
  require_gradcheck([&](const auto& v) { return ops::take(v[0], idx, 0); }, {ops::transpose(randn({3, 4}, 13))});
  const Tensor along = i64({2, 0, 2, 1, 1, 1, 0, 0}, {4, 2});
  require_gradcheck([&](const auto& v) { return ops::take_along_axis(v[0], along, 1); }, {x});
  require_gradcheck([&](const auto& v) { return ops::take_along_axis(v[0], along, -1); },
                    {ops::transpose(randn({3, 4}, 14))});
  // x broadcasts against the indices: its gradient is summed over the broadcast rows
  require_gradcheck([&](const auto& v) { return ops::take_along_axis(v[0], along, 1); }, {randn({1, 3}, 15)});

  require_gradcheck([](const auto& v) { return ops::slice_backward(v[0], {3, 5}, 1, 1, 5, 2); }, {randn({3, 2}, 16)});
  require_gradcheck([&](const auto& v) { return ops::take_backward(v[0], idx, 0, 4); }, {randn({2, 3, 3}, 17)});
  require_gradcheck([&](const auto& v) { return ops::take_along_axis_backward(v[0], along, 1, 3); },
                    {randn({4, 2}, 18)});
}

TEST_CASE("gradgradcheck through the shape ops", "[shape]") {
  // each op is composed with a square so that the second derivative is not trivially zero
  const Tensor x = randn({2, 3}, 19);
  const Tensor xt = ops::transpose(randn({3, 2}, 20));
  for (const Tensor& in : {x, xt}) {
    require_gradgradcheck([](const auto& v) { return ops::square(ops::reshape(v[0], {3, 2})); }, {in});
    require_gradgradcheck([](const auto& v) { return ops::square(ops::transpose(v[0])); }, {in});
    require_gradgradcheck([](const auto& v) { return ops::square(ops::permute(v[0], {1, 0})); }, {in});
    require_gradgradcheck([](const auto& v) { return ops::square(ops::slice(v[0], 1, 0, 3, 2)); }, {in});
  }
  require_gradgradcheck([](const auto& v) { return ops::square(ops::concat({v[0], v[1]}, 0)); },
                        {x, randn({1, 3}, 21)});
  require_gradgradcheck([](const auto& v) { return ops::square(ops::take(v[0], i64({1, 1, 0}, {3}), 1)); }, {x});
  require_gradgradcheck(
      [](const auto& v) { return ops::square(ops::take_along_axis(v[0], i64({2, 0}, {2, 1}), 1)); }, {x});
  require_gradgradcheck([](const auto& v) { return ops::square(ops::split(v[0], 3, 1)[2]); }, {x});
  require_gradgradcheck([](const auto& v) { return ops::square(ops::stack({v[0], v[0]}, -1)); }, {x});
  require_gradgradcheck([](const auto& v) { return ops::square(ops::broadcast_to(v[0], {2, 2, 3})); }, {x});
  require_gradgradcheck([](const auto& v) { return ops::square(ops::squeeze(ops::expand_dims(v[0], 1), 1)); }, {x});
  require_gradgradcheck([](const auto& v) { return ops::square(ops::contiguous(v[0])); }, {xt});
}

TEST_CASE("float32 and float64 agree on the shape ops", "[shape]") {
  const Tensor x = randn({2, 3, 4}, 22);
  require_f32_matches_f64([](const Tensor& v) { return ops::reshape(v, {6, -1}); }, x);
  require_f32_matches_f64([](const Tensor& v) { return ops::permute(v, {1, 2, 0}); }, x);
  require_f32_matches_f64([](const Tensor& v) { return ops::slice(v, 2, 1, 4, 2); }, x);
  require_f32_matches_f64([](const Tensor& v) { return ops::broadcast_to(v, {2, 2, 3, 4}); }, x);
  require_f32_matches_f64([](const Tensor& v) { return ops::concat({v, ops::transpose(v, 0, 0)}, 1); }, x);
  require_f32_matches_f64([](const Tensor& v) { return ops::stack({v, v}, 3); }, x);
  require_f32_matches_f64([](const Tensor& v) { return ops::split(v, 2, -1)[0]; }, x);
  require_f32_matches_f64([](const Tensor& v) { return ops::take(v, i64({0, 2, 2}, {3}), 1); }, x);
  require_f32_matches_f64(
      [](const Tensor& v) { return ops::take_along_axis(v, i64({3, 0, 0, 1, 2, 2}, {1, 3, 2}), -1); }, x);
  require_f32_matches_f64([](const Tensor& v) { return ops::contiguous(ops::transpose(v)); }, x);
}

TEST_CASE("integer and boolean tensors are never recorded", "[shape]") {
  const Tensor w = randn({2}, 23);
  GradientTape tape;
  tape.watch(w);
  const Tensor ids = ops::concat({i64({1}, {1}), i64({0}, {1})});
  CHECK(tape.recorded_ops().empty());
  const Tensor y = ops::take(w, ids);
  CHECK(tape.recorded_ops().size() == 1);
  CHECK(values(tape.gradient(ops::reshape(y, {2}), {w}, f64({3, 5}, {2}))[0]) == std::vector<double>{5, 3});
}

// ---------------------------------------------------------------- bad input

TEST_CASE("shape ops reject bad input with clear messages", "[shape]") {
  const Tensor x = iota({2, 3});
  REQUIRE_THROWS_WITH(ops::reshape(x, {4, 2}), Contains("reshape") && Contains("[2, 3]") && Contains("[4, 2]"));
  REQUIRE_THROWS_WITH(ops::reshape(x, {-1, -1}), Contains("reshape") && Contains("-1"));
  REQUIRE_THROWS_WITH(ops::reshape(x, {4, -1}), Contains("reshape") && Contains("[2, 3]") && Contains("[4, -1]"));
  REQUIRE_THROWS_WITH(ops::reshape(x, {-2, -3}), Contains("reshape") && Contains("invalid"));
  REQUIRE_THROWS_WITH(ops::permute(x, {0, 0}), Contains("permute") && Contains("not a permutation"));
  REQUIRE_THROWS_WITH(ops::permute(x, {0}), Contains("permute") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(ops::permute(x, {0, 2}), Contains("permute") && Contains("out of range"));
  REQUIRE_THROWS_WITH(ops::transpose(iota({3})), Contains("transpose") && Contains("rank 1"));
  REQUIRE_THROWS_WITH(ops::slice(x, 2, 0, 1), Contains("slice") && Contains("out of range"));
  REQUIRE_THROWS_WITH(ops::slice(x, 0, 0, 1, 0), Contains("slice") && Contains("step"));
  REQUIRE_THROWS_WITH(ops::slice(x, 0, 1, 0, -1), Contains("slice") && Contains("step"));
  REQUIRE_THROWS_WITH(ops::broadcast_to(x, {3, 3}), Contains("broadcast_to") && Contains("[2, 3]") &&
                                                        Contains("[3, 3]"));
  REQUIRE_THROWS_WITH(ops::broadcast_to(x, {3}), Contains("broadcast_to") && Contains("fewer"));
  REQUIRE_THROWS_WITH(ops::broadcast_to(f64({1, 2}, {2}), {1}), Contains("broadcast_to"));  // cannot shrink
  REQUIRE_THROWS_WITH(ops::expand_dims(x, 3), Contains("expand_dims") && Contains("out of range"));
  REQUIRE_THROWS_WITH(ops::squeeze(x, 0), Contains("squeeze") && Contains("[2, 3]") && Contains("expected 1"));
  REQUIRE_THROWS_WITH(ops::flatten(x, 2), Contains("flatten"));
  REQUIRE_THROWS_WITH(ops::reshape(Tensor(), {1}), Contains("reshape") && Contains("undefined"));
  REQUIRE_THROWS_WITH(ops::contiguous(Tensor()), Contains("contiguous") && Contains("undefined"));
}

TEST_CASE("pad rejects bad widths with clear messages", "[shape]") {
  const Tensor x = iota({2, 3});
  REQUIRE_THROWS_WITH(ops::pad(x, {{1, 0}, {0, -1}}), Contains("pad") && Contains("non-negative") &&
                                                        Contains("[2, 3]") && Contains("-1"));
  REQUIRE_THROWS_WITH(ops::pad(x, {{1, 0}, {0, 1}, {1, 1}}), Contains("pad") && Contains("[2, 3]") &&
                                                                 Contains("one (before, after) pair per axis"));
  REQUIRE_THROWS_WITH(ops::pad(x, {}), Contains("pad") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(ops::pad(Tensor(), {{1, 1}}), Contains("pad") && Contains("undefined"));
}

TEST_CASE("joining and indexing ops reject bad input with clear messages", "[shape]") {
  const Tensor a = iota({2, 3});
  REQUIRE_THROWS_WITH(ops::concat({}), Contains("concat") && Contains("at least one"));
  REQUIRE_THROWS_WITH(ops::concat({a, a, iota({3, 3})}, 1),
                      Contains("concat") && Contains("tensor 2") && Contains("[3, 3]") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(ops::concat({a, iota({2, 3}, DType::f32)}),
                      Contains("concat") && Contains("tensor 1") && Contains("f32") && Contains("f64"));
  REQUIRE_THROWS_WITH(ops::concat({a, iota({6})}), Contains("concat") && Contains("tensor 1") && Contains("[6]"));
  REQUIRE_THROWS_WITH(ops::concat({a}, 2), Contains("concat") && Contains("out of range"));
  REQUIRE_THROWS_WITH(ops::concat({Tensor::scalar(1.0)}), Contains("concat") && Contains("rank 0"));
  REQUIRE_THROWS_WITH(ops::stack({}), Contains("stack") && Contains("at least one"));
  REQUIRE_THROWS_WITH(ops::stack({a, iota({3, 2})}), Contains("stack") && Contains("tensor 1") && Contains("[3, 2]"));
  REQUIRE_THROWS_WITH(ops::stack({a}, 3), Contains("stack") && Contains("out of range"));
  REQUIRE_THROWS_WITH(ops::split(a, 2, 1), Contains("split") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(ops::split(a, 0, 1), Contains("split"));
  REQUIRE_THROWS_WITH(ops::split(a, std::vector<std::int64_t>{1, 1}, 1), Contains("split") && Contains("[1, 1]"));
  REQUIRE_THROWS_WITH(ops::split(a, std::vector<std::int64_t>{4, -1}, 1), Contains("split") && Contains("negative"));

  REQUIRE_THROWS_WITH(ops::take(a, i64({0, 3}, {2}), 1),
                      Contains("take") && Contains("index 3") && Contains("axis 1") && Contains("size 3"));
  REQUIRE_THROWS_WITH(ops::take(a, i64({-1}, {1}), 0), Contains("take") && Contains("negative index -1"));
  REQUIRE_THROWS_WITH(ops::take(a, f64({0}, {1}), 0), Contains("take") && Contains("i64"));
  REQUIRE_THROWS_WITH(ops::take(a, i64({0}, {1}), 2), Contains("take") && Contains("out of range"));
  REQUIRE_THROWS_WITH(ops::take_along_axis(a, i64({0, 1}, {2}), 1), Contains("take_along_axis") && Contains("rank"));
  REQUIRE_THROWS_WITH(ops::take_along_axis(a, i64({0, 1, 2, 0, 1, 2}, {3, 2}), 1),
                      Contains("take_along_axis") && Contains("broadcast"));
  REQUIRE_THROWS_WITH(ops::take_along_axis(a, i64({0, 5}, {2, 1}), 1),
                      Contains("take_along_axis") && Contains("index 5") && Contains("size 3"));
  REQUIRE_THROWS_WITH(ops::slice_backward(f64({1}, {1}), {4}, 0, 0, 4, 2), Contains("slice_backward") &&
                                                                              Contains("[2]"));
  REQUIRE_THROWS_WITH(ops::take_backward(f64({1, 2}, {2}), i64({0, 1, 2}, {3}), 0, 4), Contains("take_backward"));
  REQUIRE_THROWS_WITH(ops::take_backward(i64({1, 2}, {2}), i64({0, 1}, {2}), 0, 4),
                      Contains("take_backward") && Contains("float"));
}
