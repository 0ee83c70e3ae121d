// What the ranks of one data-parallel run must agree on before step 1, checked through the
// communicator so that a mistake in one rank's launch is an error naming the rank and the flag,
// not a run whose ranks silently train different models (or hang at the end):
//   - the run's settings (`checkIdenticalRun`): every flag that shapes the step (the checkpoint
//     config: learning rate, optimizer, clipping, remat, ...), the step count, the seed and the
//     training data (a fingerprint of the file, or "synthetic");
//   - the starting state (`checkIdenticalState`): parameters and optimizer state, by checksum.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"
#include "runtime/comm/communicator.h"
#include "runtime/core/tensor_map.h"

namespace gradc::runtime {

// Every rank's `text`, in rank order (an all-gather of lengths, then of the padded bytes).
Expected<std::vector<std::string>> gatherText(Communicator& comm, const std::string& text, const std::string& what);

// Identifies a data file cheaply: its size and an FNV-1a hash of 64 blocks of 4 KiB spread over
// it (all of a small file). Two files that differ only between the blocks are not told apart.
Expected<std::string> dataFingerprint(const std::filesystem::path& path);

// `settings` is a JSON object of this rank's run settings; every rank's must equal rank 0's.
// The error names the first differing rank and key with both values.
Status checkIdenticalRun(const std::string& settings, Communicator& comm);

// Whether `mine` holds on any rank (an all-gather of one flag per rank), so that all ranks
// take the same branch.
Expected<bool> onAnyRank(bool mine, Communicator& comm, const std::string& what);

// Every rank must start from the same parameters and optimizer state (a rank's shard of
// sharded state is its own and left out).
Status checkIdenticalState(const ir::Graph& g, const TensorMap& state, Communicator& comm);

}  // namespace gradc::runtime
