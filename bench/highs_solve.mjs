// highs_solve.mjs: solves one CPLEX-LP file with HiGHS (the `highs` npm package, HiGHS compiled
// to WebAssembly: single-threaded) and prints one JSON object, for bench/remat_ilp.py.
//
//   node bench/highs_solve.mjs MODEL.lp [--time-limit S] [--start START.json]
//                              [--values] [--log]
//
// --start F    a MIP start: a JSON object {column name: value}; columns it does not name are
//              0 in the start, names that are not columns are ignored.
// --values     also print the columns' values of the best solution (nonzero ones only).
// --log        HiGHS's log on stderr.
// Printed: status (HiGHS's model status, in words), objective (best integer solution or null),
// bound (the MIP dual bound: a proven lower bound for minimisation, or null), gap, nodes,
// wall_s, and values when asked.
// (An objective cutoff belongs in the model, as a row: HiGHS's objective_bound option stops the
// dual simplex, it is not a MIP cutoff.)
// The package is installed by `scripts/setup.sh --with-ilp-solver` into bench/.highs.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, ".highs", "package.json"));
const loadHighs = require("highs");

const args = process.argv.slice(2);
if (args.length < 1) {
  process.stderr.write("usage: node bench/highs_solve.mjs MODEL.lp [--time-limit S] [--start F] [--values] [--log]\n");
  process.exit(2);
}
const opts = { lp: args[0], timeLimit: 300, start: null, values: false, log: false };
for (let i = 1; i < args.length; ++i) {
  const a = args[i];
  if (a === "--time-limit") opts.timeLimit = Number(args[++i]);
  else if (a === "--start") opts.start = args[++i];
  else if (a === "--values") opts.values = true;
  else if (a === "--log") opts.log = true;
  else {
    process.stderr.write(`highs_solve: unknown argument ${a}\n`);
    process.exit(2);
  }
}

const toStderr = (line) => process.stderr.write(line + "\n");
const highs = await loadHighs(opts.log ? { print: toStderr, printErr: toStderr } : {});
const started = process.hrtime.bigint();
const model = highs.createModel({ format: "lp", data: readFileSync(opts.lp, "utf8") });
const statusName = Object.fromEntries(Object.entries(highs.constants.modelStatus).map(([k, v]) => [v, k]));
const finite = (x) => (typeof x === "number" && Number.isFinite(x) && Math.abs(x) < 1e30 ? x : null);
try {
  // Proven optimal means a zero gap (HiGHS stops at a relative gap of 1e-4 by default).
  const settings = { time_limit: opts.timeLimit, mip_rel_gap: 0, output_flag: opts.log };
  model.options.set(settings);
  if (opts.start) {
    // Columns the start does not name are 0 in it.
    const given = JSON.parse(readFileSync(opts.start, "utf8"));
    const colValue = new Float64Array(model.getDimensions().numCols);
    for (const [name, v] of Object.entries(given)) {
      let c = -1;
      try {
        c = model.getColByName(name);
      } catch {
        continue;  // not a column of this model
      }
      if (c >= 0) colValue[c] = v;
    }
    model.setSolution({ colValue });
  }
  model.run();
  const status = statusName[model.getModelStatus()] ?? String(model.getModelStatus());
  const info = (name) => {
    try {
      return model.info.get(name);
    } catch {
      return null;
    }
  };
  const hasSolution = info("primal_solution_status") === 2;
  const out = {
    status,
    objective: hasSolution ? finite(model.getObjectiveValue()) : null,
    bound: finite(info("mip_dual_bound")),
    gap: finite(info("mip_gap")),
    nodes: info("mip_node_count") === null ? null : Number(info("mip_node_count")),
    wall_s: Number(process.hrtime.bigint() - started) / 1e9,
  };
  if (opts.values && hasSolution) {
    const x = model.getSolution().colValue;
    const values = {};
    for (let c = 0; c < x.length; ++c) if (Math.abs(x[c]) > 1e-9) values[model.getColName(c)] = x[c];
    out.values = values;
  }
  process.stdout.write(JSON.stringify(out) + "\n");
} finally {
  model.dispose();
}
