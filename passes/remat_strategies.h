// The remat strategies on a joint (forward + backward [+ optimizer]) graph: how the graph is
// seen as a chain, what each strategy proposes, and the rewrite that makes a proposal real.
// passes/remat.h chooses among the proposals under a byte budget; this file only builds them.
//
// 1. Episodes. A joint graph is one or more episodes: a run of forward nodes and the non-
//    forward nodes after it (micro-batching gives one episode per micro-batch).
//
// 2. The chain of an episode (articulation blocks). Forward nodes are split at cut points of
//    program order: position p is a cut when no value produced before the previous cut is read
//    by a forward node after p. Each stage then reads only the values its predecessor produced
//    (its boundary a_{i-1}), parameters, inputs and prefix values: a transformer block's
//    residual stream, an LSTM step's (h, c), an MLP layer's output. Two exceptions make real
//    models chains: a prefix (nodes whose results any stage may read, always kept, e.g. the
//    LSTM's input projection and its unbind into time steps) and a tail (the last nodes, which
//    may read any stage, e.g. the LSTM's stack of all h_t; the solver always stores it). The
//    prefix end is tried among the first 8 cuts and the tail start among the last 8 nodes;
//    the choice with the most stages wins: O(81 F) for F forward nodes. A stage the backward
//    reads nothing from joins the next one (an MLP's linear joins its relu). Chains longer
//    than kMaxSolverStages are grouped (chain::groupStages).
//    Per stage, for chain::Stage: f = FLOPs of its nodes; x, s = bytes of its boundary and of
//    abar (the values backward nodes read from it, plus its boundary), counted by buffer
//    (views share their source's, OpInfo::view); g, b = from its backward window (the
//    backward nodes labelled with the stage, see BackwardUse): results that outlive the next
//    window, and the largest short-lived result plus workspace of one node. E = the buffers
//    of prefix values the stages read that no backward node reads.
//
// 3. Proposals (Candidate: one plan per episode):
//      none        keep everything (no recompute);
//      sqrt        chain::sqrtSchedule with round(sqrt(stages before grouping)) segments;
//      chain       the Pareto frontier of chain::Solver, thinned to at most
//                  kMaxChainCandidates levels spread evenly in memory, plus the sqrt
//                  and memory-poor schedules of the same chain (the solver is exact for the
//                  model; measuring the classic schedules beside it keeps chain from ever
//                  doing worse than them where the model and the graph's liveness differ);
//                  on chains of at most kExhaustiveStages stages (graphs of at most
//                  kExhaustiveMaxNodes nodes), also every segment
//                  schedule (chain::segmentSchedule: each group of stages either stored or
//                  recomputed once from the boundary before it; at most 3^(n-1) of them),
//                  and (up to kPrefixMemoryPoorStages stages) every memory-poor prefix with
//                  the rest stored, with or without one checkpoint inside the prefix that
//                  the stages after it recompute from, or (without one) with every other
//                  stage after the prefix recomputed once for the stored stage after it
//                  (chain::prefixMemoryPoorSchedule: O(n^2) proposals; the 8-layer MLP's
//                  optimum at its tightest budget), since the solver's model of memory
//                  misses what the scheduled liveness finds (bench/remat_ilp.py: 1.34x and
//                  1.78x the exact optimum on a 4-layer MLP before, equal after); and the
//                  k-segment schedules (chain::sqrtSchedule with k segments, what
//                  torch.utils.checkpoint.checkpoint_sequential runs) for every k up to
//                  kEverySegmentCount and about 25% apart beyond, on graphs of at most
//                  kExhaustiveMaxNodes nodes (bench/results/planner.md:
//                  on gpt-mini at 81-85 MiB the frontier alone needed up to 1.76x the
//                  recompute of one of them);
//      memory-poor chain::memoryPoorSchedule over at most kMemoryPoorSegments segments of the
//                  (grouped) stages: O(1) segments of activations, about k^2/2 segment
//                  forwards of recompute for k segments;
//      selective   drop every value a backward node reads whose producer is cheap (at most
//                  kCheapFlopsPerElement FLOPs per result element: elementwise ops, softmax,
//                  layer norm, views, dropout, embedding lookups), except stage boundaries;
//                  keep the rest (matmul/linear outputs);
//                  and, under auto only, "free" recompute (Episode::freeDrop): drop every
//                  cheap value, the prefix's and boundaries included, whose operands the
//                  backward holds anyway (parameters, inputs, values backward nodes read, or
//                  values dropped the same way), so recomputing it keeps alive little the
//                  backward would not keep anyway: an embedding lookup, a zero state, a stack of a recurrence's outputs,
//                  a layer norm of a residual stream (bench/remat_ilp.py: what the exact
//                  optimum recomputes on a 2-layer GPT and an 8-step LSTM), at each of
//                  kFreeTiers, of any depth or of depth 1 only, and at the last tier only
//                  the values made in the first 1/4, 2/4 or 3/4 of the forward
//                  (Episode::freeDrop); on graphs
//                  of at most kExhaustiveMaxNodes nodes, alone and inside the stored stages of
//                  the chain solver's frontier; and, when the caller gives the step facts to
//                  measure on (a budget to meet), free values chosen one by one where the
//                  scheduled step peaks (passes/remat_free_path.h: the exact optimum's subsets,
//                  which no tier expresses);
//      auto        all of the above.
//
// 4. The rewrite (planRewrite, then applyRewrite). Walking each episode's backward nodes in
//    program order, a schedule is interpreted: its first pass says which originals backward
//    may read (abar_i of stored stages, checkpointed boundaries); before the first backward
//    node of stage t, the schedule's forwards up to Backward(t) run as clones of the stage's
//    forward nodes (phase recompute, same op, attributes and spec name, so dropout redraws
//    the same mask from its rng key and results are bit-identical), and backward uses are
//    rewired to the newest copy. Copies of a stage are forgotten after its backward, so their
//    buffers die before the next stage is recomputed. A value no plan provides (a backward
//    node reading a stage out of order) is recomputed on demand from the nearest available
//    values: the rewrite is correct for any graph, a mismatch only costs FLOPs. Selective
//    plans recompute on demand only. Clones nobody reads are dropped.
//    planRewrite is pure (it lists the clones and rewirings and their exact FLOPs without
//    touching the graph); applyRewrite inserts the clones before their first reader and
//    rewires in O(nodes + clones) (one reorder); undoRewrite restores the graph exactly (same
//    nodes, same order), so proposals can be measured one after another with
//    passes::analyzeLiveness.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/graph.h"
#include "passes/remat_chain.h"
#include "passes/memory/rewrite_plan.h"

namespace gradc::passes {

class StepFacts;

enum class RematStrategy { None, Sqrt, Chain, MemoryPoor, Selective, Auto };

std::string_view rematStrategyName(RematStrategy strategy);  // "none", "memory-poor", ...
// Case-insensitive; an Error lists the names.
Expected<RematStrategy> parseRematStrategy(std::string_view name);
// Every strategy but Auto, in the order tables list them.
std::vector<RematStrategy> concreteRematStrategies();

namespace remat {

inline constexpr int kMaxSolverStages = 64;
inline constexpr int kSolverLevels = 1024;
inline constexpr int kMaxChainCandidates = 40;
inline constexpr int kExhaustiveStages = 7;  // chains up to this long: every segmentation too
inline constexpr int kPrefixMemoryPoorStages = 16;  // ... and memory-poor prefixes up to this long
inline constexpr size_t kExhaustiveMaxNodes = 4000;  // ... in graphs up to this size (measuring ~10^3 of them)
inline constexpr int kMemoryPoorSegments = 32;
inline constexpr int kEverySegmentCount = 16;  // k-segment proposals: every k up to this, then ~25% apart
inline constexpr std::int64_t kCheapFlopsPerElement = 10;
// Free recompute's proposals: the values of tiers up to each of these (FLOPs per element).
inline constexpr std::int64_t kFreeTiers[] = {0, 1, 2, 5, kCheapFlopsPerElement};

// One (possibly grouped) stage of an episode's chain.
struct GraphStage {
  std::vector<const ir::Node*> nodes;          // forward nodes, program order
  std::vector<const ir::Value*> boundary;      // a_i: read by the next stage
  std::vector<const ir::Value*> stored;        // abar_i: read by backward nodes, plus a_i
  std::vector<const ir::Node*> boundaryNodes;  // what a boundary-only forward runs
  std::vector<const ir::Node*> storedNodes;    // what a full forward runs
};

// A non-forward node that reads forward values of its episode's stages, and the stage whose
// backward it belongs to. The backward of stage t reads abar_t and a_{t-1}, so a node reading
// stage s values may belong to s, or to s + 1 when all it reads from s is s's boundary; of
// what its operands allow, the label is the latest stage not after the previous node's
// (stages are back-propagated last to first). A node that fits nowhere (it reads stages out
// of order) gets the latest stage it reads.
struct BackwardUse {
  ir::Node* node;
  size_t position;  // in program order
  int label;
  std::vector<unsigned> operands;  // operand indices that read stage values
};

struct Episode {
  size_t forwardBegin = 0, forwardEnd = 0, end = 0;  // node positions
  int prefixNodes = 0;  // leading forward nodes outside the chain (always kept)
  int tailNodes = 0;    // trailing forward nodes that form the last stage
  int rawStages = 0;    // stages before grouping
  std::vector<GraphStage> stages;
  std::vector<chain::Stage> model;
  // Buffers of prefix values the stages read that nothing in the backward reads (the LSTM's
  // input projection): recomputing any stage keeps them alive (chain::External).
  chain::External external;
  std::vector<BackwardUse> uses;
  std::unordered_set<const ir::Value*> selectiveDrop;
  // Cheap values recomputed only from what the backward holds anyway (see "free" recompute
  // above): forward results of the episode, prefix values included, that are not pinned, whose
  // producer is cheap and each of whose operands is a parameter, an input, a value a
  // non-forward node reads, or itself in freeDrop. Each with its tier: the most FLOPs per
  // result element that recomputing it (and the freeDrop operands it needs) costs per node,
  // so a plan can drop only the values of tiers up to one of kFreeTiers; and its depth: 1 when
  // every operand is held anyway, else 1 + its deepest freeDrop operand's (a plan may drop only
  // depth 1: values recomputed by one node from what is held, the held ones kept as they are).
  // And its position: the latest forward position (in the episode) of a node its recompute
  // runs; values made early live longest, so dropping only those saves most per FLOP.
  // readByBackward: a non-forward node reads it (else dropping it alone changes nothing).
  // index: dense, 0..freeDrop.size()-1 in program order (EpisodePlan::freeChosen).
  struct FreeValue {
    std::int64_t tier = 0;
    int depth = 1;
    int position = 0;
    bool readByBackward = false;
    int index = -1;
  };
  std::unordered_map<const ir::Value*, FreeValue> freeDrop;
  // `uses` with the operands that read prefix values in freeDrop added (and the backward nodes
  // that read only those); the labels are those of `uses`. The rewrite walks these for plans
  // that drop freeDrop values.
  std::vector<BackwardUse> freeUses;
  // Forward nodes of the tail reading freeDrop values made before it (the LSTM's stack of every
  // h_t), labelled with the last stage. Plans of the free-recompute path (EpisodePlan::
  // freeChosen) recompute those values for them too, so an original dies after its last reader
  // before the tail instead of living through the rest of the forward.
  std::vector<BackwardUse> freeTailUses;
  // `model` with each stage's stored bytes less its freeDrop values'.
  std::vector<chain::Stage> freeModel;
  // `model` with each stage's stored bytes less its selectiveDrop values': the chain the
  // solver plans when stored stages also recompute their cheap values (EpisodePlan::selectiveInside).
  std::vector<chain::Stage> selectiveModel;
};

struct ValueInfo {
  int episode;
  int stage;  // -1: a prefix value (in the table only when it is in its episode's freeDrop)
  int id;  // dense, 0..values.size()-1
};

// ValueInfo by value, an array indexed by the analysed graph's value ids (ir::Value::id()):
// the rewrite planner looks values up once per operand of every node it walks.
class ValueTable {
 public:
  // The value's info, or nullptr when it is not in the table.
  const ValueInfo* find(const ir::Value* v) const {
    const size_t id = v->id();
    if (id >= slot_.size() || slot_[id] < 0) return nullptr;
    const Entry& e = entries_[static_cast<size_t>(slot_[id])];
    return e.value == v ? &e.info : nullptr;
  }
  bool count(const ir::Value* v) const { return find(v) != nullptr; }
  // Adds v (info.id is set to its dense number) unless present.
  void add(const ir::Value* v, int episode, int stage) {
    if (find(v)) return;
    if (v->id() >= slot_.size()) slot_.resize(v->id() + 1, -1);
    slot_[v->id()] = static_cast<int>(entries_.size());
    entries_.push_back(Entry{v, ValueInfo{episode, stage, static_cast<int>(entries_.size())}});
  }
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    const ir::Value* value;
    ValueInfo info;
  };
  std::vector<int> slot_;
  std::vector<Entry> entries_;
};

struct Analysis {
  std::vector<Episode> episodes;
  // Forward results that may be dropped (stage values that are not graph outputs).
  ValueTable values;
  std::vector<std::int64_t> flops;  // by node id: a forward node's FLOPs (0 for the others)
  std::int64_t flopsOf(const ir::Node* n) const { return flops[n->id()]; }
  std::int64_t forwardFlops = 0;
  size_t numNodes = 0;
  // A ZeRO stage 3 graph whose gathers start one group ahead (passes/shard_params.h): the
  // gathers a plan adds for its recomputed nodes do too.
  bool prefetchGathers = false;
};

// Fails on graphs that already hold recompute nodes (remat runs once).
Expected<Analysis> analyze(ir::Graph& graph);

struct EpisodePlan {
  // Free: recompute the episode's freeDrop values of tiers up to freeTier where the backward
  // reads them, keep the rest.
  enum class Kind { Keep, Schedule, Selective, Free };
  Kind kind = Kind::Keep;
  chain::Schedule schedule;
  // Schedule only: the stages the schedule stores keep their matmul outputs and boundaries and
  // recompute their cheap values (Episode::selectiveDrop) in their own backward, as selective
  // does for the whole chain: recompute inside a block rather than of the whole block.
  bool selectiveInside = false;
  // Schedule only, the same with the episode's freeDrop values instead of its selectiveDrop
  // values (prefix values included: recomputed where the first stage's backward or a
  // recomputed stage reads them).
  bool freeInside = false;
  std::int64_t freeTier = kCheapFlopsPerElement;  // Free and freeInside: the tiers dropped
  int freeDepth = 0;  // ... and the depths (0: any)
  int freeBefore = 0;  // ... and the positions below this (0: any)
  // Free only: when set, exactly the freeDrop values whose FreeValue::index is marked here are
  // dropped, the tiers, depths and positions above ignored (passes/remat_free_path.h chooses
  // them one by one). Shared by the copies of a plan.
  std::shared_ptr<const std::vector<char>> freeChosen;
  // Whether this plan (Free or freeInside) drops a freeDrop value.
  bool dropsFree(const Episode::FreeValue& f) const {
    if (freeChosen) return f.index >= 0 && static_cast<size_t>(f.index) < freeChosen->size() && (*freeChosen)[static_cast<size_t>(f.index)];
    return f.tier <= freeTier && (freeDepth == 0 || f.depth <= freeDepth) && (freeBefore == 0 || f.position < freeBefore);
  }
};

struct Candidate {
  RematStrategy strategy = RematStrategy::None;
  std::string description;  // "chain: level 37/512 (12 stages)"
  std::vector<EpisodePlan> episodes;
};

// The proposals of a strategy (Auto: of every strategy), in a fixed order, without the
// free-recompute path (candidatesWithFreePath in passes/remat_free_path.h adds it).
std::vector<Candidate> candidates(const Analysis& analysis, RematStrategy strategy);

// Whether recomputing the cheap (free) values can pay on this graph at all: auto proposes the
// free plans and the free-recompute path only then.
bool freeRecomputePays(const Analysis& analysis);

// torch.utils.checkpoint.checkpoint_sequential's plan with `segments` segments: the chain's
// stages cut into that many groups, each group's input kept and every group but the last
// recomputed once in the backward (what sqrt does with sqrt(n) segments). For comparisons
// (bench/remat_curve.cpp); the planner's own proposals come from candidates().
Candidate segmentsCandidate(const Analysis& analysis, int segments);

RewritePlan planRewrite(const Analysis& analysis, const Candidate& candidate);

// Under ZeRO stage 3 (passes/shard_params.h), the parameters a recomputed node reads: a clone
// that would read the views of a forward all_gather_wait whose bucket is gathered again for the
// backward (the wait is not `kept`) reads a fresh gather instead
// -- clones of the forward's all_gather_start and all_gather_wait, right before the first clone
// reading it among those at one position (one recompute), shared by the others there. So the
// forward's gathered buffer still dies after its last forward use, and the regathered one
// after the recompute. With `prefetch`, a regather's start goes right after the previous
// regather's wait at the same position (one group ahead, as the forward's). A kept bucket's
// views are read as they are. planRewrite calls it last; the clone order stays a valid program
// order, the operands stay contiguous in clone order, FLOPs are unchanged.
void regatherForRecompute(RewritePlan& plan, bool prefetch);

struct AppliedRewrite {
  std::vector<std::pair<Rewire, ir::Value*>> rewired;  // with the operand it replaced
  size_t clones = 0;
  // The collectives renumbered because clones issue collectives (regathers), with their seq before.
  std::vector<std::pair<ir::Node*, std::int64_t>> renumbered;
};
AppliedRewrite applyRewrite(ir::Graph& graph, const RewritePlan& plan);
void undoRewrite(ir::Graph& graph, const AppliedRewrite& applied);

// A deep copy (same names, attributes, phases, spec names and order).
ir::Graph cloneGraph(const ir::Graph& graph);

}  // namespace remat
}  // namespace gradc::passes
