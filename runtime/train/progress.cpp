#include "runtime/train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace gradc::runtime {

namespace {
std::string formatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  long s = std::lround(seconds);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s / 60) % 60);
  else std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  return buf;
}

std::string fixed(double value, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, value);
  return buf;
}
}  // namespace

Progress::Progress(std::int64_t firstStep, std::int64_t totalSteps, std::FILE* out)
    : firstStep_(firstStep), totalSteps_(totalSteps), out_(out), live_(::isatty(::fileno(out)) != 0) {}

Progress::~Progress() { finish(); }

void Progress::update(const StepMetrics& m) {
  elapsedS_ += m.stepTimeS;
  std::int64_t done = m.step - firstStep_ + 1;
  std::int64_t left = totalSteps_ - m.step;
  double eta = done > 0 ? elapsedS_ / static_cast<double>(done) * static_cast<double>(left) : 0;
  if (live_) {
    const int width = 24;
    double frac = totalSteps_ > 0 ? static_cast<double>(m.step) / static_cast<double>(totalSteps_) : 1;
    int filled = std::clamp(static_cast<int>(frac * width), 0, width);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.append(static_cast<size_t>(width - filled), '.');
    if (m.valLoss) lastVal_ = "  val " + fixed(*m.valLoss, 4);
    std::fprintf(out_, "\r[%s] step %lld/%lld  loss %.4f%s  %.0f %s  ETA %s   ", bar.c_str(),
                 static_cast<long long>(m.step), static_cast<long long>(totalSteps_), m.loss, lastVal_.c_str(),
                 m.tokensPerS, rateUnit_.c_str(), formatDuration(eta).c_str());
    std::fflush(out_);
    barShown_ = true;
    return;
  }
  // Plain lines: about 20 per run, plus the first and the last step.
  std::int64_t every = std::max<std::int64_t>(1, (totalSteps_ - firstStep_ + 1) / 20);
  if (m.step == firstStep_ || m.step == totalSteps_ || m.step - lastLogged_ >= every || m.valLoss) {
    const std::string val = m.valLoss ? "  val " + fixed(*m.valLoss, 4) : std::string();
    std::fprintf(out_, "step %lld/%lld  loss %.4f%s  lr %.3g  %.3f s/step  %.0f %s  ETA %s\n",
                 static_cast<long long>(m.step), static_cast<long long>(totalSteps_), m.loss, val.c_str(), m.lr,
                 m.stepTimeS, m.tokensPerS, rateUnit_.c_str(), formatDuration(eta).c_str());
    std::fflush(out_);
    lastLogged_ = m.step;
  }
}

void Progress::note(const std::string& line) {
  if (barShown_) std::fputc('\n', out_);
  barShown_ = false;
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

void Progress::finish() {
  if (barShown_) std::fputc('\n', out_);
  barShown_ = false;
  std::fflush(out_);
}

}  // namespace gradc::runtime
