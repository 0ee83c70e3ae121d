#include "passes/memory/storage.h"

#include <algorithm>
#include <cassert>
#include <optional>

#include "ir/blas_layout.h"

namespace gradc::passes {

using Strides = std::vector<std::int64_t>;

// ---- strides -----------------------------------------------------------------------------------

Strides contiguousStrides(const ir::Shape& shape) {
  Strides s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

// ATen's rule (at::detail::computeStride): walk the old dims from the innermost, cutting them
// into chunks that are contiguous among themselves; each chunk must be covered exactly by a
// run of new dims, which then get strides inside the chunk.
std::optional<Strides> viewStrides(const ir::Shape& shape, const Strides& strides, const ir::Shape& newShape) {
  if (shape.empty()) return Strides(newShape.size(), 1);
  Strides out(newShape.size(), 0);
  auto viewD = static_cast<std::int64_t>(newShape.size()) - 1;
  std::int64_t chunkBase = strides.back();
  std::int64_t tensorNumel = 1, viewNumel = 1;
  for (auto d = static_cast<std::int64_t>(shape.size()) - 1; d >= 0; --d) {
    tensorNumel *= shape[static_cast<size_t>(d)];
    bool chunkEnds = d == 0 || (shape[static_cast<size_t>(d - 1)] != 1 &&
                                strides[static_cast<size_t>(d - 1)] != tensorNumel * chunkBase);
    if (!chunkEnds) continue;
    while (viewD >= 0 && (viewNumel < tensorNumel || newShape[static_cast<size_t>(viewD)] == 1)) {
      out[static_cast<size_t>(viewD)] = viewNumel * chunkBase;
      viewNumel *= newShape[static_cast<size_t>(viewD)];
      --viewD;
    }
    if (viewNumel != tensorNumel) return std::nullopt;
    if (d > 0) {
      chunkBase = strides[static_cast<size_t>(d - 1)];
      tensorNumel = 1;
      viewNumel = 1;
    }
  }
  if (viewD != -1) return std::nullopt;
  return out;
}

namespace {

bool isContiguous(const ir::Shape& shape, const Strides& strides) {
  std::int64_t expected = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

std::int64_t axis(const ir::Node& node, std::string_view key, int rank) {
  std::optional<int> a = ir::normalizeAxis(*ir::getInt(node.attrs(), key), rank);
  assert(a && "axis out of range (the verifier checks it)");
  return *a;
}

// ---- view ops: strides of their results ---------------------------------------------------------
//
// One rule per op with OpInfo::view. nullopt: the view is impossible and the kernel copies
// (only reshape can do that).

using ViewRule = std::optional<std::vector<Strides>> (*)(const ir::Node& node, const Strides& in);

std::optional<std::vector<Strides>> viewTranspose(const ir::Node& n, const Strides& in) {
  Strides s = in;
  int rank = n.operand(0)->type().rank();
  std::swap(s[static_cast<size_t>(axis(n, "dim0", rank))], s[static_cast<size_t>(axis(n, "dim1", rank))]);
  return std::vector<Strides>{s};
}

// slice and split keep the strides (only the offset moves).
std::optional<std::vector<Strides>> viewSameStrides(const ir::Node& n, const Strides& in) {
  return std::vector<Strides>(n.numResults(), in);
}

// select and unbind drop the axis.
std::optional<std::vector<Strides>> viewDropAxis(const ir::Node& n, const Strides& in) {
  Strides s = in;
  s.erase(s.begin() + axis(n, "dim", n.operand(0)->type().rank()));
  return std::vector<Strides>(n.numResults(), s);
}

std::optional<std::vector<Strides>> viewReshape(const ir::Node& n, const Strides& in) {
  std::optional<Strides> s = viewStrides(n.operand(0)->type().shape, in, n.result(0)->type().shape);
  if (!s) return std::nullopt;
  return std::vector<Strides>{*s};
}

// all_reduce_wait: the parts of a flat bucket, each contiguous.
std::optional<std::vector<Strides>> viewBucketParts(const ir::Node& n, const Strides&) {
  std::vector<Strides> out;
  for (size_t r = 0; r < n.numResults(); ++r) {
    const ir::Shape& shape = n.result(r)->type().shape;
    Strides s(shape.size(), 1);
    for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
    out.push_back(s);
  }
  return out;
}

// The rule of each OpInfo::viewLayout; nullptr for ViewLayout::None.
ViewRule viewRuleOf(ir::ViewLayout layout) {
  switch (layout) {
    case ir::ViewLayout::None: return nullptr;
    case ir::ViewLayout::Transpose: return viewTranspose;
    case ir::ViewLayout::SameStrides: return viewSameStrides;
    case ir::ViewLayout::DropAxis: return viewDropAxis;
    case ir::ViewLayout::Reshape: return viewReshape;
    case ir::ViewLayout::BucketParts: return viewBucketParts;
  }
  return nullptr;
}

// ---- how kernels read strided operands: OpInfo::stridedReads (ir/op_table.h) ------------------

// Bytes at::matmul copies for a[..., m, k] @ b[..., k, n] with these strides.
std::int64_t matmulCopies(const ir::TensorType& ta, const Strides& sa, const ir::TensorType& tb, const Strides& sb) {
  const int ra = ta.rank(), rb = tb.rank();
  const std::int64_t elem = ir::dtypeSize(ta.dtype);
  std::int64_t copies = 0;
  auto matrixCopy = [&](const ir::Shape& shape, const Strides& s) {
    size_t r = shape.size();
    if (!ir::blasCompatible(shape[r - 2], shape[r - 1], s[r - 2], s[r - 1])) copies += shape[r - 2] * shape[r - 1] * elem;
  };
  if (ra == 2 && rb == 2) {
    matrixCopy(ta.shape, sa);
    matrixCopy(tb.shape, sb);
    return copies;
  }
  // Folding a[..., m, k] into [M, k] for one mm (ATen's should_fold; a transposed 3-D operand
  // goes through bmm instead).
  const bool fold = ir::matmulFoldsRows(ra, rb, ta.shape.data(), sa.data());
  if (fold) {
    ir::Shape flat{ta.numel() / ta.shape.back(), ta.shape.back()};
    std::optional<Strides> s = viewStrides(ta.shape, sa, flat);
    if (!s) copies += ta.bytes();
    else matrixCopy(flat, *s);
    matrixCopy(tb.shape, sb);
    return copies;
  }
  // Batched: both operands expanded to the broadcast batch and reshaped to [P, rows, cols].
  ir::Shape batchA(ta.shape.begin(), ta.shape.end() - 2), batchB(tb.shape.begin(), tb.shape.end() - 2);
  ir::Shape batch = ir::broadcastShapes(batchA, batchB).value_or(batchA);
  std::int64_t p = 1;
  for (std::int64_t e : batch) p *= e;
  auto batched = [&](const ir::TensorType& t, const Strides& s) {
    const size_t r = t.shape.size(), nb = batch.size();
    ir::Shape shape = batch;
    Strides strides(nb, 0);
    for (size_t i = 0; i + 2 < r; ++i) {  // align t's batch dims to the right of `batch`
      size_t j = nb - (r - 2) + i;
      strides[j] = t.shape[i] == batch[j] ? s[i] : 0;
    }
    for (size_t i = r - 2; i < r; ++i) {
      shape.push_back(t.shape[i]);
      strides.push_back(s[i]);
    }
    ir::Shape flat{p, t.shape[r - 2], t.shape[r - 1]};
    std::optional<Strides> fs = viewStrides(shape, strides, flat);
    if (!fs) copies += p * t.shape[r - 2] * t.shape[r - 1] * elem;
    else matrixCopy(flat, *fs);
  };
  batched(ta, sa);
  batched(tb, sb);
  return copies;
}

}  // namespace

// ---- roles -------------------------------------------------------------------------------------

StorageRole storageRoleOf(const ir::Value& owner) {
  BufferKind kind = BufferKind::Activation;
  switch (owner.kind()) {
    case ir::ValueKind::Param:
      kind = ir::getString(owner.attrs(), "role").value_or("") == "opt_state" ? BufferKind::OptState : BufferKind::Param;
      break;
    case ir::ValueKind::Input: kind = BufferKind::Input; break;
    case ir::ValueKind::Result:
      switch (owner.producer()->phase()) {
        case ir::Phase::fwd: kind = BufferKind::Activation; break;
        case ir::Phase::bwd: kind = BufferKind::Gradient; break;
        case ir::Phase::opt: kind = BufferKind::Optimizer; break;
        case ir::Phase::recompute: kind = BufferKind::Recompute; break;
        case ir::Phase::comm: kind = BufferKind::Comm; break;
      }
      // Gathered parameters (ZeRO stage 3) are communication buffers wherever they are gathered.
      if (owner.producer()->op().collective == ir::Collective::AllGatherStart) kind = BufferKind::Comm;
      return StorageRole{kind, Residency::Step};
  }
  return StorageRole{kind, ir::defaultResidency(kind)};
}

std::vector<const ir::Value*> persistentValues(const ir::Graph& graph) {
  std::vector<const ir::Value*> out;
  out.reserve(graph.params().size() + graph.inputs().size());
  for (const auto& p : graph.params())
    if (storageRoleOf(*p).residency == Residency::Persistent) out.push_back(p.get());
  for (const auto& in : graph.inputs())
    if (storageRoleOf(*in).residency == Residency::Persistent) out.push_back(in.get());
  return out;
}

// ---- the storage model -------------------------------------------------------------------------

bool StorageModel::contiguous(const ir::Value* v) const { return isContiguous(v->type().shape, strides(v)); }

std::int64_t StorageModel::workspaceBytes(const ir::Node* node) const {
  const int i = nodeIndex_.get(node);
  return i < 0 ? 0 : nodes_[static_cast<size_t>(i)].workspace;
}

std::int64_t StorageModel::copyBytes(const ir::Node* node) const {
  const int i = nodeIndex_.get(node);
  return i < 0 ? 0 : nodes_[static_cast<size_t>(i)].copies;
}

StorageModel analyzeStorage(const ir::Graph& graph) {
  StorageModel m;
  m.valueIndex_ = IdIndex<ir::Value>(graph.valueIdBound());
  m.info_.reserve(graph.valueIdBound());
  m.nodeIndex_ = IdIndex<ir::Node>(graph.nodeIdBound());
  const ir::KernelSetting kernels = graph.kernelSetting();  // the plan's parameters (ir::Graph)
  for (const auto& p : graph.params())
    m.add(p.get(), StorageModel::Info{p.get(), contiguousStrides(p->type().shape)});
  for (const auto& in : graph.inputs())
    m.add(in.get(), StorageModel::Info{in.get(), contiguousStrides(in->type().shape)});

  for (const auto& n : graph.nodes()) {
    const ir::Node& node = *n;
    std::optional<std::vector<Strides>> views;
    if (node.op().view && node.numOperands() > 0) {
      ViewRule rule = viewRuleOf(node.op().viewLayout);
      assert(rule && "a view op without a ViewLayout in the op table");
      const ir::Value* src = node.operand(0);
      views = rule ? rule(node, m.info(src).strides) : std::nullopt;
      if (views)
        for (size_t r = 0; r < node.numResults(); ++r)
          m.add(node.result(r), StorageModel::Info{m.info(src).owner, (*views)[r]});
    }
    if (!views)
      for (size_t r = 0; r < node.numResults(); ++r)
        m.add(node.result(r),
                        StorageModel::Info{node.result(r), contiguousStrides(node.result(r)->type().shape)});
    if (node.op().view) continue;  // a view (or reshape's copy) reads nothing else

    std::int64_t copies = 0;
    switch (node.op().stridedReads) {
      case ir::StridedReads::InPlace: break;
      case ir::StridedReads::Copied:
        for (const ir::Value* v : node.operands())
          if (!m.contiguous(v)) copies += v->type().bytes();
        break;
      case ir::StridedReads::Matmul:
        copies = matmulCopies(node.operand(0)->type(), m.strides(node.operand(0)), node.operand(1)->type(),
                              m.strides(node.operand(1)));
        break;
      case ir::StridedReads::Rows:
        for (const ir::Value* v : node.operands()) {
          const ir::TensorType& t = v->type();
          if (t.rank() == 0) continue;  // a scalar reads as it is
          ir::Shape flat{t.numel() / t.shape.back(), t.shape.back()};
          if (!viewStrides(t.shape, m.strides(v), flat)) copies += t.bytes();
        }
        break;
    }
    std::int64_t workspace = node.workspaceBytes(kernels) + copies;
    if (workspace > 0 && m.nodeIndex_.insert(&node, static_cast<int>(m.nodes_.size())))
      m.nodes_.push_back(StorageModel::NodeCost{workspace, copies});
  }
  return m;
}

}  // namespace gradc::passes
