//===- Npy.cpp - Reading and writing NumPy .npy files ---------------------===//

#include "runtime/support/Npy.h"

#include <fstream>
#include <limits>

namespace kiln {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

bool hostIsLittleEndian() {
  uint16_t probe = 1;
  uint8_t first;
  std::memcpy(&first, &probe, 1);
  return first == 1;
}

/// The header dictionary, e.g.
///   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
struct NpyHeader {
  std::string descr;
  bool fortranOrder = false;
  std::vector<int64_t> shape;
};

/// A tiny parser for the Python literal subset that NumPy writes.
class HeaderParser {
public:
  HeaderParser(const std::string &text, const std::string &name)
      : text_(text), name_(name) {}

  Result<NpyHeader> parse() {
    NpyHeader header;
    bool haveDescr = false, haveOrder = false, haveShape = false;
    skipSpace();
    KILN_RETURN_IF_ERROR(expect('{'));
    while (true) {
      skipSpace();
      if (peek() == '}') {
        ++pos_;
        break;
      }
      KILN_ASSIGN_OR_RETURN(std::string key, parseString());
      skipSpace();
      KILN_RETURN_IF_ERROR(expect(':'));
      skipSpace();
      if (key == "descr") {
        if (peek() != '\'' && peek() != '"')
          return error("'descr' must be a string (structured dtypes are not "
                       "supported)");
        KILN_ASSIGN_OR_RETURN(header.descr, parseString());
        haveDescr = true;
      } else if (key == "fortran_order") {
        KILN_ASSIGN_OR_RETURN(header.fortranOrder, parseBool());
        haveOrder = true;
      } else if (key == "shape") {
        KILN_ASSIGN_OR_RETURN(header.shape, parseShape());
        haveShape = true;
      } else {
        return error("unexpected key '" + key +
                     "', expected only 'descr', 'fortran_order' and 'shape'");
      }
      skipSpace();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        break;
      }
      return error("expected ',' or '}' after the value of '" + key + "'");
    }
    skipSpace();
    if (pos_ != text_.size())
      return error("unexpected text after the header dictionary");
    if (!haveDescr || !haveOrder || !haveShape)
      return error(std::string("missing key '") +
                   (!haveDescr   ? "descr"
                    : !haveOrder ? "fortran_order"
                                 : "shape") +
                   "'");
    return header;
  }

private:
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  Status error(const std::string &what) const {
    return makeError(StatusCode::InvalidArgument, name_,
                     ": malformed .npy header at character ", pos_, ": ", what,
                     " (header: ", text_.substr(0, 200), ")");
  }
  Status expect(char c) {
    if (peek() != c)
      return error(std::string("expected '") + c + "'");
    ++pos_;
    return Status::ok();
  }
  Result<std::string> parseString() {
    char quote = peek();
    if (quote != '\'' && quote != '"')
      return error("expected a quoted string");
    size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string::npos)
      return error("unterminated string");
    std::string s = text_.substr(pos_ + 1, end - pos_ - 1);
    pos_ = end + 1;
    return s;
  }
  Result<bool> parseBool() {
    if (text_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      return true;
    }
    if (text_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      return false;
    }
    return error("'fortran_order' must be True or False");
  }
  Result<std::vector<int64_t>> parseShape() {
    std::vector<int64_t> shape;
    KILN_RETURN_IF_ERROR(expect('('));
    while (true) {
      skipSpace();
      if (peek() == ')') {
        ++pos_;
        return shape;
      }
      if (peek() < '0' || peek() > '9')
        return error("'shape' must be a tuple of non-negative integers");
      int64_t dim = 0;
      while (peek() >= '0' && peek() <= '9') {
        int digit = peek() - '0';
        if (dim > (std::numeric_limits<int64_t>::max() - digit) / 10)
          return error("a 'shape' dimension overflows int64");
        dim = dim * 10 + digit;
        ++pos_;
      }
      if (peek() == 'L') // Python 2 long suffix
        ++pos_;
      shape.push_back(dim);
      if (shape.size() > 64)
        return error("'shape' has more than 64 dimensions");
      skipSpace();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != ')')
        return error("expected ',' or ')' in 'shape'");
    }
  }

  const std::string &text_;
  const std::string &name_;
  size_t pos_ = 0;
};

/// Number of elements and bytes of an array, with overflow checks.
Result<size_t> checkedByteSize(const std::vector<int64_t> &shape,
                               size_t elementSize, const std::string &name) {
  size_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0)
      return makeError(StatusCode::InvalidArgument, name,
                       ": negative dimension ", dim, " in shape");
    if (dim != 0 &&
        count > std::numeric_limits<size_t>::max() / static_cast<size_t>(dim))
      return makeError(StatusCode::OutOfRange, name,
                       ": the element count of the shape overflows size_t");
    count *= static_cast<size_t>(dim);
  }
  if (count > std::numeric_limits<size_t>::max() / elementSize)
    return makeError(StatusCode::OutOfRange, name,
                     ": the byte size of the shape overflows size_t");
  return count * elementSize;
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1)
    s += ",";
  return s + ")";
}

} // namespace

size_t npyDTypeSize(NpyDType dtype) {
  switch (dtype) {
  case NpyDType::I8:
  case NpyDType::U8:
  case NpyDType::Bool:
    return 1;
  case NpyDType::F16:
  case NpyDType::I16:
  case NpyDType::U16:
    return 2;
  case NpyDType::F32:
  case NpyDType::I32:
  case NpyDType::U32:
    return 4;
  case NpyDType::F64:
  case NpyDType::I64:
  case NpyDType::U64:
    return 8;
  }
  return 1;
}

const char *npyDTypeDescr(NpyDType dtype) {
  switch (dtype) {
  case NpyDType::F16:
    return "<f2";
  case NpyDType::F32:
    return "<f4";
  case NpyDType::F64:
    return "<f8";
  case NpyDType::I8:
    return "|i1";
  case NpyDType::I16:
    return "<i2";
  case NpyDType::I32:
    return "<i4";
  case NpyDType::I64:
    return "<i8";
  case NpyDType::U8:
    return "|u1";
  case NpyDType::U16:
    return "<u2";
  case NpyDType::U32:
    return "<u4";
  case NpyDType::U64:
    return "<u8";
  case NpyDType::Bool:
    return "|b1";
  }
  return "?";
}

Result<NpyDType> parseNpyDescr(const std::string &descr) {
  if (descr.size() != 3)
    return makeError(StatusCode::InvalidArgument, "unsupported npy descr '",
                     descr,
                     "', expected e.g. '<f4', '<i4', '<i8', '<f2', '|u1'");
  char order = descr[0];
  std::string kind = descr.substr(1);
  if (order == '>')
    return makeError(StatusCode::InvalidArgument, "npy descr '", descr,
                     "' is big-endian; only little-endian data is supported");
  if (order != '<' && order != '|' && order != '=')
    return makeError(StatusCode::InvalidArgument, "npy descr '", descr,
                     "' has an unknown byte-order character '", order, "'");
  static const NpyDType all[] = {NpyDType::F16, NpyDType::F32, NpyDType::F64,
                                 NpyDType::I8,  NpyDType::I16, NpyDType::I32,
                                 NpyDType::I64, NpyDType::U8,  NpyDType::U16,
                                 NpyDType::U32, NpyDType::U64, NpyDType::Bool};
  for (NpyDType dtype : all) {
    if (kind != npyDTypeDescr(dtype) + 1)
      continue;
    // '|' (no byte order) is only meaningful for one-byte types.
    if (order == '|' && npyDTypeSize(dtype) != 1)
      return makeError(StatusCode::InvalidArgument, "npy descr '", descr,
                       "' has no byte order but a multi-byte element");
    return dtype;
  }
  return makeError(StatusCode::InvalidArgument, "unsupported npy descr '",
                   descr,
                   "', expected one of f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1");
}

size_t NpyArray::numElements() const {
  size_t count = 1;
  for (int64_t dim : shape)
    count *= static_cast<size_t>(dim);
  return count;
}

Result<NpyArray> parseNpy(const uint8_t *bytes, size_t size,
                          const std::string &name) {
  if (!hostIsLittleEndian())
    return makeError(StatusCode::Unavailable, name,
                     ": .npy support needs a little-endian host");
  if (size < kMagicSize + 4 || std::memcmp(bytes, kMagic, kMagicSize) != 0)
    return makeError(StatusCode::InvalidArgument, name,
                     ": not a .npy file (expected the magic \\x93NUMPY, found ",
                     size < kMagicSize
                         ? "a file of " + std::to_string(size) + " bytes"
                         : std::string("other bytes"),
                     ")");
  uint8_t major = bytes[6], minor = bytes[7];
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen =
        static_cast<size_t>(bytes[8]) | (static_cast<size_t>(bytes[9]) << 8);
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12)
      return makeError(StatusCode::DataLoss, name, ": truncated .npy v",
                       int(major), " preamble");
    headerLen = static_cast<size_t>(bytes[8]) |
                (static_cast<size_t>(bytes[9]) << 8) |
                (static_cast<size_t>(bytes[10]) << 16) |
                (static_cast<size_t>(bytes[11]) << 24);
    headerStart = 12;
  } else {
    return makeError(StatusCode::InvalidArgument, name,
                     ": unsupported .npy version ", int(major), ".", int(minor),
                     ", expected 1.x, 2.x or 3.x");
  }
  if (headerLen > size - headerStart)
    return makeError(StatusCode::DataLoss, name, ": .npy header length ",
                     headerLen, " exceeds the file (", size - headerStart,
                     " bytes after the preamble)");
  std::string headerText(reinterpret_cast<const char *>(bytes) + headerStart,
                         headerLen);
  KILN_ASSIGN_OR_RETURN(NpyHeader header,
                        HeaderParser(headerText, name).parse());
  if (header.fortranOrder)
    return makeError(StatusCode::InvalidArgument, name,
                     ": 'fortran_order' is True; only C-order arrays are "
                     "supported");
  Result<NpyDType> dtype = parseNpyDescr(header.descr);
  if (!dtype.isOk())
    return dtype.status().withContext(name + ": 'descr'");
  KILN_ASSIGN_OR_RETURN(
      size_t expected,
      checkedByteSize(header.shape, npyDTypeSize(*dtype), name));
  size_t dataStart = headerStart + headerLen;
  size_t found = size - dataStart;
  if (found != expected)
    return makeError(
        found < expected ? StatusCode::DataLoss : StatusCode::InvalidArgument,
        name, ": shape ", shapeString(header.shape), " of '", header.descr,
        "' needs ", expected, " data bytes, found ", found);
  NpyArray array;
  array.dtype = *dtype;
  array.shape = std::move(header.shape);
  array.data.assign(bytes + dataStart, bytes + size);
  return array;
}

Result<NpyArray> readNpy(const std::string &path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    return makeError(StatusCode::NotFound, path, ": cannot open .npy file");
  std::streamoff end = in.tellg();
  if (end < 0)
    return makeError(StatusCode::DataLoss, path, ": cannot determine size");
  std::vector<uint8_t> bytes(static_cast<size_t>(end));
  in.seekg(0);
  if (!bytes.empty() && !in.read(reinterpret_cast<char *>(bytes.data()), end))
    return makeError(StatusCode::DataLoss, path, ": short read, expected ", end,
                     " bytes");
  return parseNpy(bytes.data(), bytes.size(), path);
}

Result<std::vector<uint8_t>> serializeNpy(NpyDType dtype,
                                          const std::vector<int64_t> &shape,
                                          const void *data, size_t dataBytes) {
  KILN_ASSIGN_OR_RETURN(size_t expected,
                        checkedByteSize(shape, npyDTypeSize(dtype), "npy"));
  if (expected != dataBytes)
    return makeError(StatusCode::InvalidArgument, "npy: shape ",
                     shapeString(shape), " of '", npyDTypeDescr(dtype),
                     "' needs ", expected, " data bytes, given ", dataBytes);
  if (dataBytes != 0 && data == nullptr)
    return makeError(StatusCode::InvalidArgument, "npy: null data pointer");
  std::string header =
      std::string("{'descr': '") + npyDTypeDescr(dtype) +
      "', 'fortran_order': False, 'shape': " + shapeString(shape) + ", }";
  // Pad so that the data starts at a multiple of 64 bytes; the header ends
  // with '\n'. Version 1 stores the header length in 16 bits.
  auto padded = [&](size_t preamble) {
    size_t total = preamble + header.size() + 1;
    return header.size() + (64 - total % 64) % 64 + 1;
  };
  uint8_t major = 1;
  size_t preamble = kMagicSize + 2 + 2;
  if (padded(preamble) > 65535) {
    major = 2;
    preamble += 2;
  }
  size_t headerLen = padded(preamble);
  header.append(headerLen - header.size() - 1, ' ');
  header.push_back('\n');

  std::vector<uint8_t> out;
  out.reserve(preamble + headerLen + dataBytes);
  out.insert(out.end(), kMagic, kMagic + kMagicSize);
  out.push_back(major);
  out.push_back(0);
  out.push_back(static_cast<uint8_t>(headerLen & 0xff));
  out.push_back(static_cast<uint8_t>((headerLen >> 8) & 0xff));
  if (major == 2) {
    out.push_back(static_cast<uint8_t>((headerLen >> 16) & 0xff));
    out.push_back(static_cast<uint8_t>((headerLen >> 24) & 0xff));
  }
  out.insert(out.end(), header.begin(), header.end());
  const uint8_t *p = static_cast<const uint8_t *>(data);
  if (dataBytes)
    out.insert(out.end(), p, p + dataBytes);
  return out;
}

Status writeNpy(const std::string &path, NpyDType dtype,
                const std::vector<int64_t> &shape, const void *data,
                size_t dataBytes) {
  if (!hostIsLittleEndian())
    return makeError(StatusCode::Unavailable, path,
                     ": .npy support needs a little-endian host");
  Result<std::vector<uint8_t>> bytes =
      serializeNpy(dtype, shape, data, dataBytes);
  if (!bytes.isOk())
    return bytes.status().withContext(path);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    return makeError(StatusCode::NotFound, path, ": cannot open for writing");
  out.write(reinterpret_cast<const char *>(bytes->data()),
            static_cast<std::streamsize>(bytes->size()));
  out.close();
  if (!out)
    return makeError(StatusCode::DataLoss, path, ": write failed");
  return Status::ok();
}

Status writeNpy(const std::string &path, const NpyArray &array) {
  return writeNpy(path, array.dtype, array.shape, array.data.data(),
                  array.data.size());
}

Status writeNpyF32(const std::string &path, const std::vector<int64_t> &shape,
                   const std::vector<float> &data) {
  return writeNpy(path, NpyDType::F32, shape, data.data(),
                  data.size() * sizeof(float));
}

Status writeNpyI32(const std::string &path, const std::vector<int64_t> &shape,
                   const std::vector<int32_t> &data) {
  return writeNpy(path, NpyDType::I32, shape, data.data(),
                  data.size() * sizeof(int32_t));
}

} // namespace kiln
