"""Dump or compare the bits of every rl_kernel_ops result (run on the GPU machine).

    python dump_rl_kernel_bits.py dump OUT.pt      # with the tree under test first on PYTHONPATH
    python dump_rl_kernel_bits.py compare A.pt B.pt

`dump` evaluates the rl_kernel candidate of each op (output and every gradient) on the bitwise
report's default cases and saves them; `compare` says, per op, case and tensor, whether two dumps
hold the same bits. Used to show that a source refactor of the kernels changed no bit.
"""

import sys

import torch

from audit.core.candidates import get_candidate, load_adapters
from audit.core.compare import bit_patterns
from audit.core.evaluate import evaluate
from audit.core.inputs import draw_grad_out, draw_inputs
from audit.core.ops import OPS


def dump(path: str) -> None:
    import rl_kernel_ops

    if not hasattr(rl_kernel_ops, "prepare"):
        # a tree from before candidates were prepared: its extension loads on the first call
        rl_kernel_ops.prepare = lambda device: None
    load_adapters()
    dev = torch.device("cuda")
    out = {"source": rl_kernel_ops.__file__}
    for op in OPS.values():
        c = get_candidate(op.name, "rl_kernel")
        for rows in op.cases:
            inputs = {k: v.to(dev) for k, v in draw_inputs(op, rows, rows).items()}
            outs, grads = evaluate(c, op, inputs, draw_grad_out(op, rows, rows).to(dev))
            out[f"{op.name}/{rows}/out"] = outs[0].cpu()
            out.update({f"{op.name}/{rows}/d_{n}": g.cpu() for n, g in grads.items()})
    torch.save(out, path)
    print(f"{path}: {len(out) - 1} tensors from {out['source']}")


def compare(a_path: str, b_path: str) -> int:
    a, b = torch.load(a_path), torch.load(b_path)
    print(f"A = {a.pop('source')}\nB = {b.pop('source')}")
    differing = 0
    for key in sorted(set(a) | set(b)):
        same = (
            key in a
            and key in b
            and a[key].shape == b[key].shape
            and torch.equal(bit_patterns(a[key]), bit_patterns(b[key]))
        )
        differing += not same
        print(f"{key:40s} {'same bits' if same else 'DIFFERENT'}")
    print(f"{len(set(a) | set(b))} tensors, {differing} different")
    return 1 if differing else 0


if __name__ == "__main__":
    if sys.argv[1] == "dump":
        dump(sys.argv[2])
    else:
        sys.exit(compare(sys.argv[2], sys.argv[3]))
