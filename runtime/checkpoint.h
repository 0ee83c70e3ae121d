// Resumable training checkpoints.
//
// A checkpoint is a directory:
//   weights.safetensors    the parameters, named as in the spec (layer names joined by '.'),
//                          PyTorch layouts: loadable with safetensors.torch.load_file
//   optimizer.safetensors  optimizer state, e.g. "opt.adam_m.fc1.weight"
//   state.json             {"format": "gradc-checkpoint", "version": 1, "step": ..., "seed": ...,
//                           "data": {"epoch": ..., "index": ...}, "config": {...}}
//
// Saving never leaves the directory half-written. For a checkpoint at D:
//   1. everything is written into D.tmp (each file fsync'ed, then the folder);
//   2. the previous D, if any, is renamed to D.old;
//   3. D.tmp is renamed to D, and the parent folder is fsync'ed;
//   4. D.old is deleted.
// A crash during 1 leaves D intact (the next save deletes the stale D.tmp); a crash between 2
// and 3 leaves no D but a complete D.old, which loadCheckpoint then reads; a crash during 4
// leaves the new D plus a stale D.old, which the next save deletes. So at every instant either
// D or D.old holds a complete checkpoint, and loading D (or D.old when D is missing) gives the
// last one that was completely written. The names D.tmp and D.old are reserved for this.
// One process saves a given checkpoint at a time (rank 0 in a distributed run).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "ir/status.h"
#include "runtime/data.h"
#include "runtime/tensor_map.h"

namespace gradc::runtime {

inline constexpr std::int64_t kCheckpointVersion = 1;

struct CheckpointData {
  TensorMap weights;
  TensorMap optimizer;
  std::int64_t step = 0;
  std::uint64_t seed = 0;
  DataPosition data;
  // The run configuration as JSON object text, stored verbatim (re-serialised) in state.json;
  // "" stands for {}. A run stores its vocabulary (Vocabulary::serialize) here.
  std::string config = "{}";
  // Set by loadCheckpoint: the directory actually read (D, or D.old after an interrupted save).
  // Ignored by saveCheckpoint.
  std::filesystem::path loaded_from;
};

// Writes a checkpoint to `dir` as described above. Refuses to replace an existing non-empty
// directory that does not look like a checkpoint (has no state.json).
Status saveCheckpoint(const std::filesystem::path& dir, const CheckpointData& data);

// Reads and validates a checkpoint: missing files, a different format version, a corrupt
// state.json or safetensors file are Errors naming the file.
Expected<CheckpointData> loadCheckpoint(const std::filesystem::path& dir);

}  // namespace gradc::runtime
