//===- LinkShared.cpp -----------------------------------------------------===//

#include "passes/codegen/LinkShared.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

#ifndef KILN_LLD_PATH
#define KILN_LLD_PATH "/usr/lib/llvm-22/bin/ld.lld"
#endif

using namespace kiln;

Result<std::vector<uint8_t>> kiln::codegen::linkSharedObject(
    const std::string &object, const std::string &lldPath,
    llvm::ArrayRef<llvm::StringRef> extraArgs, llvm::StringRef what) {
  std::string lld = lldPath;
  if (lld.empty()) {
    const char *env = std::getenv("KILN_LLD");
    lld = env && *env ? env : KILN_LLD_PATH;
  }
  if (!llvm::sys::fs::can_execute(lld))
    return makeError(StatusCode::NotFound, what.str(),
                     ": cannot run the linker '", lld,
                     "': set KILN_LLD to an ld.lld");
  llvm::SmallString<128> objPath, outPath;
  if (llvm::sys::fs::createTemporaryFile("kiln-link", "o", objPath) ||
      llvm::sys::fs::createTemporaryFile("kiln-link", "so", outPath))
    return makeError(StatusCode::Internal, what.str(),
                     ": cannot create temporary files for ld.lld");
  llvm::scope_exit cleanup([&] {
    llvm::sys::fs::remove(objPath);
    llvm::sys::fs::remove(outPath);
  });
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(objPath, ec, llvm::sys::fs::OF_None);
    if (ec)
      return makeError(StatusCode::Internal, what.str(), ": cannot write ",
                       objPath.str().str(), ": ", ec.message());
    os << object;
  }
  std::vector<llvm::StringRef> args{lld, "-shared"};
  args.insert(args.end(), extraArgs.begin(), extraArgs.end());
  args.insert(args.end(), {objPath.str(), "-o", outPath.str()});
  std::string message;
  int rc =
      llvm::sys::ExecuteAndWait(lld, args, std::nullopt, {}, 0, 0, &message);
  if (rc != 0)
    return makeError(StatusCode::Internal, what.str(), ": ld.lld failed (exit ",
                     rc, ")", message.empty() ? "" : ": ", message);
  auto buffer = llvm::MemoryBuffer::getFile(outPath, /*IsText=*/false);
  if (!buffer)
    return makeError(StatusCode::Internal, what.str(),
                     ": cannot read the linked object ", outPath.str().str());
  llvm::StringRef bytes = (*buffer)->getBuffer();
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}
