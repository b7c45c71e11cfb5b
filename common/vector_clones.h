// GRADWIRE_VECTOR_CLONES: compiles a function with wide vector loops for the
// CPUs that have them, chosen when the program loads.
//
// The function is built three times (AVX-512F, AVX2, and the baseline
// x86-64 with SSE2) and the dynamic loader picks the widest one the CPU runs
// (GCC and Clang `target_clones`, through a glibc ifunc). For element-wise
// loops, with no reductions in floating point and no fused multiply-adds
// (build such files with -ffp-contract=off), every clone returns the same
// bits; only the width of the loop changes. Use it on hot loops over whole
// chunks that the baseline build vectorises only four floats at a time.
// Elsewhere (another architecture or compiler) it expands to nothing.
#ifndef GRADWIRE_COMMON_VECTOR_CLONES_H_
#define GRADWIRE_COMMON_VECTOR_CLONES_H_

#if defined(__x86_64__) && defined(__ELF__) && \
    (defined(__GNUC__) || defined(__clang__))
#define GRADWIRE_VECTOR_CLONES \
  __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define GRADWIRE_VECTOR_CLONES
#endif

#endif  // GRADWIRE_COMMON_VECTOR_CLONES_H_
