#!/usr/bin/env python3
"""Run PyTorch reference rows with ../shared/anchors/torch_gpt.py.

Usage, from the folder that holds torch_gpt.py (.gpu/ on the GPU machine):

    python3 ../bench/torch_rows.py [--env VAR] ROW...

A row is config:mode:sdpa:ckpt (sdpa and ckpt 0 or 1), e.g. gpt2:fp16:0:1.
With --env VAR, a non-empty $VAR replaces the rows given (the GPU scripts'
AMP_TORCH). TF32 stays off, as in strata's fp32 rows. Each row prints
torch_gpt.run's JSON line.
"""
import os
import sys

sys.path.insert(0, os.getcwd())


def main(argv):
    rows = argv
    if len(argv) >= 2 and argv[0] == "--env":
        rows = os.environ.get(argv[1], "").split() or argv[2:]
    import torch
    import torch_gpt as t

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for row in rows:
        name, mode, sdpa, ckpt = row.split(":")
        t.run(name, mode, sdpa == "1", ckpt == "1")


if __name__ == "__main__":
    main(sys.argv[1:])
