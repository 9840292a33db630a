#pragma once
// The loops under convolution and pooling: a 2-D channels_last window walk (a 1-D problem is one of height
// 1), and im2col / col2im over it. Internal: included by framework/ops/convolution.cpp and pooling.cpp.
//
// Rows are output positions numbered (image, out_y, out_x) row-major; taps are window positions numbered
// (ky, kx) row-major. For row r and tap t, the input pixel is (n, oy * stride_h - pad_top + ky * dilation_h,
// ox * stride_w - pad_left + kx * dilation_w), or none where that falls into the padding.
#include <algorithm>
#include <cstdint>

namespace loom::kernels {

struct Window2D {
  std::int64_t batch, in_h, in_w, channels;  // input [batch, in_h, in_w, channels]
  std::int64_t out_h, out_w;
  std::int64_t window_h, window_w;
  std::int64_t stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left;

  std::int64_t taps() const { return window_h * window_w; }
  std::int64_t rows_per_image() const { return out_h * out_w; }
  std::int64_t rows() const { return batch * rows_per_image(); }
};

/// The input pixel of every tap of row `r`: pixels[t] = (n * in_h + y) * in_w + x, or -1 in the padding.
/// Returns how many taps fall inside the input.
inline std::int64_t window_pixels(const Window2D& w, std::int64_t r, std::int64_t* pixels) {
  const std::int64_t n = r / w.rows_per_image(), at = r % w.rows_per_image();
  const std::int64_t y0 = (at / w.out_w) * w.stride_h - w.pad_top, x0 = (at % w.out_w) * w.stride_w - w.pad_left;
  std::int64_t inside = 0;
  for (std::int64_t ky = 0; ky < w.window_h; ++ky) {
    const std::int64_t y = y0 + ky * w.dilation_h;
    for (std::int64_t kx = 0; kx < w.window_w; ++kx) {
      const std::int64_t x = x0 + kx * w.dilation_w;
      const bool in = y >= 0 && y < w.in_h && x >= 0 && x < w.in_w;
      pixels[ky * w.window_w + kx] = in ? (n * w.in_h + y) * w.in_w + x : -1;
      inside += in;
    }
  }
  return inside;
}

/// Patches of rows [first, last) for the channels [c0, c0 + count): row r - first of `cols` holds taps() *
/// count values, tap-major, zeros in the padding. That is the row order of a kernel [kh, kw, count, filters]
/// read as a [kh * kw * count, filters] matrix. `pixels` is scratch for taps() indices.
template <class T>
void im2col(const Window2D& w, const T* x, std::int64_t c0, std::int64_t count, std::int64_t first,
            std::int64_t last, T* cols, std::int64_t* pixels) {
  for (std::int64_t r = first; r < last; ++r) {
    window_pixels(w, r, pixels);
    T* out = cols + (r - first) * w.taps() * count;
    for (std::int64_t t = 0; t < w.taps(); ++t, out += count) {
      if (pixels[t] < 0) std::fill(out, out + count, T(0));
      else std::copy(x + pixels[t] * w.channels + c0, x + pixels[t] * w.channels + c0 + count, out);
    }
  }
}

/// The adjoint of im2col: adds every patch value onto the input element it was read from (padding values are
/// dropped). Rows of one image touch only that image's pixels.
template <class T>
void col2im(const Window2D& w, const T* cols, std::int64_t c0, std::int64_t count, std::int64_t first,
            std::int64_t last, T* x, std::int64_t* pixels) {
  for (std::int64_t r = first; r < last; ++r) {
    window_pixels(w, r, pixels);
    const T* in = cols + (r - first) * w.taps() * count;
    for (std::int64_t t = 0; t < w.taps(); ++t, in += count) {
      if (pixels[t] < 0) continue;
      T* out = x + pixels[t] * w.channels + c0;
      for (std::int64_t c = 0; c < count; ++c) out[c] += in[c];
    }
  }
}

}  // namespace loom::kernels
