// Which native kernels the runtime loads. An artifact's `step.kernels.so` is machine code run
// in this process (its constructors at load time), so the checksums of the manifest, which
// anyone can recompute, do not decide it. Instead:
//
//   - Each user has a secret key, made on first use (32 random bytes as hex, mode 0600):
//     $GRADC_KERNEL_KEY if set, else $XDG_CONFIG_HOME/gradc/kernel-key, else
//     ~/.config/gradc/kernel-key ($HOME, or the user's home directory in the password database).
//   - `gradc compile -o` records per rank `kernels_tag` = HMAC-SHA256(key, "gradc-kernels-v1",
//     sha256 of the kernels, sha256 of the graph): the kernels bound to the graph they were
//     generated for, by this user.
//   - Before loading kernels, the runtime recomputes the tag with the running user's key. A
//     missing or different tag (another user's or machine's artifact, a replaced shared object,
//     another compile's kernels next to this graph) is refused before anything is loaded,
//     unless the user passes --trust-kernels; then the kernels still must cover every fused
//     node of the graph (GeneratedKernels::covers).
//   - Without trusting anything, --no-generated-kernels runs the artifact's reference step
//     (passes/unfuse.h: the fused regions as ATen kernels, planned on their own), which loads
//     no native code from the artifact at all.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "ir/status.h"

namespace gradc::runtime {

// Where this user's key lives (see above); an Error when neither variable nor HOME is set.
Expected<std::filesystem::path> kernelKeyPath();

// This user's key, created atomically (never replacing one another process made first) when
// `create` and missing.
Expected<std::string> kernelKey(bool create);

// HMAC-SHA256 (RFC 2104) of `message` under `key`, as 64 hex digits.
std::string hmacSha256Hex(std::string_view key, std::string_view message);

// The tag of kernels generated for `graphText`, under `key`.
std::string kernelsTag(std::string_view key, std::string_view kernelsBytes, std::string_view graphText);

// Ok when `tag` is the running user's tag of these kernels and graph, or when `trusted`.
Status checkKernelsTrusted(const std::string& tag, std::string_view kernelsBytes, std::string_view graphText,
                           const std::filesystem::path& kernelsFile, bool trusted);

}  // namespace gradc::runtime
