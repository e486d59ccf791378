//===- WireWords.h - Values as int64 words for the collectives --*- C++ -*-===//
//
// What the serving ranks send each other (StepEvents, StepReport) travels
// as one vector of int64 words, because the collectives move numbers:
// counts and values in field order, strings as their length then their
// bytes packed 8 to a word, floats as their bits. Reader fails, naming the
// field, on a message cut short or a count out of range.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SERVE_WIREWORDS_H
#define KILN_RUNTIME_SERVE_WIREWORDS_H

#include "support/Status.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace kiln::serve::wire {

class Writer {
public:
  void word(int64_t w) { words.push_back(w); }
  void flag(bool b) { word(b ? 1 : 0); }
  void real(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    word(int64_t(bits));
  }
  void real64(double d) {
    int64_t bits;
    std::memcpy(&bits, &d, sizeof bits);
    word(bits);
  }
  void text(const std::string &s) {
    word(int64_t(s.size()));
    for (size_t i = 0; i < s.size(); i += 8) {
      int64_t w = 0;
      std::memcpy(&w, s.data() + i, std::min<size_t>(8, s.size() - i));
      word(w);
    }
  }
  template <typename T> void list(const std::vector<T> &v) {
    word(int64_t(v.size()));
    for (const T &x : v)
      word(int64_t(x));
  }

  std::vector<int64_t> words;
};

class Reader {
public:
  explicit Reader(const std::vector<int64_t> &words) : words_(words) {}

  bool ok() const { return error_.empty(); }
  /// Ok when nothing failed and every word was read; else DataLoss naming
  /// `what` (e.g. "step events") and the problem.
  Status finish(const char *what) const {
    if (!ok())
      return makeError(StatusCode::DataLoss, what, ": ", error_);
    if (!atEnd())
      return makeError(StatusCode::DataLoss, what, ": ", words_.size(),
                       " words, more than the message uses");
    return Status::ok();
  }
  const std::string &error() const { return error_; }
  bool atEnd() const { return pos_ == words_.size(); }

  int64_t word(const char *what) {
    if (pos_ >= words_.size()) {
      fail(std::string("cut short at ") + what);
      return 0;
    }
    return words_[pos_++];
  }
  /// A count of at most the words left (each element takes one or more).
  size_t count(const char *what) {
    int64_t n = word(what);
    if (n < 0 || uint64_t(n) > words_.size() - pos_) {
      fail(std::string("count ") + std::to_string(n) + " of " + what +
           " is out of range");
      return 0;
    }
    return size_t(n);
  }
  bool flag(const char *what) { return word(what) != 0; }
  float real(const char *what) {
    uint32_t bits = uint32_t(word(what));
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  double real64(const char *what) {
    int64_t bits = word(what);
    double d;
    std::memcpy(&d, &bits, sizeof d);
    return d;
  }
  std::string text(const char *what) {
    int64_t n = word(what);
    if (n < 0 || uint64_t(n) > 8 * (words_.size() - pos_)) {
      fail(std::string("length ") + std::to_string(n) + " of " + what +
           " is out of range");
      return {};
    }
    std::string s(size_t(n), '\0');
    for (size_t i = 0; i < s.size(); i += 8) {
      int64_t w = word(what);
      std::memcpy(s.data() + i, &w, std::min<size_t>(8, s.size() - i));
    }
    return s;
  }
  template <typename T> std::vector<T> list(const char *what) {
    std::vector<T> v(count(what));
    for (T &x : v)
      x = T(word(what));
    return v;
  }

private:
  void fail(std::string message) {
    if (error_.empty())
      error_ = std::move(message);
    pos_ = words_.size();
  }

  const std::vector<int64_t> &words_;
  size_t pos_ = 0;
  std::string error_;
};

} // namespace kiln::serve::wire

#endif // KILN_RUNTIME_SERVE_WIREWORDS_H
