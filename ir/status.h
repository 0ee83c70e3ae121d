// Error values for user-facing failures (bad IR text, bad specs, invalid graphs, budgets that
// cannot be met, a full disk) and for the compiler's own bugs found at run time.
//
// An Error carries its kind, so a caller decides what it means (the CLI's exit code, a retry,
// a smaller budget) from the kind and its fields, never from the message's words:
//   user               the input, a flag or a file the user named is wrong       (exit 2)
//   infeasible budget  no plan fits the budget; smallestFeasibleBytes fits        (exit 2)
//   environment        the machine failed: disk full, I/O error, out of memory   (exit 1)
//   internal           gradc broke one of its own invariants (a bug)             (exit 1)
// Context added on the way up (withContext) keeps the kind and the fields.
#pragma once

#include <cassert>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace gradc {

enum class ErrorKind : std::uint8_t { User, InfeasibleBudget, Environment, Internal };

struct Error {
  std::string message;
  ErrorKind kind = ErrorKind::User;
  // ErrorKind::InfeasibleBudget: the least budget, in bytes, that the same request fits.
  std::int64_t smallestFeasibleBytes = -1;

  // The same error with `prefix` in front of its message ("on rank 2: ", "remat: ").
  Error withContext(std::string_view prefix) const& {
    Error e = *this;
    e.message.insert(0, prefix);
    return e;
  }
  Error withContext(std::string_view prefix) && {
    message.insert(0, prefix);
    return std::move(*this);
  }
  bool isInternal() const { return kind == ErrorKind::Internal; }
};

// "<where>: internal error: <what>": a broken invariant of gradc's, found at run time by `where`
// (a pass or a module), which the user cannot fix.
inline Error internalError(std::string_view where, std::string_view what) {
  return Error{std::string(where) + ": internal error: " + std::string(what), ErrorKind::Internal};
}
// The machine's failure (a full disk, an I/O error, memory exhausted), not the input's.
inline Error environmentError(std::string message) { return Error{std::move(message), ErrorKind::Environment}; }
// No plan fits the budget; `smallestFeasibleBytes` does.
inline Error infeasibleBudgetError(std::string message, std::int64_t smallestFeasibleBytes) {
  return Error{std::move(message), ErrorKind::InfeasibleBudget, smallestFeasibleBytes};
}

// A value or an Error. Deliberately tiny: the project targets C++20 (no std::expected).
template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : state_(std::move(value)) {}
  Expected(Error error) : state_(std::move(error)) {}

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { assert(ok()); return std::get<0>(state_); }
  const T& value() const& { assert(ok()); return std::get<0>(state_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }

  const Error& error() const { assert(!ok()); return std::get<1>(state_); }

 private:
  std::variant<T, Error> state_;
};

// Success or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), failed_(true) {}
  static Status success() { return Status(); }

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const std::string& message() const { return error_.message; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool failed_ = false;
};

}  // namespace gradc
