//===- kiln-dump.cpp - Print a Kiln artifact as JSON ----------------------===//
//
// kiln-dump <artifact> [--no-verify] [--weights] [--plans]
//           [--extract-kernels DIR]
//
// Loads the artifact with the runtime's verifying loader (so kiln-dump also
// answers "does this artifact load?") and prints it as JSON.
//
//===----------------------------------------------------------------------===//

#include "tools/kiln-dump/ArtifactJson.h"

#include <cstring>
#include <iostream>

using namespace kiln;

namespace {

const char *const USAGE =
    "usage: kiln-dump <artifact> [--no-verify] [--weights] [--plans] "
    "[--extract-kernels DIR]\n"
    "  --no-verify            skip the segment checksums (the header, "
    "metadata and\n"
    "                         semantic checks always run)\n"
    "  --weights              list every weight, not only the totals\n"
    "  --plans                list every plan's buffers and dispatches\n"
    "  --extract-kernels DIR  write each code object to "
    "DIR/<target>.<index>.<ext>";

Status run(int argc, char **argv) {
  std::string path;
  artifact::OpenOptions open;
  dump::DumpOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--no-verify")
      open.verifyChecksums = false;
    else if (arg == "--weights")
      options.weights = true;
    else if (arg == "--plans")
      options.plans = true;
    else if (arg == "--extract-kernels") {
      if (i + 1 == argc)
        return makeError(StatusCode::InvalidArgument,
                         "--extract-kernels needs a folder\n", USAGE);
      options.extractKernelsDir = argv[++i];
    } else if (arg.rfind("-", 0) == 0 || !path.empty())
      return makeError(StatusCode::InvalidArgument, "unexpected argument '",
                       arg, "'\n", USAGE);
    else
      path = arg;
  }
  if (path.empty())
    return makeError(StatusCode::InvalidArgument, "no artifact given\n", USAGE);
  KILN_ASSIGN_OR_RETURN(auto loaded, artifact::Artifact::open(path, open));
  KILN_ASSIGN_OR_RETURN(nlohmann::ordered_json json,
                        dump::dumpArtifact(*loaded, options));
  // Names come from the file: replace invalid UTF-8 instead of throwing.
  std::cout << json.dump(2, ' ', false,
                         nlohmann::ordered_json::error_handler_t::replace)
            << "\n";
  return Status::ok();
}

} // namespace

int main(int argc, char **argv) {
  if (argc == 2 &&
      (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h"))) {
    std::cout << USAGE << "\n";
    return 0;
  }
  Status status = run(argc, argv);
  if (!status.isOk()) {
    std::cerr << "kiln-dump: " << status.message() << "\n";
    return 1;
  }
  return 0;
}
