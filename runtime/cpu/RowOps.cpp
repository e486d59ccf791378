//===- RowOps.cpp ---------------------------------------------------------===//

#include "runtime/cpu/RowOps.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

using namespace kiln::cpu;

namespace {

/// Strict order: larger value first, NaN last, then lower index first.
inline bool ranksBefore(float a, int64_t ia, float b, int64_t ib) {
  const bool nanA = std::isnan(a), nanB = std::isnan(b);
  if (nanA || nanB)
    return nanA == nanB ? ia < ib : nanB;
  if (a != b)
    return a > b;
  return ia < ib;
}

/// Keeps the best k of a stream in values/indices. Small k: a sorted list
/// with insertion. Large k: a heap with the worst kept entry on top, sorted
/// at the end.
class Selector {
public:
  Selector(int64_t k, float *values, int32_t *indices)
      : k_(k), v_(values), i_(indices) {}

  void push(float v, int64_t i) {
    if (k_ <= kLinear)
      pushSorted(v, i);
    else
      pushHeap(v, i);
  }

  void finish() {
    if (k_ <= kLinear)
      return;
    // Repeatedly move the worst entry to the end.
    for (int64_t end = k_; end > 1; --end) {
      swap(0, end - 1);
      siftDown(0, end - 1);
    }
  }

private:
  static constexpr int64_t kLinear = 32;

  void pushSorted(float v, int64_t i) {
    int64_t pos = size_;
    if (size_ == k_) {
      if (!ranksBefore(v, i, v_[k_ - 1], i_[k_ - 1]))
        return;
      --pos;
    } else {
      ++size_;
    }
    while (pos > 0 && ranksBefore(v, i, v_[pos - 1], i_[pos - 1])) {
      v_[pos] = v_[pos - 1];
      i_[pos] = i_[pos - 1];
      --pos;
    }
    v_[pos] = v;
    i_[pos] = int32_t(i);
  }

  // Heap order: a parent ranks after its children (worst on top).
  bool worse(int64_t a, int64_t b) const {
    return ranksBefore(v_[b], i_[b], v_[a], i_[a]);
  }
  void swap(int64_t a, int64_t b) {
    std::swap(v_[a], v_[b]);
    std::swap(i_[a], i_[b]);
  }
  void siftDown(int64_t node, int64_t size) {
    for (;;) {
      int64_t child = 2 * node + 1;
      if (child >= size)
        return;
      if (child + 1 < size && worse(child + 1, child))
        ++child;
      if (!worse(child, node))
        return;
      swap(child, node);
      node = child;
    }
  }
  void pushHeap(float v, int64_t i) {
    if (size_ < k_) {
      int64_t node = size_++;
      v_[node] = v;
      i_[node] = int32_t(i);
      while (node > 0) {
        int64_t parent = (node - 1) / 2;
        if (!worse(node, parent))
          break;
        swap(node, parent);
        node = parent;
      }
      return;
    }
    if (!ranksBefore(v, i, v_[0], i_[0]))
      return;
    v_[0] = v;
    i_[0] = int32_t(i);
    siftDown(0, size_);
  }

  int64_t k_, size_ = 0;
  float *v_;
  int32_t *i_;
};

} // namespace

void kiln::cpu::softmax(const float *x, int64_t rows, int64_t cols, float *y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < cols; ++c)
      m = std::max(m, xr[c]);
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      yr[c] = std::exp(xr[c] - m);
      sum += yr[c];
    }
    const float inv = float(1.0 / sum);
    for (int64_t c = 0; c < cols; ++c)
      yr[c] *= inv;
  }
}

void kiln::cpu::argmax(const float *x, int64_t rows, int64_t cols,
                       int32_t *index) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols;
    int64_t best = 0;
    for (int64_t c = 1; c < cols; ++c)
      if (ranksBefore(xr[c], c, xr[best], best))
        best = c;
    index[r] = int32_t(best);
  }
}

void kiln::cpu::topK(const float *x, int64_t rows, int64_t cols, int64_t k,
                     float *values, int32_t *indices) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols;
    Selector sel(k, values + r * k, indices + r * k);
    for (int64_t c = 0; c < cols; ++c)
      sel.push(xr[c], c);
    sel.finish();
  }
}

/// Sum of the two largest entries of p[0, size) (the entry itself when
/// size is 1).
static float topTwoSum(const float *p, int64_t size) {
  int64_t first = 0, second = -1;
  for (int64_t i = 1; i < size; ++i) {
    if (ranksBefore(p[i], i, p[first], first)) {
      second = first;
      first = i;
    } else if (second < 0 || ranksBefore(p[i], i, p[second], second)) {
      second = i;
    }
  }
  return second < 0 ? p[first] : p[first] + p[second];
}

void kiln::cpu::groupLimit(const float *x, int64_t rows, int64_t cols,
                           int64_t nGroup, int64_t topkGroup, float *y) {
  const int64_t size = cols / nGroup;
  const float ninf = -std::numeric_limits<float>::infinity();
  constexpr int64_t kInline = 64;
  float inlineScores[kInline];
  std::vector<float> heapScores;
  float *scores = inlineScores;
  if (nGroup > kInline) {
    heapScores.resize(size_t(nGroup));
    scores = heapScores.data();
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    for (int64_t g = 0; g < nGroup; ++g)
      scores[g] = topTwoSum(xr + g * size, size);
    for (int64_t g = 0; g < nGroup; ++g) {
      int64_t ahead = 0;
      for (int64_t h = 0; h < nGroup; ++h)
        ahead += ranksBefore(scores[h], h, scores[g], g);
      const bool keep = ahead < topkGroup;
      for (int64_t i = g * size; i < (g + 1) * size; ++i)
        yr[i] = keep ? xr[i] : ninf;
    }
  }
}

void kiln::cpu::gather(const float *x, int64_t rows, int64_t cols,
                       const int32_t *index, int64_t k, float *y) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < k; ++j)
      y[r * k + j] = x[r * cols + index[r * k + j]];
}

void kiln::cpu::normalize(const float *x, int64_t rows, int64_t cols, float eps,
                          float *y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols;
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c)
      sum += xr[c];
    const float denom = float(sum + double(eps));
    for (int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = xr[c] / denom;
  }
}
