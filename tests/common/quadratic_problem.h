// A separable quadratic for optimizer property tests:
// f(w) = sum_i a_i (w_i - t_i)^2 / 2, with curvatures a_i from 0.01 to
// 1.01 (two orders of magnitude) and targets t_i = offset + scale *
// sin(0.37 i), started from w = 0.
#ifndef GRADWIRE_TESTS_COMMON_QUADRATIC_PROBLEM_H_
#define GRADWIRE_TESTS_COMMON_QUADRATIC_PROBLEM_H_

#include <cmath>
#include <vector>

namespace gradwire::testing {

struct Quadratic {
  static constexpr int kDim = 200;
  std::vector<float> a, t;

  explicit Quadratic(float offset = 0.0f, float scale = 1.0f) {
    for (int i = 0; i < kDim; ++i) {
      a.push_back(0.01f + 1.0f * static_cast<float>(i) / kDim);
      t.push_back(offset + scale * std::sin(0.37f * static_cast<float>(i)));
    }
  }
  void Gradient(const std::vector<float>& w, std::vector<float>* g) const {
    g->resize(kDim);
    for (int i = 0; i < kDim; ++i) (*g)[i] = a[i] * (w[i] - t[i]);
  }
  // Euclidean distance from w to the optimum t.
  double Distance(const std::vector<float>& w) const {
    double d = 0;
    for (int i = 0; i < kDim; ++i) d += (w[i] - t[i]) * (w[i] - t[i]);
    return std::sqrt(d);
  }
};

}  // namespace gradwire::testing

#endif  // GRADWIRE_TESTS_COMMON_QUADRATIC_PROBLEM_H_
