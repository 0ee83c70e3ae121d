// gradc inspect PLAN.json [--top N] [--html OUT.html]
//
// A text report of a memory plan (runtime/exec/plan_json.h), for a person looking for where the bytes
// go: the peak and the buffers alive at it, largest first; the bytes at the peak by kind; a
// chart of live bytes over the schedule; the arena and its fragmentation. --html also writes
// the interactive timeline (tools/inspect_html.h). A file that is missing, not JSON, or not a
// plan is a user error (exit 2).
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <memory>

#include "runtime/exec/plan_json.h"
#include "tools/commands.h"
#include "tools/flag_checks.h"
#include "tools/inspect_html.h"
#include "tools/output.h"
#include "tools/summary_report.h"

namespace gradc::tools {

namespace {

struct InspectOptions {
  std::string plan;
  std::string html;
  int top = 12;
  int width = 60;
  int height = 12;
};

std::string percent(std::int64_t part, std::int64_t whole) {
  return whole > 0 ? fmt::format("{:.1f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole)) : "-";
}

std::string describeStep(const passes::MemoryPlan& plan, int step) {
  if (step < 0 || static_cast<size_t>(step) >= plan.steps.size()) return "no steps";
  const passes::PlannedStep& s = plan.steps[static_cast<size_t>(step)];
  return fmt::format("step {} of {}: {} ({}{})", step, plan.steps.size(), s.op, s.phase,
                     s.specName.empty() ? "" : ", " + s.specName);
}

// Columns x rows of block characters: each column is the largest live-bytes value among its
// steps, drawn with eighth blocks; the y axis in the unit of the peak; below, one letter per
// column for the phase most of its steps belong to (F forward, B backward, O optimizer, R
// recompute, C communication).
std::string chart(const passes::MemoryPlan& plan, int width, int height) {
  const auto& t = plan.timeline;
  if (t.empty()) return "  (no steps)\n";
  const int cols = std::min<int>(width, static_cast<int>(t.size()));
  std::vector<std::int64_t> colMax(static_cast<size_t>(cols), 0);
  std::vector<char> colPhase(static_cast<size_t>(cols), ' ');
  for (int c = 0; c < cols; ++c) {
    size_t begin = t.size() * static_cast<size_t>(c) / static_cast<size_t>(cols);
    size_t end = t.size() * static_cast<size_t>(c + 1) / static_cast<size_t>(cols);
    std::map<char, int> phases;
    for (size_t s = begin; s < end; ++s) {
      colMax[static_cast<size_t>(c)] = std::max(colMax[static_cast<size_t>(c)], t[s]);
      if (s < plan.steps.size()) {
        const std::string& ph = plan.steps[s].phase;
        char letter = ph == "fwd" ? 'F' : ph == "bwd" ? 'B' : ph == "opt" ? 'O' : ph == "recompute" ? 'R' : 'C';
        ++phases[letter];
      }
    }
    int best = 0;
    for (const auto& [letter, count] : phases)
      if (count > best) best = count, colPhase[static_cast<size_t>(c)] = letter;
  }
  const std::int64_t top = std::max<std::int64_t>(*std::max_element(t.begin(), t.end()), 1);
  static const char* const eighths[] = {" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  std::vector<std::string> labels(static_cast<size_t>(height));
  labels[0] = formatBytes(top);
  labels[static_cast<size_t>(height / 2)] = formatBytes(top * (height - height / 2) / height);
  labels[static_cast<size_t>(height - 1)] = formatBytes(top / height);
  size_t labelWidth = 0;
  for (const std::string& l : labels) labelWidth = std::max(labelWidth, l.size());
  std::string out;
  for (int r = 0; r < height; ++r) {
    const int rowFromBottom = height - 1 - r;
    std::string line = fmt::format("  {:>{}} |", labels[static_cast<size_t>(r)], labelWidth);
    for (int c = 0; c < cols; ++c) {
      // Height of the column in eighths of a row.
      std::int64_t units = (colMax[static_cast<size_t>(c)] * height * 8 + top / 2) / top;
      std::int64_t here = std::clamp<std::int64_t>(units - rowFromBottom * 8, 0, 8);
      line += eighths[here];
    }
    out += line + "\n";
  }
  out += fmt::format("  {:>{}} +{}\n", "0", labelWidth, std::string(static_cast<size_t>(cols), '-'));
  out += fmt::format("  {:>{}}  {}\n", "", labelWidth, std::string(colPhase.begin(), colPhase.end()));
  std::string left = "step 0", right = fmt::format("step {}", t.size() - 1);
  int gap = std::max(1, cols - static_cast<int>(left.size() + right.size()));
  out += fmt::format("  {:>{}}  {}{}{}\n", "", labelWidth, left, std::string(static_cast<size_t>(gap), ' '), right);
  return out;
}

// Names in a plan file are arbitrary text: its control characters (an ESC sequence) are shown
// as \xNN, not sent to the terminal; the report's own line breaks stay.
std::string terminalSafe(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
      out += fmt::format("\\x{:02x}", c);
    else
      out += static_cast<char>(c);
  }
  return out;
}

std::string report(const passes::MemoryPlan& plan, const InspectOptions& o) {
  std::string out;
  out += fmt::format("memory plan of {} (strategy {}, {})\n", plan.model, plan.strategy,
                     plan.budgetBytes ? "budget " + formatBytes(*plan.budgetBytes) : std::string("no budget"));
  out += fmt::format("  peak        {} ({} bytes) at {}\n", formatBytes(plan.peakBytes), formatCount(plan.peakBytes),
                     describeStep(plan, plan.peakStep));
  if (plan.budgetBytes)
    out += fmt::format("  budget      {} ({})\n", formatBytes(*plan.budgetBytes),
                       plan.peakBytes <= *plan.budgetBytes ? "fits, " + percent(plan.peakBytes, *plan.budgetBytes) + " used"
                                                           : "exceeded by " + formatBytes(plan.peakBytes - *plan.budgetBytes));
  out += fmt::format("  arena       {} (fragmentation {:.3f}: arena / peak)\n", formatBytes(plan.arenaBytes),
                     plan.fragmentation());
  out += fmt::format("  persistent  {} (parameters, optimizer state, inputs: alive the whole step)\n",
                     formatBytes(plan.persistentBytes));
  out += fmt::format("  compute     forward {}, backward {}, optimizer {}, recompute {} ({} of forward)\n",
                     formatFlops(plan.forwardFlops), formatFlops(plan.backwardFlops), formatFlops(plan.optimizerFlops),
                     formatFlops(plan.recomputeFlops), percent(plan.recomputeFlops, plan.forwardFlops));
  if (plan.lossChunks > 0)
    out += fmt::format("  loss        fused LM head + cross_entropy in {} chunk{} of tokens: the logits are never "
                       "held whole\n",
                       plan.lossChunks, plan.lossChunks == 1 ? "" : "s");
  if (plan.ranks.size() > 1) {
    std::int64_t lo = plan.ranks.front().peakBytes, hi = lo;
    for (const passes::RankPlan& r : plan.ranks) {
      lo = std::min(lo, r.peakBytes);
      hi = std::max(hi, r.peakBytes);
      std::string largest;
      for (size_t k = 0; k < r.largestAtPeak.size() && k < 2; ++k)
        largest += fmt::format("{}{} {} {}", k ? ", " : "; largest at its peak: ", formatBytes(r.largestAtPeak[k].size),
                               ir::bufferKindName(r.largestAtPeak[k].kind), r.largestAtPeak[k].type);
      out += fmt::format("  rank {}      peak {}, arena {}{}\n", r.rank, formatBytes(r.peakBytes),
                         formatBytes(r.arenaBytes), largest);
    }
    out += fmt::format("  balance     max / min peak over {} ranks: {:.3f}\n", plan.ranks.size(),
                       lo > 0 ? static_cast<double>(hi) / static_cast<double>(lo) : 0.0);
  }

  std::vector<size_t> live = plan.liveAt(plan.peakStep);
  std::int64_t liveBytes = 0;
  for (size_t i : live) liveBytes += plan.buffers[i].size;
  const size_t shown = std::min(live.size(), static_cast<size_t>(std::max(o.top, 0)));
  std::int64_t shownBytes = 0;
  for (size_t k = 0; k < shown; ++k) shownBytes += plan.buffers[live[k]].size;
  out += fmt::format("\nlargest buffers alive at the peak ({} of {}, {} of the peak):\n", shown, live.size(),
                     percent(shownBytes, plan.peakBytes));
  size_t nameW = 4, specW = 9, typeW = 4;
  for (size_t k = 0; k < shown; ++k) {
    const passes::PlannedBuffer& b = plan.buffers[live[k]];
    nameW = std::max(nameW, b.name.size());
    specW = std::max(specW, b.specName.size());
    typeW = std::max(typeW, b.type.size());
  }
  nameW = std::min<size_t>(nameW, 24);
  specW = std::min<size_t>(specW, 32);
  out += fmt::format("  {:>10}  {:>6}  {:<10}  {:<{}}  {:<{}}  {:<{}}  {:>11}  {}\n", "size", "share", "kind", "name",
                     nameW, "spec name", specW, "type", typeW, "steps", "producer");
  for (size_t k = 0; k < shown; ++k) {
    const passes::PlannedBuffer& b = plan.buffers[live[k]];
    out += fmt::format("  {:>10}  {:>6}  {:<10}  {:<{}}  {:<{}}  {:<{}}  {:>11}  {}\n", formatBytes(b.size),
                       percent(b.size, plan.peakBytes), ir::bufferKindName(b.kind), b.name, nameW, b.specName.empty() ? "-" : b.specName,
                       specW, b.type.empty() ? "-" : b.type, typeW, fmt::format("{}..{}", b.firstStep, b.lastStep),
                       b.producer.empty() ? "-" : b.producer);
  }
  if (shown < live.size())
    out += fmt::format("  ... and {} more buffers, {}\n", live.size() - shown, formatBytes(liveBytes - shownBytes));

  // By kind: bytes alive at the peak, and the most bytes of that kind alive at any one step.
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> atPeak;  // kind -> (bytes, count)
  for (size_t i : live) {
    auto& [bytes, count] = atPeak[std::string(ir::bufferKindName(plan.buffers[i].kind))];
    bytes += plan.buffers[i].size;
    ++count;
  }
  std::map<std::string, std::int64_t> maxAnyStep;
  if (!plan.timeline.empty()) {
    std::map<std::string, std::vector<std::int64_t>> delta;
    for (const passes::PlannedBuffer& b : plan.buffers) {
      auto& d = delta[std::string(ir::bufferKindName(b.kind))];
      if (d.empty()) d.assign(plan.timeline.size() + 1, 0);
      d[static_cast<size_t>(b.firstStep)] += b.size;
      d[static_cast<size_t>(b.lastStep) + 1] -= b.size;
    }
    for (auto& [kind, d] : delta) {
      std::int64_t run = 0, best = 0;
      for (size_t s = 0; s < plan.timeline.size(); ++s) best = std::max(best, run += d[s]);
      maxAnyStep[kind] = best;
    }
  }
  std::vector<std::pair<std::string, std::pair<std::int64_t, std::int64_t>>> kinds(atPeak.begin(), atPeak.end());
  std::stable_sort(kinds.begin(), kinds.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  out += "\nby kind at the peak:\n";
  out += fmt::format("  {:<10}  {:>10}  {:>6}  {:>7}  {:>14}\n", "kind", "bytes", "share", "buffers", "most at a step");
  for (const auto& [kind, v] : kinds)
    out += fmt::format("  {:<10}  {:>10}  {:>6}  {:>7}  {:>14}\n", kind, formatBytes(v.first),
                       percent(v.first, plan.peakBytes), v.second, formatBytes(maxAnyStep[kind]));

  out += fmt::format("\nlive bytes over the schedule ({} steps; F forward, B backward, O optimizer, R recompute):\n",
                     plan.timeline.size());
  out += chart(plan, o.width, o.height);
  return out;
}

int runInspect(const InspectOptions& o) {
  Expected<std::string> text = readInput(o.plan, std::size_t{1} << 31);
  if (!text) {
    std::cerr << "gradc: error: " << text.error().message << "\n";
    return kExitUserError;
  }
  Expected<passes::MemoryPlan> plan = runtime::planFromJson(*text);
  if (!plan) {
    std::cerr << "gradc: error: " << o.plan << ": " << plan.error().message
              << " (expected a plan written by gradc compile SPEC --emit plan)\n";
    return kExitUserError;
  }
  if (!o.html.empty())
    if (Status s = writeOutput(o.html, planToHtml(*plan)); !s)
      return reportWriteFailure(s);
  std::cout << terminalSafe(report(*plan, o));
  return kExitOk;
}

}  // namespace

Runner addInspectCommand(CLI::App& cmd) {
  auto o = std::make_shared<InspectOptions>();
  cmd.add_option("plan", o->plan, "A memory plan (gradc compile SPEC --emit plan -o plan.json), or - for stdin")
      ->required();
  cmd.add_option("--html", o->html, "Also write an interactive timeline to this HTML file (self-contained)");
  cmd.add_option("--top", o->top, "Buffers to list at the peak")->check(nonNegativeInteger())->capture_default_str();
  cmd.add_option("--width", o->width, "Chart columns")->check(integerIn(8, 400))->capture_default_str();
  cmd.add_option("--height", o->height, "Chart rows")->check(integerIn(3, 100))->capture_default_str();
  return [o] { return runInspect(*o); };
}

}  // namespace gradc::tools
