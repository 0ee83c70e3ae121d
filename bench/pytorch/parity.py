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
    /usr/bin/python3 bench/pytorch/parity.py --gradc build/gradc --model nanogpt-char [--set layers=6 ...]

For nanogpt-char also the initial distributions: gradc's initial parameters (a step at lr 1e-30,
which moves no f32 weight) against the PyTorch twin's, tensor by tensor: the same constants
(layer-norm ones) and standard deviations within 10% (the sampling error of the smallest matrix,
65 x 128, is about 1%), so the twin starts where gradc does (nanoGPT's N(0, 0.02) and
N(0, 0.02 / sqrt(2 * layers)) for the residual projections).

For the ResNets also evaluation mode with state: the weights `gradc train --steps 1 --save`
wrote (running statistics updated once) load into the PyTorch model, whose eval() loss on a
generated image file must equal `gradc eval`'s (1e-5 relative).

The ResNets' gradients are compared in f64 (a copy of the spec with `dtype: f64`, the PyTorch
model in double), tolerance 1e-10: in f32 their gradients at initialisation are ill-conditioned
(a ReLU input within rounding of 0 takes the other branch, and batch norm's backward cancels
large sums), so PyTorch's own f32 gradients differ from its f64 ones by up to 1e-2 on some seeds,
as gradc's do; the f32 loss is compared as for every model.

Exit status 0 when every model is within tolerance (loss 1e-5, gradients 1e-4 relative),
1 otherwise.
"""
import argparse
import copy
import json
import math
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


# Models too large to differentiate here at their bundled sizes: the dims compared instead
# (gpt2 keeps its 50257-token vocabulary and 1024-row position table).
PARITY_SETS = {"gpt2": ("batch=2", "seq=64", "d_model=128", "heads=4", "layers=2"),
               # Real channel widths, smaller images and batches (2 cores).
               "resnet18-cifar": ("batch=4", "image=16"),
               "resnet-deep": ("batch=4", "image=16", "depth=29")}
# Models whose gradients are compared in f64 (see the docstring), with this tolerance.
GRADS_IN_F64 = ("resnet18-cifar", "resnet-deep")
GRAD_TOL_F64 = 1e-10
# Models with dropout: compared with every dropout at p 0.
WITH_DROPOUT = ("gpt-mini", "gpt2", "bert-mlm")
# Models whose initial distributions are compared with gradc's (init_statistics), and the
# largest relative difference of a tensor's standard deviation allowed.
INIT_STATS = ("nanogpt-char",)
INIT_STD_TOL = 0.1


def spec_without_dropout(src, dst):
    text = open(src).read()
    text2 = re.sub(r"\{op: dropout, p: [0-9.]+\}", "{op: dropout, p: 0}", text)
    text2 = re.sub(r"(op: attention,[^}]*)dropout: [0-9.]+", r"\1dropout: 0", text2)
    with open(dst, "w") as f:
        f.write(text2)
    return text2 != text


def gpt2_loss_in_hf_layout(hf, tokens, targets, heads, layers):
    """The loss of GPT2LMHeadModel's computation (Conv1D: y = x @ W + b, tanh GELU, tied head),
    written against the Hugging Face names: checks scripts/gpt2_to_hf.py's mapping, transposes
    included, on gradc's own weights without needing the transformers package."""
    import torch
    import torch.nn.functional as F

    def ln(x, p):
        return F.layer_norm(x, x.shape[-1:], hf[p + ".weight"], hf[p + ".bias"], 1e-5)

    def conv1d(x, p):
        return x @ hf[p + ".weight"] + hf[p + ".bias"]

    B, S = tokens.shape
    x = hf["transformer.wte.weight"][tokens] + hf["transformer.wpe.weight"][:S]
    D = x.shape[-1]
    for n in range(layers):
        h = f"transformer.h.{n}"
        q, k, v = conv1d(ln(x, h + ".ln_1"), h + ".attn.c_attn").split(D, dim=2)
        q, k, v = (t.reshape(B, S, heads, D // heads).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(2, 3)) / math.sqrt(D // heads)
        scores = scores.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
        a = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, S, D)
        x = x + conv1d(a, h + ".attn.c_proj")
        m = F.gelu(conv1d(ln(x, h + ".ln_2"), h + ".mlp.c_fc"), approximate="tanh")
        x = x + conv1d(m, h + ".mlp.c_proj")
    logits = ln(x, "transformer.ln_f") @ hf["lm_head.weight"].t()
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)).item()


def check_model(gradc, model, tmp, sets=None, seed=0, env=None):
    import torch

    import models
    import st_io

    torch.manual_seed(seed)
    sets = PARITY_SETS.get(model, ()) if sets is None else sets
    overrides = dict(kv.split("=", 1) for kv in sets)
    dims = models.resolve_dims(model, overrides)
    spec = os.path.join(ROOT, "models", model + ".yaml")
    extra = {}
    if model in WITH_DROPOUT:
        nodrop = os.path.join(tmp, model + "-nodropout.yaml")
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
    grad_tol = GRAD_TOL
    grad_net = net
    if model in GRADS_IN_F64:
        spec64 = os.path.join(tmp, model + "-f64.yaml")
        with open(spec) as f, open(spec64, "w") as out:
            out.write(re.sub(r"dtype: f32", "dtype: f64", f.read()))
        grad_net = copy.deepcopy(net).double()
        batch64 = {k: (v.double() if v.is_floating_point() else v) for k, v in batch.items()}
        st_io.save(w, {k: (v.double() if v.is_floating_point() else v) for k, v in grad_net.state_dict().items()})
        st_io.save(i, batch64)
        r = subprocess.run([gradc, "grad", spec64] + cmd[3:], capture_output=True, text=True, env=env)
        if r.returncode != 0:
            return {"model": model, "ok": False, "error": f"gradc grad (f64) exited {r.returncode}: {r.stderr.strip()[-400:]}"}
        gradc_grads, _ = st_io.load(g)
        grad_tol = GRAD_TOL_F64

    result = {"model": model, "dims": dims, "spec": os.path.relpath(spec, ROOT) if spec.startswith(ROOT) else
              f"models/{model}.yaml with dropout p: 0", "gradc_loss": gradc_loss, "modes": {},
              "gradients_dtype": "f64" if grad_net is not net else "f32"}
    modes = ["eager", "seq", "block"] + (["unrolled"] if model == "lstm-lm" else [])
    ok = True
    for mode in modes:
        net.zero_grad(set_to_none=True)
        loss = net(*(batch[n] for n in names), mode=mode)
        tl = loss.item()
        if grad_net is net:
            loss.backward()
        else:
            grad_net.zero_grad(set_to_none=True)
            grad_net(*(batch64[n] for n in names), mode=mode).backward()
        loss_rel = abs(gradc_loss - tl) / abs(tl)
        worst, worst_name = 0.0, None
        missing = []
        for name, p in grad_net.named_parameters():
            if name not in gradc_grads:
                missing.append(name)
                continue
            ref = p.grad
            err = (gradc_grads[name] - ref).abs().max().item() / max(ref.abs().max().item(), 1e-30)
            if err > worst:
                worst, worst_name = err, name
        extra_names = sorted(set(gradc_grads) - {n for n, _ in net.named_parameters()})
        mode_ok = loss_rel <= LOSS_TOL and worst <= grad_tol and not missing and not extra_names
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

    if model == "gpt2":
        sys.path.insert(0, os.path.join(ROOT, "scripts"))
        import gpt2_to_hf

        with torch.no_grad():
            hf_loss = gpt2_loss_in_hf_layout(gpt2_to_hf.to_hf(net.state_dict()), batch["tokens"], batch["targets"],
                                             dims["heads"], dims["layers"])
        rel = abs(hf_loss - gradc_loss) / abs(gradc_loss)
        result["hf_layout_loss_rel_error"] = rel
        ok = ok and rel <= LOSS_TOL

    # gradc's own initial parameters: same names and shapes as the PyTorch model.
    ck = os.path.join(tmp, model + "-ck")
    init_sets = dict(overrides, batch="2", **({"seq": "8"} if model == "lstm-lm" else {}))
    cmd = [gradc, "train", os.path.join(ROOT, "models", model + ".yaml"), "--synthetic", "--steps", "1", "-q",
           "--save", ck]
    for k, v in init_sets.items():
        cmd += ["--set", f"{k}={v}"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode == 0:
        gw, _ = st_io.load(os.path.join(ck, "weights.safetensors"))
        ref_dims = models.resolve_dims(model, init_sets)
        ref = models.build(model, ref_dims).state_dict()
        same = sorted(gw) == sorted(ref) and all(list(gw[k].shape) == list(ref[k].shape) for k in ref)
        result["init_names_shapes_match"] = same
        result["init_parameters"] = len(gw)
        ok = ok and same
        if model in GRADS_IN_F64 and same:
            rel = eval_mode_parity(gradc, model, ck, init_sets, tmp, env)
            result["eval_mode_loss_rel_error"] = rel
            ok = ok and rel is not None and rel <= LOSS_TOL
    else:
        result["init_names_shapes_match"] = None
        result["init_error"] = r.stderr.strip()[-300:]
    if model in INIT_STATS:
        stats = init_statistics(gradc, model, init_sets, tmp, env)
        result["init_statistics"] = stats
        ok = ok and stats.get("ok", False)
    result["ok"] = ok
    return result


def init_statistics(gradc, model, sets, tmp, env):
    """gradc's initial parameters against the PyTorch model's freshly built ones, per tensor: a
    constant tensor (layer-norm ones) must be the same constant on both sides; a random one must
    have a mean within 5 standard errors of 0 on both sides and standard deviations within
    INIT_STD_TOL of each other. gradc's initial weights are saved after one step at lr 1e-30
    without weight decay: the AdamW update (about 1e-30) rounds away in f32, so they are the
    initial values exactly."""
    import torch

    import models
    import st_io

    ck = os.path.join(tmp, model + "-init")
    cmd = [gradc, "train", os.path.join(ROOT, "models", model + ".yaml"), "--synthetic", "--steps", "1", "-q",
           "--lr", "1e-30", "--weight-decay", "0", "--save", ck]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return {"ok": False, "error": r.stderr.strip()[-300:]}
    gw, _ = st_io.load(os.path.join(ck, "weights.safetensors"))
    ref = models.build(model, models.resolve_dims(model, sets)).state_dict()
    worst, worst_name, bad = 0.0, None, []
    for name, t in ref.items():
        g = gw.get(name)
        if g is None or g.shape != t.shape:
            bad.append(f"{name}: missing or mis-shaped")
            continue
        g, t = g.double(), t.double()
        if t.std().item() == 0 or g.std().item() == 0:
            if not torch.equal(g, t):
                bad.append(f"{name}: constant on one side, and not equal")
            continue
        rel = abs(g.std().item() - t.std().item()) / t.std().item()
        if rel > worst:
            worst, worst_name = rel, name
        for side, x in (("gradc", g), ("torch", t)):
            if abs(x.mean().item()) > 5 * x.std().item() / math.sqrt(x.numel()):
                bad.append(f"{name}: {side} mean {x.mean().item():.3g} is not about 0")
        if rel > INIT_STD_TOL:
            bad.append(f"{name}: std {g.std().item():.5g} (gradc) vs {t.std().item():.5g} (torch)")
    return {"ok": not bad, "worst_std_rel_diff": worst, "worst_std_tensor": worst_name, "problems": bad}


def eval_mode_parity(gradc, model, ck, sets, tmp, env):
    """Evaluation mode with state: the weights gradc saved after a step (running statistics
    moved once) loaded into the PyTorch model in eval() mode, against `gradc eval` on the same
    images; the relative difference of the mean losses, or None when a side failed."""
    import torch

    import models
    import st_io

    dims = models.resolve_dims(model, sets)
    data = os.path.join(tmp, model + "-eval.safetensors")
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make_image_data.py"), data, "--count",
                    str(2 * dims["batch"]), "--size", str(dims["image"]), "--channels", str(dims["channels"]),
                    "--classes", str(dims["classes"])], check=True)
    cmd = [gradc, "eval", os.path.join(ROOT, "models", model + ".yaml"), "--weights", ck, "--data", data]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return None
    gradc_loss = float(r.stdout.split()[1].rstrip(","))
    weights, _ = st_io.load(os.path.join(ck, "weights.safetensors"))
    net = models.build(model, dims)
    net.load_state_dict(weights)
    net.eval()
    images, _ = st_io.load(data)
    b = dims["batch"]
    with torch.no_grad():
        losses = [net(images["images"][i:i + b], images["labels"][i:i + b]).item() for i in range(0, 2 * b, b)]
    torch_loss = sum(losses) / len(losses)
    return abs(gradc_loss - torch_loss) / abs(torch_loss)


ALL_MODELS = ("mlp", "gpt-mini", "lstm-lm", "gpt2", "llama", "bert-mlm", "resnet18-cifar", "resnet-deep",
              "nanogpt-char")


def run(gradc, models_list=ALL_MODELS, env=None):
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
        st = r.get("init_statistics")
        if st:
            init += (f"; initial std within {st['worst_std_rel_diff']:.1%} (`{st['worst_std_tensor']}`)" if st["ok"]
                     else "; initial distributions DIFFER: " + "; ".join(st.get("problems") or [st.get("error", "?")]))
        lines.append(f"| {r['model']} | {r['gradc_loss']:.7f} | {e['torch_loss']:.7f} | {e['loss_rel_error']:.1e} | "
                     f"{e['worst_grad_rel_error']:.1e}{' (`%s`)' % e['worst_grad'] if e['worst_grad'] else ''} | {others} | {init} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description="First-loss parity of the PyTorch benchmark models with gradc")
    ap.add_argument("--gradc", default=os.path.join(ROOT, "build-bench", "gradc"))
    ap.add_argument("--model", action="append", choices=list(ALL_MODELS))
    ap.add_argument("--set", action="append", metavar="NAME=EXPR",
                    help="dims for the --model(s) named, as gradc --set (instead of the models' parity sizes)")
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()
    if a.set and not a.model:
        ap.error("--set needs --model")
    import torch

    torch.set_num_threads(1)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if a.set:
        with tempfile.TemporaryDirectory(prefix="gradc-parity-") as tmp:
            results = [check_model(a.gradc, m, tmp, sets=tuple(a.set), env=env) for m in a.model]
    else:
        results = run(a.gradc, a.model or ALL_MODELS, env=env)
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
