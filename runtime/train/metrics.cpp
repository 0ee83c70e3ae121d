#include "runtime/train/metrics.h"

#include <nlohmann/json.hpp>

#include "runtime/io/atomic_file.h"

namespace gradc::runtime {

std::string metricsToJson(const RunMetrics& m) {
  nlohmann::ordered_json j;
  j["model"] = m.model;
  if (m.intraOpThreads > 0) j["intra_op_threads"] = m.intraOpThreads;
  if (!m.blas.library.empty())
    j["blas"] = {{"library", m.blas.library}, {"core", m.blas.core}, {"source", m.blas.source}};
  j["steps"] = nlohmann::ordered_json::array();
  for (const StepMetrics& s : m.steps) {
    nlohmann::ordered_json e;
    e["step"] = s.step;
    e["loss"] = s.loss;
    e["step_time_s"] = s.stepTimeS;
    e["tokens_per_s"] = s.tokensPerS;
    e["minor_faults"] = s.minorFaults;
    e["lr"] = s.lr;
    if (s.gradNorm) e["grad_norm"] = *s.gradNorm;
    if (s.valLoss) e["val_loss"] = *s.valLoss;
    j["steps"].push_back(std::move(e));
  }
  j["ranks"] = nlohmann::ordered_json::array();
  for (const RankMetrics& r : m.ranks) {
    nlohmann::ordered_json e;
    e["rank"] = r.rank;
    e["peak_bytes_measured"] = r.peakBytesMeasured;
    e["peak_bytes_planned"] = r.peakBytesPlanned ? nlohmann::ordered_json(*r.peakBytesPlanned) : nullptr;
    if (r.commWaitS) e["comm_wait_s"] = *r.commWaitS;
    if (r.evalPeakBytesMeasured) e["eval_peak_bytes_measured"] = *r.evalPeakBytesMeasured;
    if (r.evalPeakBytesPlanned) e["eval_peak_bytes_planned"] = *r.evalPeakBytesPlanned;
    if (r.peakStep)
      e["peak_step"] = {{"step", r.peakStep->step},   {"op", r.peakStep->op},
                        {"name", r.peakStep->name},   {"bytes", r.peakStep->bytes},
                        {"workspace", r.peakStep->workspace}};
    for (const BeyondPlan& b : r.beyondPlan)
      e["beyond_plan"].push_back(
          {{"step", b.step}, {"op", b.op}, {"name", b.name}, {"bytes", b.bytes}, {"workspace", b.workspace}});
    j["ranks"].push_back(std::move(e));
  }
  return j.dump(2) + "\n";
}

Status writeMetrics(const std::string& path, const RunMetrics& metrics) {
  return writeFileAtomic(path, metricsToJson(metrics));
}

}  // namespace gradc::runtime
