#include "codegen/elementwise_ops.h"

#include <cmath>
#include <cstdint>
#include <string>

namespace gradc::codegen {
namespace {

using Operands = std::span<llvm::Value* const>;
using llvm::Value;

// Constants as ATen spells them (c10/util/MathConstants.h, <cmath>).
constexpr double kSqrt1_2 = 0.70710678118654752440;      // M_SQRT1_2
constexpr double k2SqrtPi = 1.12837916709551257390;      // M_2_SQRTPI
constexpr double kSqrt2 = 1.41421356237309504880;        // M_SQRT2
constexpr double kGeluKappa = 0.044715;

bool tanhApproximation(const ir::AttrMap& attrs) { return ir::getString(attrs, "approximate").value_or("none") == "tanh"; }

Value* add(const ElementContext& c, Operands x, const ir::AttrMap&) { return c.b.CreateFAdd(x[0], x[1]); }
Value* sub(const ElementContext& c, Operands x, const ir::AttrMap&) { return c.b.CreateFSub(x[0], x[1]); }
Value* mul(const ElementContext& c, Operands x, const ir::AttrMap&) { return c.b.CreateFMul(x[0], x[1]); }
Value* scale(const ElementContext& c, Operands x, const ir::AttrMap& a) {
  return c.b.CreateFMul(x[0], c.constant(*ir::getFloat(a, "factor")));
}
// clamp_min(x, 0): NaN stays NaN.
Value* relu(const ElementContext& c, Operands x, const ir::AttrMap&) {
  return c.b.CreateSelect(c.b.CreateFCmpOLT(x[0], c.constant(0)), c.constant(0), x[0]);
}
// (grad, y): grad where y > 0, else 0.
Value* reluBackward(const ElementContext& c, Operands x, const ir::AttrMap&) {
  return c.b.CreateSelect(c.b.CreateFCmpOGT(x[1], c.constant(0)), x[0], c.constant(0));
}
Value* exp(const ElementContext& c, Operands x, const ir::AttrMap&) { return c.math.exp(c.b, x[0]); }
Value* tanh(const ElementContext& c, Operands x, const ir::AttrMap&) { return c.math.tanh(c.b, x[0]); }
// (grad, y): grad * (1 - y * y).
Value* tanhBackward(const ElementContext& c, Operands x, const ir::AttrMap&) {
  return c.b.CreateFMul(x[0], c.b.CreateFSub(c.constant(1), c.b.CreateFMul(x[1], x[1])));
}
Value* sigmoidOf(const ElementContext& c, Value* v) {
  return c.b.CreateFDiv(c.constant(1), c.b.CreateFAdd(c.constant(1), c.math.exp(c.b, c.b.CreateFNeg(v))));
}
Value* sigmoid(const ElementContext& c, Operands x, const ir::AttrMap&) { return sigmoidOf(c, x[0]); }
// (grad, y): grad * (1 - y) * y.
Value* sigmoidBackward(const ElementContext& c, Operands x, const ir::AttrMap&) {
  return c.b.CreateFMul(c.b.CreateFMul(x[0], c.b.CreateFSub(c.constant(1), x[1])), x[1]);
}
// x / (1 + exp(-x)).
Value* silu(const ElementContext& c, Operands x, const ir::AttrMap&) {
  return c.b.CreateFDiv(x[0], c.b.CreateFAdd(c.constant(1), c.math.exp(c.b, c.b.CreateFNeg(x[0]))));
}
// (grad, x): grad * s * (1 + x * (1 - s)), s = sigmoid(x).
Value* siluBackward(const ElementContext& c, Operands x, const ir::AttrMap&) {
  Value* s = sigmoidOf(c, x[1]);
  Value* inner = c.b.CreateFAdd(c.constant(1), c.b.CreateFMul(x[1], c.b.CreateFSub(c.constant(1), s)));
  return c.b.CreateFMul(c.b.CreateFMul(x[0], s), inner);
}
// kBeta * (x + kappa x^3), the tanh approximation's argument.
Value* geluInner(const ElementContext& c, Value* v) {
  Value* cube = c.b.CreateFMul(c.b.CreateFMul(v, v), v);
  return c.b.CreateFMul(c.constant(kSqrt2 * k2SqrtPi * 0.5),
                        c.b.CreateFAdd(v, c.b.CreateFMul(c.constant(kGeluKappa), cube)));
}
// The standard normal's CDF Phi(x) and e^(-x^2 / 2), for gelu's erf form.
//
// f64: Phi = (1 + erf(x / sqrt 2)) / 2 with the library's erf, as ATen.
// f32: from erfc instead, with no erf call: for z = |x| / sqrt 2, erfc(z) = t e^(-z^2) e^(P(t)),
// t = 1 / (1 + z / 2), P the degree-9 Chebyshev fit of Numerical Recipes' erfcc (fractional
// error below 1.2e-7 for every z >= 0); Phi = erfc(z) / 2 for x < 0 and 1 - erfc(z) / 2 above.
// z^2 = x^2 / 2 is split into hi + lo with an FMA, e^(-z^2) = e^(-hi) (1 - lo), so the
// exponent keeps the bits that rounding x^2 loses. Phi's relative error stays under 5e-7 over
// [-14, 14] (against erfc in double), in the negative tail too, where 1 + erf(x / sqrt 2) in f32
// cancels; ATen's formula keeps its absolute error, about 6e-8, there. It costs two vector
// exps and a division per element, about half what SLEEF's AVX-512 erff cost here
// (docs/codegen.md).
struct NormalTerms {
  Value* cdf;      // Phi(x)
  Value* density;  // e^(-x^2 / 2)
};
NormalTerms normalTerms(const ElementContext& c, Value* x) {
  llvm::IRBuilder<>& b = c.b;
  Value* square = b.CreateFMul(x, x);
  if (!c.type->isFloatTy()) {
    Value* e = c.math.erf(b, b.CreateFMul(x, c.constant(kSqrt1_2)));
    return {b.CreateFMul(c.constant(0.5), b.CreateFAdd(c.constant(1), e)),
            c.math.exp(b, b.CreateFMul(square, c.constant(-0.5)))};
  }
  constexpr double kErfcFit[] = {-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
                                 0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277};
  Value* z = b.CreateFMul(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x), c.constant(kSqrt1_2));
  Value* t = b.CreateFDiv(c.constant(1), b.CreateFAdd(c.constant(1), b.CreateFMul(c.constant(0.5), z)));
  Value* poly = c.constant(kErfcFit[9]);
  for (int k = 8; k >= 0; --k) poly = b.CreateFAdd(b.CreateFMul(poly, t), c.constant(kErfcFit[k]));
  // square + lo = x^2 exactly; halving both is exact. Beyond |x| = 16 the density is 0 and lo
  // does not matter: it is taken of the clamped x, so an infinite x gives no NaN.
  Value* limit = c.constant(16);
  Value* xc = b.CreateSelect(b.CreateFCmpOGT(x, limit), limit,
                             b.CreateSelect(b.CreateFCmpOLT(x, b.CreateFNeg(limit)), b.CreateFNeg(limit), x));
  Value* lo = b.CreateIntrinsic(llvm::Intrinsic::fma, {c.type}, {xc, xc, b.CreateFNeg(b.CreateFMul(xc, xc))});
  Value* hi = b.CreateFMul(square, c.constant(0.5));
  Value* density = b.CreateFMul(c.math.exp(b, b.CreateFNeg(hi)),
                                b.CreateFSub(c.constant(1), b.CreateFMul(lo, c.constant(0.5))));
  Value* halfErfc = b.CreateFMul(b.CreateFMul(c.constant(0.5), t), b.CreateFMul(density, c.math.exp(b, poly)));
  Value* cdf = b.CreateSelect(b.CreateFCmpOLT(x, c.constant(0)), halfErfc, b.CreateFSub(c.constant(1), halfErfc));
  return {cdf, density};
}

Value* gelu(const ElementContext& c, Operands x, const ir::AttrMap& a) {
  Value* v = x[0];
  if (tanhApproximation(a)) {
    Value* t = c.math.tanh(c.b, geluInner(c, v));
    return c.b.CreateFMul(c.b.CreateFMul(c.constant(0.5), v), c.b.CreateFAdd(c.constant(1), t));
  }
  return c.b.CreateFMul(v, normalTerms(c, v).cdf);
}
// (grad, x): grad * gelu'(x) = grad * (Phi(x) + x phi(x)).
Value* geluBackward(const ElementContext& c, Operands x, const ir::AttrMap& a) {
  Value* g = x[0];
  Value* v = x[1];
  if (tanhApproximation(a)) {
    Value* sq = c.b.CreateFMul(v, v);
    Value* t = c.math.tanh(c.b, geluInner(c, v));
    Value* left = c.b.CreateFMul(c.constant(0.5), v);
    Value* right = c.b.CreateFAdd(c.constant(1), t);
    Value* leftDerivative = c.b.CreateFMul(c.constant(0.5), right);
    Value* tanhDerivative = c.b.CreateFSub(c.constant(1), c.b.CreateFMul(t, t));
    Value* innerDerivative = c.b.CreateFMul(
        c.constant(kSqrt2 * k2SqrtPi * 0.5), c.b.CreateFAdd(c.constant(1), c.b.CreateFMul(c.constant(3 * kGeluKappa), sq)));
    Value* rightDerivative = c.b.CreateFMul(c.b.CreateFMul(left, tanhDerivative), innerDerivative);
    return c.b.CreateFMul(g, c.b.CreateFAdd(leftDerivative, rightDerivative));
  }
  const NormalTerms n = normalTerms(c, v);
  Value* pdf = c.b.CreateFMul(c.constant(k2SqrtPi * kSqrt1_2 * 0.5), n.density);
  return c.b.CreateFMul(g, c.b.CreateFAdd(n.cdf, c.b.CreateFMul(v, pdf)));
}

// ---- position-dependent: the causal mask over the last two axes ([..., i, j], j > i masked) ----

Value* aboveDiagonal(const ElementContext& c) {
  const ir::Shape& s = *c.space;
  const std::int64_t cols = s.back();
  const std::int64_t rows = s.size() >= 2 ? s[s.size() - 2] : 1;
  Value* j = c.b.CreateURem(c.index, c.b.getInt64(static_cast<std::uint64_t>(cols)));
  Value* i = c.b.CreateURem(c.b.CreateUDiv(c.index, c.b.getInt64(static_cast<std::uint64_t>(cols))),
                            c.b.getInt64(static_cast<std::uint64_t>(rows)));
  return c.b.CreateICmpUGT(j, i);
}
Value* causalMask(const ElementContext& c, Operands x, const ir::AttrMap&) {
  return c.b.CreateSelect(aboveDiagonal(c), c.constant(-INFINITY), x[0]);
}
Value* causalMaskBackward(const ElementContext& c, Operands x, const ir::AttrMap&) {
  return c.b.CreateSelect(aboveDiagonal(c), c.constant(0), x[0]);
}

// ---- dropout: Philox-4x32-10 keyed by (seed, stream), counter (position / 4, step) ------------

Value* u64(const ElementContext& c, std::uint64_t v) { return c.b.getInt64(v); }

// SplitMix64's finaliser (runtime/core/counter_rng.cpp mix64).
Value* mix64(const ElementContext& c, Value* z) {
  llvm::IRBuilder<>& b = c.b;
  z = b.CreateMul(b.CreateXor(z, b.CreateLShr(z, 30)), u64(c, 0xbf58476d1ce4e5b9ull));
  z = b.CreateMul(b.CreateXor(z, b.CreateLShr(z, 27)), u64(c, 0x94d049bb133111ebull));
  return b.CreateXor(z, b.CreateLShr(z, 31));
}

// The uniform float in [0, 1) of element `position` of the stream (runtime/core/counter_rng.h).
Value* uniformAt(const ElementContext& c, Value* position) {
  llvm::IRBuilder<>& b = c.b;
  llvm::Type* i32 = b.getInt32Ty();
  llvm::Type* i64 = b.getInt64Ty();
  const RandomStream& r = c.random;
  Value* key = mix64(c, b.CreateAdd(r.seed, b.CreateMul(u64(c, 0x9e3779b97f4a7c15ull),
                                                           b.CreateOr(mix64(c, r.stream), u64(c, 1)))));
  Value* k0 = b.CreateTrunc(key, i32);
  Value* k1 = b.CreateTrunc(b.CreateLShr(key, 32), i32);
  Value* block = b.CreateLShr(position, 2);
  Value* x[4] = {b.CreateTrunc(block, i32), b.CreateTrunc(b.CreateLShr(block, 32), i32), b.CreateTrunc(r.step, i32),
                 b.CreateTrunc(b.CreateLShr(r.step, 32), i32)};
  for (int round = 0; round < 10; ++round) {
    Value* p0 = b.CreateMul(b.getInt64(0xD2511F53u), b.CreateZExt(x[0], i64));
    Value* p1 = b.CreateMul(b.getInt64(0xCD9E8D57u), b.CreateZExt(x[2], i64));
    Value* n0 = b.CreateXor(b.CreateXor(b.CreateTrunc(b.CreateLShr(p1, 32), i32), x[1]), k0);
    Value* n2 = b.CreateXor(b.CreateXor(b.CreateTrunc(b.CreateLShr(p0, 32), i32), x[3]), k1);
    x[1] = b.CreateTrunc(p1, i32);
    x[3] = b.CreateTrunc(p0, i32);
    x[0] = n0;
    x[2] = n2;
    k0 = b.CreateAdd(k0, b.getInt32(0x9E3779B9u));
    k1 = b.CreateAdd(k1, b.getInt32(0xBB67AE85u));
  }
  Value* lane = b.CreateTrunc(b.CreateAnd(position, 3), i32);
  Value* bits = b.CreateSelect(b.CreateICmpEQ(lane, b.getInt32(0)), x[0],
                               b.CreateSelect(b.CreateICmpEQ(lane, b.getInt32(1)), x[1],
                                              b.CreateSelect(b.CreateICmpEQ(lane, b.getInt32(2)), x[2], x[3])));
  llvm::Type* f32 = b.getFloatTy();
  return b.CreateFMul(b.CreateUIToFP(b.CreateLShr(bits, 8), f32), llvm::ConstantFP::get(f32, 1.0 / 16777216.0));
}

// u >= p' ? x / (1 - p) : 0, p' = p rounded up to the uniforms' 2^-24 grid (as the kernel).
Value* dropout(const ElementContext& c, Operands x, const ir::AttrMap& a) {
  const double p = *ir::getFloat(a, "p");
  if (p == 0.0) return x[0];
  Value* u = uniformAt(c, c.b.CreateAdd(c.index, c.random.offset));
  const double threshold = static_cast<float>(std::ceil(p * 16777216.0) / 16777216.0);
  const double scale = c.type->isFloatTy() ? static_cast<double>(static_cast<float>(1.0 / (1.0 - p))) : 1.0 / (1.0 - p);
  Value* keep = c.b.CreateFCmpOGE(u, llvm::ConstantFP::get(c.b.getFloatTy(), threshold));
  return c.b.CreateSelect(keep, c.b.CreateFMul(x[0], c.constant(scale)), c.constant(0));
}

const ElementOp kOps[] = {
    {"dropout", dropout},
    {"causal_mask", causalMask},
    {"causal_mask_backward", causalMaskBackward},
    {"add", add},
    {"sub", sub},
    {"mul", mul},
    {"scale", scale},
    {"relu", relu},
    {"relu_backward", reluBackward},
    {"exp", exp},
    {"tanh", tanh},
    {"tanh_backward", tanhBackward},
    {"sigmoid", sigmoid},
    {"sigmoid_backward", sigmoidBackward},
    {"silu", silu},
    {"silu_backward", siluBackward},
    {"gelu", gelu},
    {"gelu_backward", geluBackward},
};

}  // namespace

const ElementOp* findElementOp(std::string_view op) {
  for (const ElementOp& e : kOps)
    if (e.op == op) return &e;
  return nullptr;
}

std::span<const ElementOp> elementOps() { return kOps; }

}  // namespace gradc::codegen
