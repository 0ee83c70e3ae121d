#include "runtime/train/trace.h"

#include <nlohmann/json.hpp>

#include <cstdio>

#include "ir/printer.h"
#include "runtime/exec/memory_tracker.h"

namespace gradc::runtime {
namespace {

using nlohmann::json;

double nowUs() {
  return static_cast<double>(
             std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
                 .count()) /
         1000.0;
}

// Microseconds with nanosecond digits, as trace viewers read them.
std::string us(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

bool isCommunication(const ir::Node& node) { return node.op().collective != ir::Collective::None; }

std::int64_t resultBytes(const ir::Node& node) {
  std::int64_t total = 0;
  for (size_t r = 0; r < node.numResults(); ++r) total += node.result(r)->type().bytes();
  return total;
}

}  // namespace

TraceRecorder::TraceRecorder(const ir::Graph& graph, int rank) : rank_(rank) {
  ir::ValueNames names(graph);
  for (const auto& n : graph.nodes())
    names_.emplace(n.get(), n->numResults() > 0 ? names(n->result(0)) : std::string(n->opName()));
  const std::string pid = std::to_string(rank);
  add(R"({"name":"process_name","ph":"M","pid":)" + pid + R"(,"args":{"name":"rank )" + pid + R"("}})");
  add(R"({"name":"process_sort_index","ph":"M","pid":)" + pid + R"(,"args":{"sort_index":)" + pid + "}}");
  add(R"({"name":"thread_name","ph":"M","pid":)" + pid + R"(,"tid":0,"args":{"name":"steps and kernels"}})");
  add(R"({"name":"thread_name","ph":"M","pid":)" + pid + R"(,"tid":1,"args":{"name":"communication"}})");
}

void TraceRecorder::add(std::string event) {
  if (static_cast<std::int64_t>(events_.size()) >= kMaxTraceEvents) {
    truncated_ = true;
    return;
  }
  events_.push_back(std::move(event));
}

void TraceRecorder::beginStep(std::int64_t step) {
  step_ = step;
  stepStartUs_ = nowUs();
}

void TraceRecorder::endStep() {
  const double end = nowUs();
  add(R"({"name":"step )" + std::to_string(step_) + R"(","cat":"step","ph":"X","pid":)" + std::to_string(rank_) +
      R"(,"tid":0,"ts":)" + us(stepStartUs_) + R"(,"dur":)" + us(end - stepStartUs_) + R"(,"args":{"step":)" +
      std::to_string(step_) + "}}");
}

void TraceRecorder::beginEvaluation() { evalStartUs_ = nowUs(); }

void TraceRecorder::endEvaluation(double loss) {
  const double end = nowUs();
  add(R"({"name":"validation after step )" + std::to_string(step_) + R"(","cat":"eval","ph":"X","pid":)" +
      std::to_string(rank_) + R"(,"tid":0,"ts":)" + us(evalStartUs_) + R"(,"dur":)" + us(end - evalStartUs_) +
      R"(,"args":{"step":)" + std::to_string(step_) + R"(,"val_loss":)" + json(loss).dump() + "}}");
}

void TraceRecorder::node(const ir::Node& node, std::chrono::nanoseconds elapsed) {
  const double end = nowUs();
  const double dur = static_cast<double>(elapsed.count()) / 1000.0;
  const std::string pid = std::to_string(rank_);
  json args = {{"node", names_.count(&node) ? names_.at(&node) : std::string()},
               {"spec", node.specName()},
               {"step", step_},
               {"result_bytes", resultBytes(node)}};
  add(R"({"name":)" + json(std::string(node.opName())).dump() + R"(,"cat":)" +
      json(std::string(ir::phaseName(node.phase()))).dump() + R"(,"ph":"X","pid":)" + pid +
      R"(,"tid":)" + (isCommunication(node) ? "1" : "0") + R"(,"ts":)" + us(end - dur) + R"(,"dur":)" + us(dur) +
      R"(,"args":)" + args.dump() + "}");
  if (MemoryTracker::installed())
    add(R"({"name":"live bytes","ph":"C","pid":)" + pid + R"(,"ts":)" + us(end) + R"(,"args":{"bytes":)" +
        std::to_string(MemoryTracker::currentBytes()) + "}}");
}

std::string TraceRecorder::events() const {
  std::string out;
  for (const std::string& e : events_) {
    if (!out.empty()) out += ",\n";
    out += e;
  }
  if (truncated_)
    out += ",\n" + std::string(R"({"name":"trace truncated","ph":"i","s":"p","pid":)") + std::to_string(rank_) +
           R"(,"tid":0,"ts":)" + us(nowUs()) + R"(,"args":{"kept_events":)" + std::to_string(kMaxTraceEvents) + "}}";
  return out;
}

std::string traceDocument(const std::vector<std::string>& rankEvents) {
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  for (const std::string& e : rankEvents) {
    if (e.empty()) continue;
    if (!first) out += ",\n";
    out += e;
    first = false;
  }
  out += "\n]}\n";
  return out;
}

}  // namespace gradc::runtime
