// Executor::releaseState (see executor.h): the trained state handed to the caller without a
// copy on the host.
//
// Each state tensor becomes a view of the same bytes whose storage holds a share of the arena,
// so the arena outlives the executor exactly as long as some state tensor does. Every page of
// the arena that no state tensor touches is then given back with MADV_DONTNEED (nothing reads
// those ranges again: no run may follow), so what the caller keeps resident is the state's
// pages, as with a copy, without the copy's moment of holding both.
#include <sys/mman.h>
#include <unistd.h>

#include <ATen/ops/from_blob.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "runtime/exec/executor.h"

namespace gradc::runtime {
namespace {

// The bytes [first, last) a tensor's elements span (its strides may leave gaps).
std::pair<std::uintptr_t, std::uintptr_t> span(const at::Tensor& t) {
  const auto first = reinterpret_cast<std::uintptr_t>(t.data_ptr());
  std::int64_t lastElement = 0;
  for (std::int64_t d = 0; d < t.dim(); ++d) lastElement += (t.size(d) - 1) * t.stride(d);
  return {first, first + static_cast<std::uintptr_t>((lastElement + 1) * t.element_size())};
}

}  // namespace

void Executor::releaseState(TensorMap& state) {
  if (!arena_) return;
  if (!device().isHost()) {
    for (auto& [name, t] : state) t = t.cpu();
    return;
  }
  const auto begin = reinterpret_cast<std::uintptr_t>(arena_.get());
  const auto end = begin + static_cast<std::uintptr_t>(arenaSize_);
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> kept;
  for (auto& [name, t] : state) {
    if (!t.defined() || t.numel() == 0) continue;
    const auto [first, last] = span(t);
    if (first < begin || last > end) continue;  // not in the arena: already the caller's
    kept.push_back({first, last});
    std::shared_ptr<std::byte> share = arena_;
    t = at::from_blob(t.data_ptr(), t.sizes(), t.strides(), [share](void*) {}, t.options());
  }
  // Give back the whole pages between the kept ranges.
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  std::sort(kept.begin(), kept.end());
  std::uintptr_t from = begin;
  kept.push_back({end, end});
  for (const auto& [first, last] : kept) {
    const std::uintptr_t a = (from + page - 1) / page * page, b = first / page * page;
    if (a < b) (void)madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED);
    from = std::max(from, last);
  }
}

}  // namespace gradc::runtime
