//===- KernelProperties.cpp -----------------------------------------------===//

#include "passes/codegen/rocdl/KernelProperties.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/BinaryFormat/MsgPackDocument.h"

#include <algorithm>
#include <sstream>

using namespace kiln::rocdl;

namespace {

constexpr int64_t kVgprsPerLane = 512; // unified VGPR + AGPR file, gfx90a+
constexpr int64_t kVgprGranule = 8;
constexpr int64_t kMaxWavesPerSimd = 8;
constexpr int64_t kSimdsPerCu = 4;

int64_t intField(llvm::msgpack::MapDocNode &map, llvm::StringRef key) {
  auto it = map.find(key);
  if (it == map.end())
    return 0;
  llvm::msgpack::DocNode &node = it->second;
  if (node.getKind() == llvm::msgpack::Type::UInt)
    return int64_t(node.getUInt());
  if (node.getKind() == llvm::msgpack::Type::Int)
    return node.getInt();
  return 0;
}

void countInstructions(llvm::StringRef assembly, KernelProperties &p) {
  size_t start = assembly.find("\n" + p.name + ":\n");
  if (start == llvm::StringRef::npos)
    return;
  llvm::StringRef body = assembly.substr(start + p.name.size() + 3);
  body = body.substr(0, body.find("\n.Lfunc_end"));
  llvm::SmallVector<llvm::StringRef> lines;
  body.split(lines, '\n');
  for (llvm::StringRef line : lines) {
    if (!line.consume_front("\t") || line.empty() ||
        !(line[0] >= 'a' && line[0] <= 'z'))
      continue;
    llvm::StringRef op = line.take_until([](char c) { return c == ' '; });
    ++p.instructions;
    if (op.starts_with("v_mfma"))
      ++p.mfma;
    else if (op.starts_with("v_"))
      ++p.valu;
    else if (op.starts_with("s_"))
      ++p.salu;
    else if (op.starts_with("global_") || op.starts_with("buffer_") ||
             op.starts_with("flat_") || op.starts_with("scratch_"))
      ++p.vmem;
    else if (op.starts_with("ds_"))
      ++p.lds;
  }
}

} // namespace

int64_t KernelProperties::wavesByRegisters() const {
  int64_t regs = std::max<int64_t>(vgprs, 1);
  regs = (regs + kVgprGranule - 1) / kVgprGranule * kVgprGranule;
  return std::min(kMaxWavesPerSimd, kVgprsPerLane / regs);
}

int64_t KernelProperties::wavesByLds(const ChipInfo &chip,
                                     int64_t workgroupSize) const {
  if (ldsBytes == 0)
    return kMaxWavesPerSimd;
  int64_t groups = chip.ldsBytes / ldsBytes;
  int64_t wavesPerGroup = (workgroupSize + kWaveSize - 1) / kWaveSize;
  return std::min(kMaxWavesPerSimd, groups * wavesPerGroup / kSimdsPerCu);
}

std::string
kiln::rocdl::parseKernelProperties(std::string_view assembly,
                                   std::vector<KernelProperties> &out) {
  llvm::StringRef text(assembly.data(), assembly.size());
  size_t begin = text.find(".amdgpu_metadata\n");
  size_t end = text.find(".end_amdgpu_metadata");
  if (begin == llvm::StringRef::npos || end == llvm::StringRef::npos ||
      end < begin)
    return "no .amdgpu_metadata block in the assembly";
  llvm::StringRef yaml =
      text.slice(begin + llvm::StringRef(".amdgpu_metadata\n").size(), end);
  llvm::msgpack::Document doc;
  if (!doc.fromYAML(yaml))
    return "cannot parse the .amdgpu_metadata block";
  if (doc.getRoot().getKind() != llvm::msgpack::Type::Map)
    return "the code object metadata is not a map";
  auto &root = doc.getRoot().getMap();
  auto kernels = root.find("amdhsa.kernels");
  if (kernels == root.end() ||
      kernels->second.getKind() != llvm::msgpack::Type::Array)
    return "the code object metadata has no amdhsa.kernels list";
  for (llvm::msgpack::DocNode &node : kernels->second.getArray()) {
    if (node.getKind() != llvm::msgpack::Type::Map)
      continue;
    auto &map = node.getMap();
    KernelProperties p;
    auto name = map.find(".name");
    if (name != map.end() &&
        name->second.getKind() == llvm::msgpack::Type::String)
      p.name = name->second.getString().str();
    p.vgprs = intField(map, ".vgpr_count");
    p.agprs = intField(map, ".agpr_count");
    p.sgprs = intField(map, ".sgpr_count");
    p.ldsBytes = intField(map, ".group_segment_fixed_size");
    p.scratchBytes = intField(map, ".private_segment_fixed_size");
    p.vgprSpills = intField(map, ".vgpr_spill_count");
    p.sgprSpills = intField(map, ".sgpr_spill_count");
    p.kernargBytes = intField(map, ".kernarg_segment_size");
    p.maxWorkgroupSize = intField(map, ".max_flat_workgroup_size");
    countInstructions(text, p);
    out.push_back(std::move(p));
  }
  return "";
}

std::string kiln::rocdl::checkKernelProperties(const KernelProperties &p,
                                               const KernelSpec &spec) {
  std::ostringstream os;
  const ChipInfo &chip = chipInfo(spec.chip);
  if (p.scratchBytes != 0)
    os << p.name << ": uses " << p.scratchBytes
       << " bytes of scratch, expected none\n";
  if (p.vgprSpills != 0 || p.sgprSpills != 0)
    os << p.name << ": spills " << p.vgprSpills << " VGPRs and " << p.sgprSpills
       << " SGPRs, expected none\n";
  if (p.ldsBytes > chip.ldsBytes)
    os << p.name << ": uses " << p.ldsBytes << " bytes of LDS, " << chip.name
       << " has " << chip.ldsBytes << "\n";
  int64_t declared = spec.declaredWavesPerSimd();
  int64_t waves =
      std::min(p.wavesByRegisters(), p.wavesByLds(chip, spec.blockSize()));
  if (waves < declared)
    os << p.name << ": " << p.vgprs << " VGPRs and " << p.ldsBytes
       << " bytes of LDS allow " << waves
       << " waves per SIMD, expected at least " << declared << "\n";
  return os.str();
}

std::string kiln::rocdl::formatKernelProperties(const KernelProperties &p,
                                                const KernelSpec &spec) {
  const ChipInfo &chip = chipInfo(spec.chip);
  std::ostringstream os;
  os << "kernel: " << p.name << "\n"
     << "chip: " << chip.name << "\n"
     << "workgroup: " << spec.blockSize() << "\n"
     << "vgprs: " << p.vgprs << "\n"
     << "agprs: " << p.agprs << "\n"
     << "sgprs: " << p.sgprs << "\n"
     << "lds-bytes: " << p.ldsBytes << "\n"
     << "scratch-bytes: " << p.scratchBytes << "\n"
     << "spills: " << p.vgprSpills + p.sgprSpills << "\n"
     << "kernarg-bytes: " << p.kernargBytes << "\n"
     << "instructions: " << p.instructions << "\n"
     << "mfma: " << p.mfma << "\n"
     << "valu: " << p.valu << "\n"
     << "salu: " << p.salu << "\n"
     << "vmem: " << p.vmem << "\n"
     << "ds: " << p.lds << "\n"
     << "waves-per-simd: registers " << p.wavesByRegisters() << ", lds "
     << p.wavesByLds(chip, spec.blockSize()) << ", declared "
     << spec.declaredWavesPerSimd() << "\n";
  std::string violations = checkKernelProperties(p, spec);
  os << "quality: " << (violations.empty() ? "ok" : "FAILED") << "\n"
     << violations;
  return os.str();
}
