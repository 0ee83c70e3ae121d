// Resumable training checkpoints.
//
// A checkpoint is a directory:
//   weights.safetensors    the parameters, named as in the spec (layer names joined by '.'),
//                          PyTorch layouts: loadable with safetensors.torch.load_file
//   optimizer.safetensors  optimizer state, e.g. "opt.adam_m.fc1.weight"
//   state.json             {"format": "gradc-checkpoint", "version": 2, "step": ..., "seed": ...,
//                           "data": {"epoch": ..., "index": ...}, "config": {...}, "files": ...,
//                           "state_sha256": ...}
//
//   .gradc-checkpoint      an empty marker: this folder was written by gradc
// and state.json also carries the sha256 of both tensor files ("files") and of itself
// ("state_sha256": of its compact JSON without that field), both required and verified on load
// from version 2 on, so an edited step or a deleted checksum list is an error, not a damaged
// resume. Version 1 checkpoints (before the seal) are still read.
//
// Saving never leaves the directory half-written. For a checkpoint at D (folder name N in its
// parent P), with the working names T = P/.N.gradc-save and O = P/.N.gradc-previous, which no
// user picks by accident:
//   1. everything is written into T, the marker first (each file fsync'ed, then the folder);
//   2. the previous D, if any, is renamed to O;
//   3. T is renamed to D, and the parent folder is fsync'ed;
//   4. O is deleted.
// A crash during 1 leaves D intact (the next save deletes the stale T); a crash between 2 and 3
// leaves no D but a complete O, which loadCheckpoint then reads; a crash during 4 leaves the new
// D plus a stale O, which the next save deletes. So at every instant either D or O holds a
// complete checkpoint, and loading D (or O when D is missing) gives the last one that was
// completely written.
// What gradc removes or replaces is only ever its own: T and O only when they carry the marker,
// D only when it is a gradc checkpoint (marker, or a state.json of this format) holding nothing
// but gradc's files; anything else is an Error that names the entry and leaves it alone.
// One process saves to a given D at a time: a run holds a CheckpointLock on it from before its
// first step.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "ir/status.h"
#include "runtime/core/tensor_map.h"
#include "runtime/io/data.h"
#include "runtime/io/safetensors.h"

namespace gradc::runtime {

inline constexpr std::int64_t kCheckpointVersion = 2;

// Keys of weights.safetensors' __metadata__ that make it self-describing: the model's name and
// the vocabulary its tokens came from (Vocabulary::serialize), from the checkpoint's config.
inline constexpr const char* kWeightsModelKey = "gradc.model";
inline constexpr const char* kWeightsVocabularyKey = "gradc.vocabulary";

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
// state.json or safetensors file, a tensor file that does not match its checksum are Errors
// naming the file.
Expected<CheckpointData> loadCheckpoint(const std::filesystem::path& dir);
// The same checks of state.json, without reading the tensor files: step, seed, data position
// and configuration (weights and optimizer left empty).
Expected<CheckpointData> loadCheckpointState(const std::filesystem::path& dir);

// One tensor file of a checkpoint folder, checked against the sha256 in its state.json (none
// to check for a checkpoint from before checksums), then parsed.
Expected<SafetensorsFile> loadCheckpointFile(const std::filesystem::path& dir, const std::string& file);

// An exclusive flock(2) on P/.N.gradc-lock beside the checkpoint folder D, for as long as the
// object lives; the lock file holds the owner's pid and is left in place. Acquiring it also
// creates D's parent folders, so an unwritable --save location fails before training starts.
class CheckpointLock {
 public:
  // Error "... is in use by pid N" when another process holds it.
  static Expected<CheckpointLock> acquire(const std::filesystem::path& dir);
  CheckpointLock(CheckpointLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  CheckpointLock& operator=(CheckpointLock&&) = delete;
  ~CheckpointLock();

 private:
  explicit CheckpointLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace gradc::runtime
