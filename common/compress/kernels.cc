#include "common/compress/kernels.h"

#ifdef GRADWIRE_X86_KERNELS
#include <cpuid.h>
#endif

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace gradwire {
namespace compress_kernels {
namespace {

#ifdef GRADWIRE_X86_KERNELS
// F16C from CPUID leaf 1 (ECX bit 29): not every compiler's
// __builtin_cpu_supports knows its name.
bool CpuHasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}
#endif

bool CpuHas(InstructionSet isa) {
#ifndef GRADWIRE_X86_KERNELS
  return isa == InstructionSet::kPortable;
#else
  switch (isa) {
    case InstructionSet::kPortable:
      return true;
    case InstructionSet::kAvx2:
      return __builtin_cpu_supports("avx2") && CpuHasF16c();
    case InstructionSet::kAvx512:
      return __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq") && CpuHasF16c();
  }
  return false;
#endif
}

const KernelTable* BuiltTable(InstructionSet isa) {
  switch (isa) {
    case InstructionSet::kPortable:
      return &PortableKernels();
    case InstructionSet::kAvx2:
      return Avx2Kernels();
    case InstructionSet::kAvx512:
      return Avx512Kernels();
  }
  return nullptr;
}

const KernelTable& ChooseTable() {
  InstructionSet widest = InstructionSet::kPortable;
  for (InstructionSet isa : {InstructionSet::kAvx2, InstructionSet::kAvx512}) {
    if (KernelsFor(isa).has_value()) widest = isa;
  }
  const char* wanted = std::getenv("GRADWIRE_KERNELS");
  if (wanted == nullptr || *wanted == '\0') return *BuiltTable(widest);
  const absl::optional<InstructionSet> parsed = ParseInstructionSet(wanted);
  if (!parsed.has_value() || *parsed > widest) {
    // A narrower set is a request; a wider or unknown one cannot be honoured.
    std::fprintf(stderr,
                 "gradwire: GRADWIRE_KERNELS=%s is not one of the instruction "
                 "sets this CPU and build run (up to %s); using %s\n",
                 wanted, std::string(InstructionSetName(widest)).c_str(),
                 std::string(InstructionSetName(widest)).c_str());
    return *BuiltTable(widest);
  }
  return *BuiltTable(*parsed);
}

}  // namespace

absl::string_view InstructionSetName(InstructionSet isa) {
  switch (isa) {
    case InstructionSet::kPortable:
      return "portable";
    case InstructionSet::kAvx2:
      return "avx2";
    case InstructionSet::kAvx512:
      return "avx512";
  }
  return "portable";
}

absl::optional<InstructionSet> ParseInstructionSet(absl::string_view name) {
  for (InstructionSet isa : {InstructionSet::kPortable, InstructionSet::kAvx2,
                             InstructionSet::kAvx512}) {
    if (name == InstructionSetName(isa)) return isa;
  }
  return absl::nullopt;
}

double CombineLanes(const double lanes[kSumLanes]) {
  double level[kSumLanes];
  std::memcpy(level, lanes, sizeof level);
  for (size_t width = kSumLanes / 2; width >= 1; width /= 2) {
    for (size_t i = 0; i < width; ++i) level[i] = level[i] + level[i + width];
  }
  return level[0];
}

absl::optional<const KernelTable*> KernelsFor(InstructionSet isa) {
  const KernelTable* table = BuiltTable(isa);
  if (table == nullptr || !CpuHas(isa)) return absl::nullopt;
  return table;
}

const KernelTable& Kernels() {
  static const KernelTable& table = ChooseTable();
  return table;
}

#ifndef GRADWIRE_X86_KERNELS
const KernelTable* Avx2Kernels() { return nullptr; }
const KernelTable* Avx512Kernels() { return nullptr; }
#endif

}  // namespace compress_kernels
}  // namespace gradwire
