// `gradc train --trace-out FILE.json`: a Chrome trace-event file of the run (the JSON object
// format: {"traceEvents": [...]}; it opens in Perfetto and chrome://tracing).
//
// Per rank (pid = rank, named "rank R"): on thread 0 ("steps and kernels") one complete event
// ("ph": "X") per training step (and one per validation, "validation after step N"), and inside it one per executed node, named by its op, with
// its phase as category and args {"node": IR name, "spec": layer, "step", "result_bytes"}; on
// thread 1 ("communication") the nodes that start, wait for or move data between ranks
// (all_reduce_start / all_reduce_wait, gather, scatter), so waits stand out; and a counter
// track "live bytes" ("ph": "C") sampled after every node from the tracking allocator (arena
// bytes in use plus what kernels hold outside it). Timestamps are microseconds of the host's
// wall clock, so the ranks of one host line up. At most kMaxTraceEvents events per rank are
// kept; a run that records more says so in its last event.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace gradc::runtime {

inline constexpr std::int64_t kMaxTraceEvents = 500'000;

class TraceRecorder {
 public:
  TraceRecorder(const ir::Graph& graph, int rank);

  void beginStep(std::int64_t step);
  void endStep();
  // An evaluation after the current step (category "eval", args: the step and the loss); its
  // nodes are recorded by node() in between, like a step's.
  void beginEvaluation();
  void endEvaluation(double loss);
  // Called right after a node's kernel returned, `elapsed` after it started.
  void node(const ir::Node& node, std::chrono::nanoseconds elapsed);

  // This rank's events, comma-separated (no brackets), metadata first.
  std::string events() const;

 private:
  void add(std::string event);

  int rank_;
  std::unordered_map<const ir::Node*, std::string> names_;  // IR names, "%12"
  std::vector<std::string> events_;
  std::int64_t step_ = 0;
  double stepStartUs_ = 0;
  double evalStartUs_ = 0;
  bool truncated_ = false;
};

// The whole file from every rank's events().
std::string traceDocument(const std::vector<std::string>& rankEvents);

}  // namespace gradc::runtime
