// Subcommands of the gradc CLI. Each registers its options on the CLI11 app and returns the
// callback that runs it; the callback returns the process exit code.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "ir/status.h"

namespace gradc::tools {

// Process exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;  // a bug or an I/O failure outside the user's input
inline constexpr int kExitUserError = 2;  // bad spec, bad IR, bad arguments, infeasible request

// The exit code of a failure, from its kind alone (ir/status.h): the user's input or an
// infeasible budget 2; the machine or a bug of gradc's 1.
constexpr int exitCodeFor(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::User:
    case ErrorKind::InfeasibleBudget: return kExitUserError;
    case ErrorKind::Environment:
    case ErrorKind::Internal: return kExitInternal;
  }
  return kExitInternal;
}
inline int exitCodeFor(const Error& error) { return exitCodeFor(error.kind); }

using Runner = std::function<int()>;

Runner addCompileCommand(CLI::App& app);
Runner addOptCommand(CLI::App& app);
Runner addTrainCommand(CLI::App& app);
Runner addGradCommand(CLI::App& app);
Runner addEvalCommand(CLI::App& app);
Runner addInspectCommand(CLI::App& app);
Runner addPlotCommand(CLI::App& app);
Runner addSampleCommand(CLI::App& app);

}  // namespace gradc::tools
