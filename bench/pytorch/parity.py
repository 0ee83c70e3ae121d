"""First-loss parity: the PyTorch models of bench/pytorch/models.py against gradc, for the same
initial weights and the same batch.

For each model at its bundled sizes:
  1. build the PyTorch model with PyTorch's default initialisation (seeded) and save its
     state_dict as W.safetensors (the keys are gradc's spec names); draw one batch, save it as
     I.safetensors (tokens/targets i64, or x/y f32);
  2. `gradc grad SPEC --weights W --inputs I -o G` gives gradc's loss and every gradient;
  3. PyTorch computes the loss and gradients of the same weights on the same batch, in every
     mode (eager, checkpoint_sequential, per-block checkpoint, unrolled LSTM);
  4. compare: loss relative error, and per gradient max|gradc - torch| / max|torch|.

gpt-mini has dropout 0.1 after the position table and no dim for it: its copy of the spec with
`p: 0` (which gradc lowers to nothing) is compared against the PyTorch model with dropout 0.
Also checked: gradc's own initial parameters (`gradc train --steps 1 --save`) have exactly
the names and shapes of the PyTorch model's state_dict.

    /usr/bin/python3 bench/pytorch/parity.py --gradc build-bench/gradc [--json out.json]

Exit status 0 when every model is within tolerance (loss 1e-5, gradients 1e-4 relative),
1 otherwise.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # keep bench/ free of __pycache__
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

LOSS_TOL = 1e-5
GRAD_TOL = 1e-4


def spec_without_dropout(src, dst):
    text = open(src).read()
    text2 = re.sub(r"\{op: dropout, p: [0-9.]+\}", "{op: dropout, p: 0}", text)
    with open(dst, "w") as f:
        f.write(text2)
    return text2 != text


def check_model(gradc, model, tmp, sets=(), seed=0, env=None):
    import torch

    import models
    import st_io

    torch.manual_seed(seed)
    overrides = dict(kv.split("=", 1) for kv in sets)
    dims = models.resolve_dims(model, overrides)
    spec = os.path.join(ROOT, "models", model + ".yaml")
    extra = {}
    if model == "gpt-mini":
        nodrop = os.path.join(tmp, "gpt-mini-nodropout.yaml")
        spec_without_dropout(spec, nodrop)
        spec = nodrop
        extra["dropout"] = 0.0
    net = models.build(model, {**dims, **extra})
    names = net.input_names()
    batch = models.make_batch(model, dims, torch.Generator().manual_seed(seed + 1))
    w = os.path.join(tmp, model + "-w.safetensors")
    i = os.path.join(tmp, model + "-i.safetensors")
    g = os.path.join(tmp, model + "-g.safetensors")
    st_io.save(w, {k: v for k, v in net.state_dict().items()})
    st_io.save(i, batch)
    cmd = [gradc, "grad", spec, "--weights", w, "--inputs", i, "-o", g]
    for kv in sets:
        cmd += ["--set", kv]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return {"model": model, "ok": False, "error": f"gradc grad exited {r.returncode}: {r.stderr.strip()[-400:]}"}
    gradc_grads, meta = st_io.load(g)
    gradc_loss = float(meta["loss"])

    result = {"model": model, "dims": dims, "spec": os.path.relpath(spec, ROOT) if spec.startswith(ROOT) else
              "models/gpt-mini.yaml with dropout p: 0", "gradc_loss": gradc_loss, "modes": {}}
    modes = ["eager", "seq", "block"] + (["unrolled"] if model == "lstm-lm" else [])
    ok = True
    for mode in modes:
        net.zero_grad(set_to_none=True)
        loss = net(batch[names[0]], batch[names[1]], mode=mode)
        loss.backward()
        tl = loss.item()
        loss_rel = abs(gradc_loss - tl) / abs(tl)
        worst, worst_name = 0.0, None
        missing = []
        for name, p in net.named_parameters():
            if name not in gradc_grads:
                missing.append(name)
                continue
            ref = p.grad
            err = (gradc_grads[name] - ref).abs().max().item() / max(ref.abs().max().item(), 1e-30)
            if err > worst:
                worst, worst_name = err, name
        extra_names = sorted(set(gradc_grads) - {n for n, _ in net.named_parameters()})
        mode_ok = loss_rel <= LOSS_TOL and worst <= GRAD_TOL and not missing and not extra_names
        ok = ok and mode_ok
        result["modes"][mode] = {
            "torch_loss": tl,
            "loss_rel_error": loss_rel,
            "worst_grad_rel_error": worst,
            "worst_grad": worst_name,
            "missing_grads": missing,
            "extra_grads": extra_names,
            "ok": mode_ok,
        }

    # gradc's own initial parameters: same names and shapes as the PyTorch model.
    ck = os.path.join(tmp, model + "-ck")
    cmd = [gradc, "train", os.path.join(ROOT, "models", model + ".yaml"), "--synthetic", "--steps", "1", "-q",
           "--save", ck, "--set", "batch=2"]
    if model != "mlp":
        cmd += ["--set", "seq=8"] if model == "lstm-lm" else []
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode == 0:
        gw, _ = st_io.load(os.path.join(ck, "weights.safetensors"))
        ref_dims = models.resolve_dims(model, {"batch": 2, **({"seq": 8} if model == "lstm-lm" else {})})
        ref = models.build(model, ref_dims).state_dict()
        same = sorted(gw) == sorted(ref) and all(list(gw[k].shape) == list(ref[k].shape) for k in ref)
        result["init_names_shapes_match"] = same
        result["init_parameters"] = len(gw)
        ok = ok and same
    else:
        result["init_names_shapes_match"] = None
        result["init_error"] = r.stderr.strip()[-300:]
    result["ok"] = ok
    return result


def run(gradc, models_list=("mlp", "gpt-mini", "lstm-lm"), env=None):
    with tempfile.TemporaryDirectory(prefix="gradc-parity-") as tmp:
        return [check_model(gradc, m, tmp, env=env) for m in models_list]


def format_table(results):
    lines = ["| model | gradc loss | PyTorch loss (eager) | loss rel. error | worst gradient rel. error | "
             "checkpointed modes: loss rel. error / worst gradient | init names and shapes |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        if "modes" not in r:
            lines.append(f"| {r['model']} | error: {r.get('error')} | | | | | |")
            continue
        e = r["modes"]["eager"]
        others = "; ".join(f"{m}: {v['loss_rel_error']:.1e} / {v['worst_grad_rel_error']:.1e}"
                           for m, v in r["modes"].items() if m != "eager")
        init = {True: "equal", False: "DIFFER", None: "not checked"}[r.get("init_names_shapes_match")]
        lines.append(f"| {r['model']} | {r['gradc_loss']:.7f} | {e['torch_loss']:.7f} | {e['loss_rel_error']:.1e} | "
                     f"{e['worst_grad_rel_error']:.1e}{' (`%s`)' % e['worst_grad'] if e['worst_grad'] else ''} | {others} | {init} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description="First-loss parity of the PyTorch benchmark models with gradc")
    ap.add_argument("--gradc", default=os.path.join(ROOT, "build-bench", "gradc"))
    ap.add_argument("--model", action="append", choices=["mlp", "gpt-mini", "lstm-lm"])
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    results = run(a.gradc, a.model or ("mlp", "gpt-mini", "lstm-lm"), env=env)
    print(format_table(results))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    bad = [r["model"] for r in results if not r.get("ok")]
    if bad:
        print("parity FAILED for: " + ", ".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
