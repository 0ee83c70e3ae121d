// The HTML view of a memory plan (`gradc inspect plan.json --html out.html`): one
// self-contained page, no network access -- inline SVG drawn by inline JavaScript from the plan
// embedded as JSON. The memory timeline shows every buffer as a band over the steps it is alive;
// two layouts: stacked (at each step the live buffers stacked in allocation order, so the top
// edge is the live-bytes line) and arena (each buffer at its planned offset). Hovering a band
// names the buffer (name, spec name, kind, type, size, steps, producer, offset); hovering
// elsewhere names the step. The live-bytes line, the peak and the budget (if any) are drawn
// over the bands; a table lists the buffers alive at the peak.
#pragma once

#include <string>

#include "passes/memory/memory_plan.h"

namespace gradc::tools {

std::string planToHtml(const passes::MemoryPlan& plan);

}  // namespace gradc::tools
