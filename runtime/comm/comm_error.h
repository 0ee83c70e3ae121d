// The wording of collective failures, shared by the Gloo and NCCL communicators (std only, so
// the NCCL library needs no LibTorch).
//
//   rank R: <what> failed after X s: <cause>
//
// with the cause in plain words where it is one of the two usual ones:
//   no answer within the 60 s timeout; a peer rank stopped answering or died
//   a peer rank exited or was killed (connection closed)
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>

#include "ir/status.h"

namespace gradc::runtime::comm {

// "0.004", "0.35", "2", "12.5", "60": two significant digits below a second, else at most one
// decimal, no trailing ".0".
inline std::string formatSeconds(double seconds) {
  char buf[32];
  if (seconds < 0) seconds = 0;
  if (seconds < 1) {
    std::snprintf(buf, sizeof buf, "%.2g", seconds);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.1f", seconds);
  std::string text = buf;
  if (text.size() > 2 && text.compare(text.size() - 2, 2, ".0") == 0) text.resize(text.size() - 2);
  return text;
}

inline std::string timeoutCause(std::chrono::milliseconds timeout) {
  return "no answer within the " + formatSeconds(timeout.count() / 1000.0) +
         " s timeout; a peer rank stopped answering or died";
}

inline constexpr std::string_view kPeerClosedCause = "a peer rank exited or was killed (connection closed)";

inline Error collectiveError(int rank, std::string_view what, double elapsedSeconds, std::string_view cause) {
  return Error{"rank " + std::to_string(rank) + ": " + std::string(what) + " failed after " +
               formatSeconds(elapsedSeconds) + " s: " + std::string(cause)};
}

inline bool containsNoCase(std::string_view text, std::string_view needle) {
  auto it = std::search(text.begin(), text.end(), needle.begin(), needle.end(), [](char a, char b) {
    auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    return lower(a) == lower(b);
  });
  return it != text.end();
}

// Library messages often start with "[./gloo/transport/tcp/pair.cc:589] "; drop that prefix.
inline std::string stripSourceLocation(std::string_view message) {
  while (!message.empty() && message.front() == '[') {
    auto close = message.find("] ");
    if (close == std::string_view::npos) break;
    message.remove_prefix(close + 2);
  }
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.remove_suffix(1);
  return std::string(message);
}

inline constexpr std::string_view kGarbageCause =
    "the peer answered with bytes that are not gradc's rendezvous protocol (is MASTER_ADDR:MASTER_PORT another "
    "program's address, or another job's store?)";

// The plain-words cause for a transport's exception text: a timeout, a closed connection, a
// peer speaking something else, or the text itself (without a source location).
inline std::string causeFromMessage(std::string_view message, std::chrono::milliseconds timeout) {
  if (containsNoCase(message, "timed out") || containsNoCase(message, "timeout")) return timeoutCause(timeout);
  // What c10d's TCPStore client and std::string say when a peer's bytes are not the protocol.
  if (containsNoCase(message, "response is expected") || containsNoCase(message, "basic_string") ||
      containsNoCase(message, "length_error") || containsNoCase(message, "bad_alloc") ||
      containsNoCase(message, "invalid response"))
    return std::string(kGarbageCause);
  if (containsNoCase(message, "connection closed") || containsNoCase(message, "reset by peer") ||
      containsNoCase(message, "broken pipe") || containsNoCase(message, "connection refused") ||
      containsNoCase(message, "socket closed")) {
    return std::string(kPeerClosedCause);
  }
  return stripSourceLocation(message);
}

}  // namespace gradc::runtime::comm
