# Kiln's lit configuration. Tests mirror the source folders:
# test/dialects, test/passes, test/frontends, test/tools, test/lint.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "Kiln"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kiln_binary_dir, "test")
# gtest sources and the fixtures are not lit tests.
config.excludes = ["unit", "fixtures", "lit.cfg.py", "CMakeLists.txt", "Inputs",
                   "check_golden.py", "check_spec.py", "check_ppl.py"]

llvm_config.with_system_environment(["HOME", "TMPDIR"])
llvm_config.use_default_substitutions()

# Fixtures: bundled copy first, ../shared beside the checkout otherwise.
fixtures = os.environ.get("KILN_FIXTURES_DIR")
if not fixtures:
    bundled = os.path.join(config.kiln_source_dir, "test", "fixtures")
    shared = os.path.join(os.path.dirname(config.kiln_source_dir), "shared", "fixtures")
    fixtures = bundled if os.path.isdir(os.path.join(bundled, "glm5-tiny-dev")) else shared
config.substitutions.append(("%fixtures", fixtures))
config.substitutions.append(("%kiln_src", config.kiln_source_dir))
config.substitutions.append(("%kiln_bin", config.kiln_tools_dir))
config.substitutions.append(("%python", "/usr/bin/python3"))
# The libamdhip64 whose device is the GPU-kernel interpreter
# (test/unit/rocdl/InterpHip.cpp).
interp_hip = os.path.join(config.kiln_binary_dir, "lib", "interp-hip",
                          "libinterp_amdhip64.so")
config.substitutions.append(("%interp_hip", interp_hip))
if os.path.exists(interp_hip):
    config.available_features.add("interp-hip")
import shutil
if shutil.which("mpirun"):
    config.available_features.add("mpi")
# The librccl whose collectives are MPI's on host memory
# (test/unit/comm/FakeRccl.cpp), for GPU ranks through the interpreter.
fake_rccl_mpi = os.path.join(config.kiln_binary_dir, "lib", "fake-rccl-mpi",
                             "libfake_rccl_mpi.so")
config.substitutions.append(("%fake_rccl_mpi", fake_rccl_mpi))
if os.path.exists(fake_rccl_mpi):
    config.available_features.add("fake-rccl-mpi")
if os.path.isdir(os.path.join(fixtures, "glm5-tiny-dev-fp8")):
    config.available_features.add("all-fixtures")
# CPU kernel paths this machine can run (runtime/cpu/CpuFeatures.h).
try:
    with open("/proc/cpuinfo") as f:
        cpu_flags = next((l.split(":", 1)[1].split() for l in f
                          if l.startswith("flags")), [])
except OSError:
    cpu_flags = []
if {"avx2", "fma", "f16c"} <= set(cpu_flags):
    config.available_features.add("avx2")

tool_dirs = [config.kiln_tools_dir, config.llvm_tools_dir]
from lit.llvm.subst import ToolSubst

llvm_config.add_tool_substitutions(
    [ToolSubst(t, unresolved="ignore")
     for t in ["kiln-opt", "kiln-compile", "kiln-run", "kiln-dump", "kiln-bench",
               "kiln-serve",
               "kiln-gpu-codegen"]],
    tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.kiln_tools_dir, append_path=True)
