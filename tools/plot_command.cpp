// gradc plot METRICS.json... -o curve.svg [--title T]
//
// Loss curves from the metrics files that gradc train and gradc-run write (--metrics-out): the
// training loss of every run against its step, the validation loss where a run recorded one
// (steps[].val_loss), and the learning rate on a second axis, several runs overlaid in one
// colour each, with a legend. The SVG is self-contained (no scripts, no external fonts or
// styles) and written atomically.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "runtime/io/atomic_file.h"
#include "runtime/core/json_text.h"
#include "tools/commands.h"
#include "tools/flag_checks.h"
#include "tools/output.h"

namespace gradc::tools {
namespace {

struct Series {
  std::vector<std::pair<double, double>> points;  // (step, value)
};

struct Run {
  std::string label;
  Series loss, valLoss, lr;
  int leftOut = 0;  // entries with a non-finite step, loss, validation loss or learning rate
};

// An axis' range over finite values. Positions are computed from halves (v/2 - lo/2), which
// never overflow, so any finite range works, from -1e308 to 1e308.
struct Range {
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return !(lo <= hi); }
  double halfSpan() const { return hi / 2 - lo / 2; }
  // A range too narrow to resolve at its magnitude (one value, or 1e16 and 1e16 + 4) is widened
  // about its values, so that the plot has a scale and the ticks a step.
  void widen() {
    const double magnitude = std::max(std::abs(lo), std::abs(hi));
    if (halfSpan() > magnitude * 1e-9) return;
    const double pad = magnitude > 0 ? magnitude / 4 : 0.5;
    lo -= pad;
    hi += pad;
  }
  // Where v lies, 0 at lo and 1 at hi.
  double fraction(double v) const { return (v / 2 - lo / 2) / halfSpan(); }
};

// A run's curves from one metrics file; an Error names the file and what is missing.
Expected<Run> readRun(const std::filesystem::path& path) {
  Expected<std::string> text = runtime::readFile(path);
  if (!text) return text.error().withContext("cannot read metrics file: ");
  const nlohmann::json j = runtime::parseJsonBounded(*text);
  if (!j.is_object() || !j.contains("steps") || !j["steps"].is_array())
    return Error{"'" + path.string() + "' is not a gradc metrics file (no \"steps\" array; write one with --metrics-out)"};
  Run run;
  run.label = path.stem().string();
  if (j.contains("model") && j["model"].is_string()) run.label += " (" + j["model"].get<std::string>() + ")";
  // A value that is not finite (NaN, an infinity, or a number JSON holds beyond a double's
  // range) is left out and counted; a missing one is simply absent.
  bool nonFinite = false;
  auto number = [&nonFinite](const nlohmann::json& e, const char* key) -> std::optional<double> {
    if (!e.contains(key)) return std::nullopt;
    if (e[key].is_null() || e[key].is_string()) {  // how NaN and infinities are written, when they are
      nonFinite = true;
      return std::nullopt;
    }
    if (!e[key].is_number()) return std::nullopt;
    const double v = e[key].get<double>();
    if (std::isfinite(v)) return v;
    nonFinite = true;
    return std::nullopt;
  };
  for (const nlohmann::json& e : j["steps"]) {
    if (!e.is_object()) continue;
    nonFinite = false;
    const std::optional<double> step = number(e, "step");
    if (step) {
      if (auto v = number(e, "loss")) run.loss.points.emplace_back(*step, *v);
      if (auto v = number(e, "val_loss")) run.valLoss.points.emplace_back(*step, *v);
      if (auto v = number(e, "lr")) run.lr.points.emplace_back(*step, *v);
    }
    run.leftOut += nonFinite;
  }
  if (run.loss.points.empty()) return Error{"'" + path.string() + "' has no steps with a finite loss"};
  return run;
}

// About `count` round tick values covering the range (1, 2 or 5 times a power of ten apart), at
// most 2 count + 2 of them whatever the values: each tick is k times the step, and the walk
// stops where k step no longer grows.
std::vector<double> ticks(const Range& range, int count) {
  if (!(range.halfSpan() > 0)) return {range.lo};
  const double raw = range.halfSpan() / count * 2;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * power >= raw) {
      step = m * power;
      break;
    }
  std::vector<double> out;
  const double first = std::ceil(range.lo / step);
  for (int k = 0; k <= 2 * count + 1; ++k) {
    const double v = (first + k) * step;
    if (!std::isfinite(v) || v > range.hi + step * 1e-9 || (!out.empty() && !(v > out.back()))) break;
    out.push_back(std::abs(v) < step * 1e-9 ? 0 : v);
  }
  return out;
}

std::string number(double v) { return fmt::format("{:.6g}", v); }

std::string escapeXml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += static_cast<unsigned char>(c) < 0x20 ? ' ' : c;
    }
  }
  return out;
}

bool anyValidation(const std::vector<Run>& runs) {
  return std::any_of(runs.begin(), runs.end(), [](const Run& r) { return !r.valLoss.points.empty(); });
}

std::string renderSvg(const std::vector<Run>& runs, const std::string& title) {
  constexpr double kWidth = 860, kHeight = 500, kLeft = 70, kRight = 70, kTop = 50, kBottom = 60;
  const double plotW = kWidth - kLeft - kRight, plotH = kHeight - kTop - kBottom;
  Range steps, losses, rates;
  for (const Run& r : runs) {
    for (const auto* s : {&r.loss, &r.valLoss})
      for (auto [x, y] : s->points) {
        steps.add(x);
        losses.add(y);
      }
    for (auto [x, y] : r.lr.points) rates.add(y);
  }
  steps.widen();
  losses.widen();
  const bool withLr = !rates.empty();
  if (withLr && rates.hi == rates.lo && rates.lo > 0) rates.lo = 0;  // a constant rate, drawn from 0
  if (withLr) rates.widen();
  auto px = [&](double step) { return kLeft + steps.fraction(step) * plotW; };
  auto py = [&](double v, const Range& r) { return kTop + (1 - r.fraction(v)) * plotH; };
  static constexpr const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
                                             "#e377c2", "#17becf"};
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
      kWidth, kHeight);
  svg += fmt::format("<text x=\"{}\" y=\"24\" font-size=\"15\" text-anchor=\"middle\">{}</text>\n", kWidth / 2,
                     escapeXml(title));
  // Axes, grid and ticks.
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#444\"/>\n", kLeft,
                     kTop, plotW, plotH);
  for (double t : ticks(steps, 8)) {
    svg += fmt::format("<line x1=\"{0:.2f}\" y1=\"{1}\" x2=\"{0:.2f}\" y2=\"{2}\" stroke=\"#ddd\"/>\n", px(t), kTop,
                       kTop + plotH);
    svg += fmt::format("<text x=\"{:.2f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", px(t), kTop + plotH + 18,
                       number(t));
  }
  for (double t : ticks(losses, 6)) {
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1:.2f}\" x2=\"{2}\" y2=\"{1:.2f}\" stroke=\"#ddd\"/>\n", kLeft, py(t, losses),
                       kLeft + plotW);
    svg += fmt::format("<text x=\"{}\" y=\"{:.2f}\" text-anchor=\"end\">{}</text>\n", kLeft - 6, py(t, losses) + 4, number(t));
  }
  if (withLr)
    for (double t : ticks(rates, 6))
      svg += fmt::format("<text x=\"{}\" y=\"{:.2f}\" fill=\"#777\">{}</text>\n", kLeft + plotW + 6, py(t, rates) + 4,
                         number(t));
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">step</text>\n", kLeft + plotW / 2, kHeight - 18);
  svg += fmt::format("<text x=\"18\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {0})\">loss</text>\n",
                     kTop + plotH / 2);
  if (withLr)
    svg += fmt::format(
        "<text x=\"{0}\" y=\"{1}\" text-anchor=\"middle\" fill=\"#777\" transform=\"rotate(90 {0} {1})\">learning "
        "rate (dotted)</text>\n",
        kWidth - 14, kTop + plotH / 2);
  // Curves: training loss solid, validation loss dashed with markers, learning rate dotted.
  auto polyline = [&](const Series& s, const Range& range, const char* colour, const char* style) {
    if (s.points.empty()) return std::string();
    std::string points;
    for (auto [x, y] : s.points) points += fmt::format("{:.2f},{:.2f} ", px(x), py(y, range));
    points.pop_back();
    // A style's own stroke-width replaces the default one.
    const bool width = std::string_view(style).find("stroke-width") != std::string_view::npos;
    return fmt::format("<polyline fill=\"none\" stroke=\"{}\"{} {} points=\"{}\"/>\n", colour,
                       width ? "" : " stroke-width=\"1.6\"", style, points);
  };
  // With validation, the noisy per-batch training curves are lightened and the validation
  // curves drawn over all of them, wider, so that they stay visible.
  const bool withVal = anyValidation(runs);
  for (size_t i = 0; i < runs.size(); ++i) {
    const char* colour = kColours[i % std::size(kColours)];
    svg += polyline(runs[i].loss, losses, colour, withVal ? "class=\"loss\" opacity=\"0.45\"" : "class=\"loss\"");
    if (withLr) svg += polyline(runs[i].lr, rates, colour, "class=\"lr\" stroke-dasharray=\"1 3\" opacity=\"0.7\"");
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    const char* colour = kColours[i % std::size(kColours)];
    svg += polyline(runs[i].valLoss, losses, colour, "class=\"val-loss\" stroke-width=\"2.6\" stroke-dasharray=\"7 3\"");
    for (auto [x, y] : runs[i].valLoss.points)
      svg += fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"3.5\" fill=\"{}\" stroke=\"white\"/>\n", px(x),
                         py(y, losses), colour);
  }
  // Legend, top right inside the plot.
  double y = kTop + 16;
  for (size_t i = 0; i < runs.size(); ++i, y += 18) {
    const char* colour = kColours[i % std::size(kColours)];
    const double x = kLeft + plotW - 330;
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{3}\" stroke-width=\"2\"/>\n", x, y - 4,
                       x + 22, colour);
    std::string label = runs[i].label + (runs[i].valLoss.points.empty() ? "" : ", dashed: validation");
    svg += fmt::format("<text class=\"legend\" x=\"{}\" y=\"{}\">{}</text>\n", x + 28, y, escapeXml(label));
  }
  svg += "</svg>\n";
  return svg;
}

struct PlotOptions {
  std::vector<std::string> metrics;
  std::string output;
  std::string title;  // default: "training loss", or "training and validation loss"
};

int runPlot(const PlotOptions& o) {
  if (std::string why = checkOutputPath("-o", o.output); !why.empty()) {
    std::cerr << "gradc: error: " << why << "\n";
    return kExitUserError;
  }
  // The chart never replaces a metrics file it reads.
  for (const std::string& path : o.metrics) {
    std::error_code ec;
    if (std::filesystem::equivalent(path, o.output, ec) && !ec) {
      std::cerr << "gradc: error: -o " << o.output << " is the metrics file " << path
                << " this plot reads; give the chart a file of its own\n";
      return kExitUserError;
    }
  }
  std::vector<Run> runs;
  for (const std::string& path : o.metrics) {
    Expected<Run> run = readRun(path);
    if (!run) {
      std::cerr << "gradc: error: " << run.error().message << "\n";
      return kExitUserError;
    }
    if (run->leftOut > 0)
      std::cerr << "gradc: note: " << path << ": " << run->leftOut << " step" << (run->leftOut == 1 ? "" : "s")
                << " with a value that is not finite (NaN or infinite) left out of the chart\n";
    runs.push_back(std::move(*run));
  }
  const std::string title = !o.title.empty()       ? o.title
                            : anyValidation(runs) ? "training and validation loss"
                                                  : "training loss";
  if (Status s = runtime::writeFileAtomic(o.output, renderSvg(runs, title)); !s) return reportWriteFailure(s);
  return kExitOk;
}

}  // namespace

Runner addPlotCommand(CLI::App& cmd) {
  auto o = std::make_shared<PlotOptions>();
  cmd.add_option("metrics", o->metrics, "Metrics files of runs (--metrics-out), overlaid in one colour each")
      ->required();
  cmd.add_option("-o,--output", o->output, "The SVG file to write")->required();
  cmd.add_option("--title", o->title,
                 "The chart's title (default: training loss, or training and validation loss when a run has one)");
  return [o] { return runPlot(*o); };
}

}  // namespace gradc::tools
