//===- TestUtil.cpp - Helpers for the checkpoint gtests -------------------===//

#include "TestUtil.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kiln::glm::testing {

TempDir::TempDir() {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "kiln-ckpt-XXXXXX").string();
  char *made = ::mkdtemp(pattern.data());
  EXPECT_NE(made, nullptr);
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

std::string rawSafetensors(const std::string &header, const std::string &data,
                           int64_t declaredLength) {
  uint64_t n = declaredLength < 0 ? header.size() : uint64_t(declaredLength);
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

uint64_t declBytes(const TensorDecl &decl) {
  uint64_t n = dtypeSize(decl.dtype);
  for (int64_t d : decl.shape)
    n *= static_cast<uint64_t>(d);
  return n;
}

void writeFilled(const std::string &path,
                 const std::vector<TensorDecl> &decls) {
  auto writer = SafetensorsWriter::create(path, decls);
  ASSERT_TRUE(writer.isOk()) << writer.status().toString();
  for (size_t i = 0; i < decls.size(); ++i) {
    std::string bytes(declBytes(decls[i]), static_cast<char>(i + 1));
    Status st = writer->writeTensor(decls[i].name, bytes.data(), bytes.size());
    ASSERT_TRUE(st.isOk()) << st.toString();
  }
  Status st = writer->finish();
  ASSERT_TRUE(st.isOk()) << st.toString();
}

} // namespace kiln::glm::testing
