"""Edits the plan of a compiled artifact as a hostile user would, then reseals the artifact (the
plan's sha256 and the manifest's own checksum recomputed), so that only the runtime's own checks
of the plan stand between the edit and a run.

usage: edit_artifact_plan.py ARTIFACT_DIR overlap|param-overlap|early-free|overflow
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reseal_artifact import reseal  # noqa: E402

art, mode = sys.argv[1], sys.argv[2]
manifest_path = os.path.join(art, "manifest.json")
manifest = open(manifest_path).read()
plan_file = json.loads(manifest)["ranks"][0]["plan"]
plan_path = os.path.join(art, plan_file)
plan = json.load(open(plan_path))
bufs = plan["buffers"]
acts = [b for b in bufs if b["kind"] not in ("param", "opt_state", "input", "workspace") and b["size"] > 0]

if mode == "overlap":  # two activations alive together, at one offset
    a, b = next((a, b) for a in acts for b in acts
                if a is not b and a["first_step"] <= b["last_step"] and b["first_step"] <= a["last_step"]
                and a["offset"] != b["offset"] and a["offset"] + b["size"] <= plan["arena_bytes"])
    b["offset"] = a["offset"]
elif mode == "param-overlap":  # two parameters at one offset
    params = [b for b in bufs if b["kind"] == "param"]
    params[1]["offset"] = params[0]["offset"]
    params[1]["size"] = min(params[1]["size"], plan["arena_bytes"] - params[0]["offset"])
elif mode == "early-free":  # an activation freed at its first step, though read later
    a = next(a for a in acts if a["last_step"] > a["first_step"] + 1)
    a["last_step"] = a["first_step"]
elif mode == "overflow":  # offset + size past 2^63
    acts[0]["offset"] = 2**63 - 64
else:
    sys.exit("unknown mode " + mode)

open(plan_path, "w").write(json.dumps(plan, indent=2))
reseal(art)
