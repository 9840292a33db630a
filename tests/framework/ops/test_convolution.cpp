#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "framework/ops/ops.hpp"
#include "tests/bad_input_helpers.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using namespace loom::testing;

namespace {

/// Keras's padding before each spatial dimension, written from its definition: "same" puts the smaller half
/// of the total before, "causal" the whole dilated window but one.
std::vector<std::int64_t> pads_before(const Shape& spatial, const Shape& window, const std::vector<std::int64_t>& s,
                                      const std::vector<std::int64_t>& d, const std::string& padding) {
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < spatial.size(); ++i) {
    const std::int64_t span = (window[i] - 1) * d[i] + 1;
    if (padding == "valid") out.push_back(0);
    else if (padding == "causal") out.push_back(span - 1);
    else {
      const std::int64_t outputs = (spatial[i] + s[i] - 1) / s[i];
      out.push_back(std::max<std::int64_t>((outputs - 1) * s[i] + span - spatial[i], 0) / 2);
    }
  }
  return out;
}

/// The output length Keras gives each spatial dimension.
std::int64_t output_length(std::int64_t in, std::int64_t window, std::int64_t s, std::int64_t d,
                           const std::string& padding) {
  if (padding == "same") return (in + s - 1) / s;
  const std::int64_t span = (window - 1) * d + 1;
  return padding == "causal" ? (in - 1) / s + 1 : (in - span) / s + 1;
}

/// A direct, loop-by-loop convolution of a channels_last input (one or two spatial dimensions) with a kernel
/// [k..., C / groups, F].
Tensor direct_conv(const Tensor& x, const Tensor& kernel, std::vector<std::int64_t> s, std::vector<std::int64_t> d,
                   const std::string& padding) {
  const Shape xs = x.shape(), ks = kernel.shape();
  const bool one_d = xs.size() == 3;
  const Shape spatial(xs.begin() + 1, xs.end() - 1), window(ks.begin(), ks.end() - 2);
  if (s.size() == 1) s.resize(spatial.size(), s[0]);
  if (d.size() == 1) d.resize(spatial.size(), d[0]);
  const auto before = pads_before(spatial, window, s, d, padding);
  const std::int64_t n = xs[0], c = xs.back(), cg = ks[ks.size() - 2], f = ks.back(), groups = c / cg, fg = f / groups;
  const std::int64_t in_h = one_d ? 1 : spatial[0], in_w = spatial.back();
  const std::int64_t kh = one_d ? 1 : window[0], kw = window.back();
  const std::int64_t sh = one_d ? 1 : s[0], sw = s.back(), dh = one_d ? 1 : d[0], dw = d.back();
  const std::int64_t ph = one_d ? 0 : before[0], pw = before.back();
  const std::int64_t out_h = one_d ? 1 : output_length(in_h, kh, sh, dh, padding);
  const std::int64_t out_w = output_length(in_w, kw, sw, dw, padding);
  const auto xv = values(x), kv = values(kernel);
  std::vector<double> y(std::size_t(n * out_h * out_w * f), 0.0);
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t oh = 0; oh < out_h; ++oh)
      for (std::int64_t ow = 0; ow < out_w; ++ow)
        for (std::int64_t o = 0; o < f; ++o) {
          const std::int64_t g = o / fg;
          double sum = 0;
          for (std::int64_t i = 0; i < kh; ++i)
            for (std::int64_t j = 0; j < kw; ++j) {
              const std::int64_t h = oh * sh + i * dh - ph, w = ow * sw + j * dw - pw;
              if (h < 0 || h >= in_h || w < 0 || w >= in_w) continue;
              for (std::int64_t ci = 0; ci < cg; ++ci)
                sum += xv[std::size_t(((b * in_h + h) * in_w + w) * c + g * cg + ci)] *
                       kv[std::size_t(((i * kw + j) * cg + ci) * f + o)];
            }
          y[std::size_t(((b * out_h + oh) * out_w + ow) * f + o)] = sum;
        }
  Shape out_shape{n};
  if (!one_d) out_shape.push_back(out_h);
  out_shape.push_back(out_w);
  out_shape.push_back(f);
  return f64(y, out_shape);
}

/// A direct transposed convolution as Keras's JAX backend computes it: every input position scatters the
/// kernel into a full-length output ((in - 1) * stride + window), which is then cropped at the front by
/// window - 1 - left and cut (or zero-extended) to Keras's length, kernel [k..., F, C].
Tensor direct_conv_transpose(const Tensor& x, const Tensor& kernel, std::vector<std::int64_t> s,
                             std::vector<std::int64_t> d, const std::string& padding,
                             std::optional<std::vector<std::int64_t>> output_padding) {
  const Shape xs = x.shape(), ks = kernel.shape();
  const bool one_d = xs.size() == 3;
  const std::size_t rank = xs.size() - 2;
  if (s.size() == 1) s.resize(rank, s[0]);
  if (d.size() == 1) d.resize(rank, d[0]);
  if (output_padding && output_padding->size() == 1) output_padding->resize(rank, (*output_padding)[0]);
  std::vector<std::int64_t> crop(rank), length(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const std::int64_t in = xs[i + 1], span = (ks[i] - 1) * d[i] + 1;
    std::int64_t left;
    if (padding == "valid") {
      left = span - 1;
      const std::int64_t extra = output_padding ? (*output_padding)[i] : std::max(span, s[i]) - span;
      length[i] = (in - 1) * s[i] + span + extra;
    } else {
      const std::int64_t total = output_padding ? span + span % 2 - 2 + (*output_padding)[i] : s[i] + span - 2;
      left = std::min(total / 2 + total % 2, span - 1);
      length[i] = (in - 1) * s[i] + 1 + total - span + 1;
    }
    crop[i] = span - 1 - left;
  }
  const std::int64_t n = xs[0], c = xs.back(), f = ks[ks.size() - 2];
  const std::int64_t in_h = one_d ? 1 : xs[1], in_w = xs[rank];
  const std::int64_t kh = one_d ? 1 : ks[0], kw = ks[rank - 1];
  const std::int64_t sh = one_d ? 1 : s[0], sw = s.back(), dh = one_d ? 1 : d[0], dw = d.back();
  const std::int64_t out_h = one_d ? 1 : length[0], out_w = length.back();
  const std::int64_t crop_h = one_d ? 0 : crop[0], crop_w = crop.back();
  const auto xv = values(x), kv = values(kernel);
  std::vector<double> y(std::size_t(n * out_h * out_w * f), 0.0);
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t h = 0; h < in_h; ++h)
      for (std::int64_t w = 0; w < in_w; ++w)
        for (std::int64_t i = 0; i < kh; ++i)
          for (std::int64_t j = 0; j < kw; ++j) {
            const std::int64_t oh = h * sh + i * dh - crop_h, ow = w * sw + j * dw - crop_w;
            if (oh < 0 || oh >= out_h || ow < 0 || ow >= out_w) continue;
            for (std::int64_t o = 0; o < f; ++o)
              for (std::int64_t ci = 0; ci < c; ++ci)
                y[std::size_t(((b * out_h + oh) * out_w + ow) * f + o)] +=
                    xv[std::size_t(((b * in_h + h) * in_w + w) * c + ci)] *
                    kv[std::size_t(((i * kw + j) * f + o) * c + ci)];
          }
  Shape out_shape{n};
  out_shape.insert(out_shape.end(), length.begin(), length.end());
  out_shape.push_back(f);
  return f64(y, out_shape);
}

struct ConvCase {
  Shape x, kernel;
  std::vector<std::int64_t> strides, dilation;
  std::string padding;
};

/// Every padding / stride / dilation / groups combination the op supports, in one and two dimensions, small
/// enough for a gradient check; odd sizes make "same" pad unevenly.
std::vector<ConvCase> conv_cases() {
  std::vector<ConvCase> cases;
  for (const std::string padding : {"valid", "same", "causal"})
    for (std::int64_t stride : {1, 2})
      for (std::int64_t dilation : {1, 2})
        for (std::int64_t groups : {1, 2}) {
          cases.push_back({{2, 7, 4}, {3, 4 / groups, 2 * groups}, {stride}, {dilation}, padding});
          if (padding != "causal")
            cases.push_back({{1, 6, 5, 4}, {3, 2, 4 / groups, 2 * groups}, {stride, 1}, {1, dilation}, padding});
        }
  cases.push_back({{1, 5, 5, 3}, {2, 2, 3, 2}, {2}, {1}, "same"});   // even kernel, odd input: extra pad after
  cases.push_back({{1, 4, 4, 6}, {1, 1, 2, 3}, {1}, {1}, "valid"});  // pointwise, 3 groups
  cases.push_back({{2, 4, 3, 2}, {4, 3, 2, 2}, {1}, {1}, "valid"});  // the kernel covers the whole input
  return cases;
}

std::string describe(const ConvCase& c) {
  return fmt::format("x {} kernel {} strides {} dilation {} {}", c.x, c.kernel, Shape(c.strides), Shape(c.dilation),
                     c.padding);
}

ops::ConvOptions options_of(const ConvCase& c) {
  return {.strides = c.strides, .padding = c.padding, .dilation_rate = c.dilation};
}

}  // namespace

TEST_CASE("conv matches a direct sum for every padding\\, stride\\, dilation and groups", "[conv]") {
  for (const auto& c : conv_cases()) {
    INFO(describe(c));
    const Tensor x = randn(c.x, 1), kernel = randn(c.kernel, 2);
    const Tensor y = ops::conv(x, kernel, options_of(c));
    const Tensor want = direct_conv(x, kernel, c.strides, c.dilation, c.padding);
    REQUIRE(y.shape() == want.shape());
    check_close(values(y), values(want), 1e-12);
  }
}

TEST_CASE("conv's float64 gradients check for every padding\\, stride\\, dilation and groups", "[conv][gradcheck]") {
  for (const auto& c : conv_cases()) {
    INFO(describe(c));
    const auto options = options_of(c);
    require_gradcheck([options](const std::vector<Tensor>& v) { return ops::conv(v[0], v[1], options); },
                      {randn(c.x, 3), randn(c.kernel, 4)});
  }
}

TEST_CASE("conv's second derivatives check", "[conv][gradcheck]") {
  const ops::ConvOptions options{.strides = {2, 1}, .padding = "same", .dilation_rate = {1, 2}};
  require_gradgradcheck([options](const std::vector<Tensor>& v) { return ops::conv(v[0], v[1], options); },
                        {randn({1, 5, 5, 2}, 5), randn({3, 2, 1, 4}, 6)});
  const ops::ConvOptions causal{.padding = "causal", .dilation_rate = {2}};
  require_gradgradcheck([causal](const std::vector<Tensor>& v) { return ops::conv(v[0], v[1], causal); },
                        {randn({2, 6, 2}, 7), randn({2, 2, 3}, 8)});
}

TEST_CASE("conv over many patch blocks and threads matches the direct sum\\, in float32 too", "[conv]") {
  // 2 * 40 * 40 output rows of a 72-value patch: several blocks of the patch matrix, run on the worker pool.
  const Tensor x = randn({2, 40, 40, 8}, 9), kernel = randn({3, 3, 8, 5}, 10);
  const ops::ConvOptions options{.padding = "same"};
  const Tensor want = direct_conv(x, kernel, {1}, {1}, "same");
  check_close(values(ops::conv(x, kernel, options)), values(want), 1e-11);
  const Tensor y32 = ops::conv(x.to(DType::f32), kernel.to(DType::f32), options);
  REQUIRE(y32.dtype() == DType::f32);
  check_close(values(y32), values(want), 1e-4, 1e-4);

  // the gradients agree with the adjoint identity <g, conv(x, k)> = <dx, x> = <dk, k> (conv is bilinear)
  const Tensor g = randn(want.shape(), 11);
  const auto dx = values(ops::conv_backward_input(g, kernel, x.shape(), ops::window_geometry({40, 40}, {3, 3}, {1},
                                                                                              {1}, "same", "conv")));
  const auto dk = values(ops::conv_backward_kernel(x, g, kernel.shape(), ops::window_geometry({40, 40}, {3, 3}, {1},
                                                                                              {1}, "same", "conv")));
  const auto inner = [](const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
  };
  const double form = inner(values(g), values(want));
  CHECK(inner(dx, values(x)) == Approx(form).epsilon(1e-11));
  CHECK(inner(dk, values(kernel)) == Approx(form).epsilon(1e-11));
}

TEST_CASE("conv with channels_first is the channels_last conv transposed", "[conv]") {
  const Tensor x = randn({2, 3, 6, 5}, 12), kernel = randn({3, 3, 3, 4}, 13);  // x is [N, C, H, W]
  const ops::ConvOptions first{.strides = {2}, .padding = "same", .data_format = "channels_first"};
  const Tensor y = ops::conv(x, kernel, first);
  const Tensor want = ops::permute(ops::conv(ops::permute(x, {0, 2, 3, 1}), kernel, {.strides = {2}, .padding = "same"}),
                                   {0, 3, 1, 2});
  REQUIRE(y.shape() == Shape{2, 4, 3, 3});
  check_close(values(y), values(want), 1e-12);
  require_gradcheck([first](const std::vector<Tensor>& v) { return ops::conv(v[0], v[1], first); },
                    {randn({1, 2, 4, 3}, 14), randn({2, 2, 2, 3}, 15)});
  const ops::ConvOptions first_1d{.padding = "causal", .data_format = "Channels_First"};
  CHECK(ops::conv(randn({2, 3, 7}, 16), randn({2, 3, 5}, 17), first_1d).shape() == Shape{2, 5, 7});
}

TEST_CASE("depthwise_conv convolves each channel with its own filters", "[conv]") {
  for (const std::string padding : {"valid", "same"})
    for (std::int64_t stride : {1, 2})
      for (std::int64_t dilation : {1, 2}) {
        INFO(padding << " stride " << stride << " dilation " << dilation);
        const Tensor x = randn({2, 6, 7, 3}, 18), kernel = randn({3, 2, 3, 2}, 19);  // multiplier 2
        const ops::ConvOptions options{.strides = {stride}, .padding = padding, .dilation_rate = {dilation}};
        const Tensor y = ops::depthwise_conv(x, kernel, options);
        // channel c * 2 + m is input channel c alone through kernel[..., c, m]
        for (std::int64_t c = 0; c < 3; ++c)
          for (std::int64_t m = 0; m < 2; ++m) {
            const Tensor xc = ops::slice(x, 3, c, c + 1);
            const Tensor kc = ops::slice(ops::slice(kernel, 2, c, c + 1), 3, m, m + 1);
            const Tensor want = direct_conv(xc, kc, {stride}, {dilation}, padding);
            check_close(values(ops::slice(y, 3, c * 2 + m, c * 2 + m + 1)), values(want), 1e-12);
          }
        require_gradcheck([options](const std::vector<Tensor>& v) { return ops::depthwise_conv(v[0], v[1], options); },
                          {randn({1, 5, 4, 2}, 20), randn({3, 2, 2, 2}, 21)});
      }
  require_gradcheck(
      [](const std::vector<Tensor>& v) { return ops::depthwise_conv(v[0], v[1], {.padding = "causal"}); },
      {randn({2, 6, 3}, 22), randn({3, 3, 1}, 23)});
}

TEST_CASE("conv_transpose follows Keras's output sizes and is conv's adjoint", "[conv]") {
  struct Case {
    Shape x, kernel;
    std::vector<std::int64_t> strides, dilation;
    std::string padding;
    std::optional<std::vector<std::int64_t>> output_padding;
    Shape want;
  };
  const std::vector<Case> cases{
      {{2, 4, 3, 3}, {3, 3, 2, 3}, {1}, {1}, "valid", std::nullopt, {2, 6, 5, 2}},
      {{2, 4, 3, 3}, {3, 3, 2, 3}, {2}, {1}, "valid", std::nullopt, {2, 9, 7, 2}},
      {{2, 4, 3, 3}, {3, 3, 2, 3}, {2}, {1}, "same", std::nullopt, {2, 8, 6, 2}},
      {{1, 3, 3, 2}, {4, 4, 3, 2}, {2}, {1}, "same", std::nullopt, {1, 6, 6, 3}},
      {{1, 3, 3, 2}, {2, 2, 3, 2}, {3}, {1}, "valid", std::nullopt, {1, 9, 9, 3}},  // window < stride: zeros after
      {{1, 3, 4, 2}, {3, 2, 2, 2}, {2, 1}, {1}, "valid", std::vector<std::int64_t>{1, 0}, {1, 8, 5, 2}},
      {{1, 3, 4, 2}, {3, 3, 2, 2}, {2}, {1}, "same", std::vector<std::int64_t>{1}, {1, 6, 8, 2}},
      {{1, 3, 4, 2}, {4, 4, 2, 2}, {2}, {1}, "same", std::vector<std::int64_t>{0}, {1, 4, 6, 2}},
      {{1, 3, 3, 2}, {3, 3, 2, 2}, {1}, {2}, "valid", std::nullopt, {1, 7, 7, 2}},
      {{1, 3, 3, 2}, {3, 3, 2, 2}, {1}, {2}, "same", std::nullopt, {1, 3, 3, 2}},
      {{2, 5, 3}, {3, 2, 3}, {2}, {1}, "same", std::nullopt, {2, 10, 2}},
      {{2, 5, 3}, {3, 2, 3}, {3}, {2}, "valid", std::vector<std::int64_t>{2}, {2, 19, 2}},
  };
  for (const auto& c : cases) {
    INFO(fmt::format("x {} kernel {} strides {} dilation {} {}", c.x, c.kernel, Shape(c.strides), Shape(c.dilation),
                     c.padding));
    const ops::ConvTransposeOptions options{
        .strides = c.strides, .padding = c.padding, .output_padding = c.output_padding, .dilation_rate = c.dilation};
    const Tensor x = randn(c.x, 24), kernel = randn(c.kernel, 25);
    const Tensor y = ops::conv_transpose(x, kernel, options);
    REQUIRE(y.shape() == c.want);
    const Tensor want = direct_conv_transpose(x, kernel, c.strides, c.dilation, c.padding, c.output_padding);
    check_close(values(y), values(want), 1e-12);
    require_gradcheck([options](const std::vector<Tensor>& v) { return ops::conv_transpose(v[0], v[1], options); },
                      {x, kernel});
  }
  const ops::ConvTransposeOptions twice{.strides = {2}, .padding = "same", .data_format = "channels_first"};
  require_gradgradcheck([twice](const std::vector<Tensor>& v) { return ops::conv_transpose(v[0], v[1], twice); },
                        {randn({1, 2, 3, 2}, 26), randn({3, 3, 2, 2}, 27)});
}

TEST_CASE("conv's kernel gradient summed in pieces is the adjoint of conv", "[conv]") {
  // 8192 output rows of a 144-value patch: the rows are cut into pieces with partial sums added in order.
  const Tensor x = randn({8, 32, 32, 16}, 28), g = randn({8, 32, 32, 8}, 29);
  const auto geometry = ops::window_geometry({32, 32}, {3, 3}, {1}, {1}, "same", "conv");
  const auto dk = values(ops::conv_backward_kernel(x, g, {3, 3, 16, 8}, geometry));
  CHECK(values(ops::conv_backward_kernel(x, g, {3, 3, 16, 8}, geometry)) == dk);  // the same bits every run
  for (std::uint64_t seed : {30, 31, 32}) {
    const Tensor k = randn({3, 3, 16, 8}, seed);
    const double form = values(ops::sum(ops::conv_general(x, k, geometry) * g))[0];
    double paired = 0;
    const auto kv = values(k);
    for (std::size_t i = 0; i < kv.size(); ++i) paired += dk[i] * kv[i];
    CHECK(paired == Approx(form).epsilon(1e-11));
  }
}

TEST_CASE("conv ops reject bad input with the op and the shapes", "[conv][bad-input]") {
  const Tensor x = randn({2, 5, 5, 4}, 30), k = randn({3, 3, 4, 2}, 31);
  run_bad_inputs("conv", {
      {"kernel larger than the input", [&] { ops::conv(x, randn({6, 3, 4, 2}, 1)); }, {"conv", "[2, 5, 5, 4]", "6"}},
      {"kernel larger than the dilated input",
       [&] { ops::conv(x, k, {.dilation_rate = {3}}); }, {"conv", "[2, 5, 5, 4]"}},
      {"channels not a multiple of the kernel's",
       [&] { ops::conv(x, randn({3, 3, 3, 2}, 1)); }, {"conv", "[2, 5, 5, 4]", "[3, 3, 3, 2]"}},
      {"filters not divisible by groups",
       [&] { ops::conv(x, randn({3, 3, 2, 3}, 1)); }, {"conv", "3 filters", "2 groups"}},
      {"wrong input rank", [&] { ops::conv(randn({5, 4}, 1), k); }, {"conv", "[5, 4]"}},
      {"kernel of another rank", [&] { ops::conv(x, randn({3, 4, 2}, 1)); }, {"conv", "[3, 4, 2]"}},
      {"mixed dtypes", [&] { ops::conv(x.to(DType::f32), k); }, {"conv", "float32", "float64"}},
      {"integer input", [&] { ops::conv(i64({1, 2, 3, 4, 5, 6}, {1, 3, 2}), i64({1, 2}, {1, 2, 1})); }, {"conv"}},
      {"unknown padding", [&] { ops::conv(x, k, {.padding = "full"}); }, {"conv", "full"}},
      {"causal in two dimensions", [&] { ops::conv(x, k, {.padding = "causal"}); }, {"conv", "causal"}},
      {"zero stride", [&] { ops::conv(x, k, {.strides = {0}}); }, {"conv", "stride"}},
      {"strides of the wrong length", [&] { ops::conv(x, k, {.strides = {1, 1, 1}}); }, {"conv", "strides"}},
      {"unknown data_format", [&] { ops::conv(x, k, {.data_format = "NHWC"}); }, {"conv", "NHWC"}},
      {"channels_first data to a channels_last conv: channels mismatch",
       [&] { ops::conv(randn({2, 4, 5, 5}, 1), k); }, {"conv", "[2, 4, 5, 5]", "[3, 3, 4, 2]"}},
      {"depthwise kernel of other channels",
       [&] { ops::depthwise_conv(x, randn({3, 3, 3, 2}, 1)); }, {"depthwise_conv", "[2, 5, 5, 4]", "[3, 3, 3, 2]"}},
      {"output_padding not below the stride",
       [&] { ops::conv_transpose(x, randn({3, 3, 2, 4}, 1), {.strides = {2}, .output_padding = std::vector<std::int64_t>{2}}); },
       {"conv_transpose", "output_padding"}},
      {"transpose kernel of other channels",
       [&] { ops::conv_transpose(x, randn({3, 3, 2, 3}, 1)); }, {"conv_transpose", "[2, 5, 5, 4]", "[3, 3, 2, 3]"}},
      {"causal transpose", [&] { ops::conv_transpose(randn({1, 4, 2}, 1), randn({2, 2, 2}, 1), {.padding = "causal"}); },
       {"conv_transpose", "causal"}},
  });
}
