#include "runtime/train/rank_agreement.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/zeros.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>
#include <nlohmann/json.hpp>

#include "runtime/core/json_text.h"
#include "runtime/io/shard_checkpoint.h"

namespace gradc::runtime {

// Every rank's `text`, in rank order: the lengths first, then the bytes padded to the longest.
Expected<std::vector<std::string>> gatherText(Communicator& comm, const std::string& text, const std::string& what) {
  const int world = comm.worldSize();
  at::Tensor length = at::full({1}, static_cast<std::int64_t>(text.size()), at::kLong);
  at::Tensor lengths = at::empty({world}, at::kLong);
  if (Status s = comm.allGather(length, lengths, what + " (lengths)"); !s) return s.error();
  std::int64_t longest = 1;
  for (int r = 0; r < world; ++r) longest = std::max(longest, lengths[r].item<std::int64_t>());
  at::Tensor mine = at::zeros({longest}, at::kByte);
  std::memcpy(mine.data_ptr(), text.data(), text.size());
  at::Tensor all = at::empty({world * longest}, at::kByte);
  if (Status s = comm.allGather(mine, all, what); !s) return s.error();
  std::vector<std::string> out;
  const char* bytes = static_cast<const char*>(all.data_ptr());
  for (int r = 0; r < world; ++r)
    out.emplace_back(bytes + r * longest, static_cast<size_t>(lengths[r].item<std::int64_t>()));
  return out;
}

namespace {

// FNV-1a over the bytes of every parameter and optimizer-state tensor, in graph order; a rank's
// shard of sharded state is its own, so it is left out.
std::int64_t stateChecksum(const ir::Graph& g, const TensorMap& state) {
  std::uint64_t h = 1469598103934665603ull;
  for (const auto& p : g.params()) {
    if (isShardedState(*p)) continue;
    at::Tensor t = state.at(p->name()).cpu().contiguous();
    const auto* bytes = static_cast<const unsigned char*>(t.data_ptr());
    for (size_t i = 0, n = t.nbytes(); i < n; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  }
  return static_cast<std::int64_t>(h);
}

}  // namespace

Status checkIdenticalState(const ir::Graph& g, const TensorMap& state, Communicator& comm) {
  at::Tensor mine = at::scalar_tensor(stateChecksum(g, state), at::kLong).reshape({1});
  at::Tensor all = at::empty({comm.worldSize()}, at::kLong);
  if (Status s = comm.allGather(mine, all, "all_gather of the parameter checksums at the start"); !s) return s;
  for (int r = 1; r < comm.worldSize(); ++r)
    if (all[r].item<std::int64_t>() != all[0].item<std::int64_t>())
      return Error{"rank " + std::to_string(r) + " starts from other parameters or optimizer state than rank 0 "
                   "(checksums differ); every rank must initialise with the same seed or resume the same checkpoint"};
  return {};
}

Expected<bool> onAnyRank(bool mine, Communicator& comm, const std::string& what) {
  at::Tensor flag = at::full({1}, static_cast<std::int64_t>(mine), at::kLong);
  at::Tensor all = at::empty({comm.worldSize()}, at::kLong);
  if (Status s = comm.allGather(flag, all, what); !s) return s.error();
  return all.sum().item<std::int64_t>() > 0;
}

Expected<std::string> dataFingerprint(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Error{"cannot open '" + path.string() + "': " + std::strerror(errno)};
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return Error{"cannot read '" + path.string() + "': not a regular file"};
  }
  constexpr std::int64_t kBlock = 4096, kBlocks = 64;
  const std::int64_t size = info.st_size;
  std::uint64_t h = 1469598103934665603ull;
  std::vector<unsigned char> block(static_cast<size_t>(kBlock));
  const std::int64_t stride = std::max<std::int64_t>(kBlock, size / kBlocks);
  for (std::int64_t offset = 0; offset < size; offset += stride) {
    const ssize_t n = ::pread(fd, block.data(), block.size(), static_cast<off_t>(offset));
    for (ssize_t i = 0; i < n; ++i) h = (h ^ block[static_cast<size_t>(i)]) * 1099511628211ull;
  }
  ::close(fd);
  return std::to_string(size) + " bytes, sampled FNV-1a " + std::to_string(h);
}

Status checkIdenticalRun(const std::string& settings, Communicator& comm) {
  Expected<std::vector<std::string>> all = gatherText(comm, settings, "all_gather of the run settings at the start");
  if (!all) return all.error();
  const nlohmann::json first = parseJsonBounded((*all)[0]);
  for (size_t r = 1; r < all->size(); ++r) {
    if ((*all)[r] == (*all)[0]) continue;
    const nlohmann::json mine = parseJsonBounded((*all)[r]);
    std::string what = "its settings";
    if (first.is_object() && mine.is_object()) {
      // The first differing key, one level into nested objects (the checkpoint config), the
      // run's own keys first: another data file also changes the config's vocabulary.
      std::vector<std::string> keys = {"data", "steps", "seed"};
      for (const auto& [key, value] : first.items())
        if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
      for (const std::string& key : keys) {
        if (!first.contains(key)) continue;
        const nlohmann::json& value = first[key];
        const nlohmann::json other = mine.contains(key) ? mine[key] : nlohmann::json();
        if (other == value) continue;
        std::string name = key, a = value.dump(), b = other.dump();
        if (value.is_object() && other.is_object())
          for (const auto& [sub, v] : value.items())
            if (!other.contains(sub) || other[sub] != v) {
              name = sub;
              a = v.dump();
              b = other.contains(sub) ? other[sub].dump() : "(none)";
              break;
            }
        auto shorten = [](std::string s) { return s.size() > 80 ? s.substr(0, 77) + "..." : s; };
        what = "'" + name + "' " + shorten(b) + " where rank 0 has " + shorten(a);
        break;
      }
    }
    return Error{"rank " + std::to_string(r) + " was started with other settings than rank 0: " + what +
                 "; every rank of a run must be started with the same flags and data"};
  }
  return {};
}

}  // namespace gradc::runtime
