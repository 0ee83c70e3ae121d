// bf16 matrix products on oneDNN's matmul primitive, with the scratchpad owned by the caller.
//
// Why: oneDNN's bf16 GEMM kernels (AVX-512 BF16, AMX) pack operand panels into a scratchpad
// whose size depends on the CPU's instruction set, its cache blocking and the thread count,
// not on the shapes alone. Called through ATen, oneDNN allocates that scratchpad itself on
// every call, outside any plan. Here the op table asks oneDNN for the size (scratchpadBound:
// the plan declares it as the op's workspace) and the runtime hands oneDNN exactly that many
// bytes it allocated from the step's planned workspace (run): measured == planned in bf16 too.
//
// Both sides ask the same library on the same machine with the same thread count, so they
// agree. A plan made on another CPU can hold a smaller workspace than this one needs: run()
// then reports it (needed > given) and the caller falls back to its own GEMM.
//
// No LibTorch here: the op table (ir/) links this. Without oneDNN at build time
// (GRADC_WITH_ONEDNN off) available() is false, every bound is 0 and run() is never called.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gradc::onednn {

// One operand of C[p] = A[p] B[p]: a [batch, rows, cols] array of bf16 with element strides.
// batch 1 with several products: the one matrix is shared by all of them (broadcast).
struct MatrixLayout {
  std::int64_t batch = 1, rows = 0, cols = 0;
  std::int64_t batchStride = 0, rowStride = 0, colStride = 1;
};

// C[p] (dense [batch, m, n], bf16) = A[p] ([m, k]) B[p] ([k, n]) + bias ([n], bf16, when set)
// (+ C[p] itself, when accumulating), accumulated in f32 and rounded once.
struct Product {
  std::int64_t batch = 1;  // products; 1 and !batched: one 2-D product
  bool batched = false;    // 3-D descriptors (a batched matmul), even when batch is 1
  MatrixLayout a, b;
  bool bias = false;
  bool accumulate = false;
};

// The shapes a product's operands come in, before their strides are known: the op table knows
// these, the layouts are the runtime's.
struct ProductShape {
  std::int64_t batch = 1, m = 0, k = 0, n = 0;
  bool batched = false;
  bool broadcastA = false, broadcastB = false;  // that operand has batch 1 (shared)
  bool bias = false;
  bool accumulate = false;
};

// oneDNN was built in and has a bf16 matmul kernel of its own for this CPU (not only its
// reference loops): on AVX-512 CPUs, with or without bf16 instructions.
bool available();

// That kernel runs on the CPU's bf16 instructions (AVX512_BF16 or AMX: oneDNN's effective
// instruction set is avx512_core_bf16 or above) rather than emulating them on AVX-512.
bool native();

// Where this process runs its bf16 matrix products; the op table's workspace rules and the
// runtime's kernels both ask, so a plan declares what the kernel allocates.
//  - kOneDnn: oneDNN's matmul with the planned scratchpad (this file), where native().
//  - kWidened: f32 products of the widened operands, rounded once (ir/widened_products.h),
//    everywhere else: AVX2 CPUs, where oneDNN has no bf16 kernel and ATen's own bf16 product
//    accumulates in bf16 (2% off, 13x slower than f32), and AVX-512 CPUs without bf16
//    instructions, where oneDNN's emulated kernel is slower than the widened products
//    (bench/results/bf16_products.md).
// GRADC_BF16_PRODUCTS=onednn or =widened imposes one (onednn only where available()).
enum class Bf16Route { kOneDnn, kWidened };
Bf16Route bf16Route();
const char* nameOf(Bf16Route route);  // "onednn", "widened"
// Imposes `route` on this process (nullopt: back to the rule above), for tests that run both
// routes on one machine; false, changing nothing, for kOneDnn where !available().
bool imposeBf16Route(std::optional<Bf16Route> route);

// The scratchpad oneDNN needs for this product with `threads` intra-op threads; nullopt when
// it has no kernel for it.
std::optional<std::int64_t> scratchpadBytes(const Product& product, int threads);

// The most any layout of this shape may need: the maximum over row- and column-major operands,
// dense and with padded leading dimensions (every layout a BLAS reads without a copy). The
// workspace the plan declares for the product; 0 when !available().
std::int64_t scratchpadBound(const ProductShape& shape, int threads);

// Runs the product with the calling thread's intra-op thread count (OpenMP's), its scratchpad
// in [scratch, scratch + scratchBytes). Returns an empty string on success, else why it did not
// run (no kernel for this layout, or a scratchpad larger than scratchBytes): nothing was
// written then.
std::string run(const Product& product, const void* a, const void* b, const void* bias, void* c, void* scratch,
                std::int64_t scratchBytes);

// What oneDNN runs for this product ("brg:avx512_core_bf16"); empty when none.
std::string implementation(const Product& product, int threads);

}  // namespace gradc::onednn
