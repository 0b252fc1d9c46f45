#!/usr/bin/env python3
"""Draws the loss curves of training runs into a PNG (matplotlib, Debian's python3-matplotlib).

Each run is LABEL=FILE, where FILE is either
  - kiln::Trainer's log, output_dir/trainer_log.jsonl (one JSON record per line: "loss" records
    are the training curve, "eval_loss" records the evaluation points), or
  - the JSON that bench/peers/torch_train_gpt.py --train --json writes ("train": {"log": [[step,
    loss], ...], "valid_loss": ...}), its validation loss drawn at the last step.
A FILE alone is labelled by its folder's name.

  python3 scripts/plot_loss.py train_gpt_output/loss.png train_gpt_output/trainer_log.jsonl
  python3 scripts/plot_loss.py loss.png kiln=train_gpt_output/trainer_log.jsonl torch=torch_train_gpt.json
"""
import json
import os
import sys


def read_run(path):
    """(steps, losses, eval_steps, eval_losses) of one run's file."""
    with open(path) as f:
        text = f.read()
    steps, losses, eval_steps, eval_losses = [], [], [], []
    if path.endswith(".jsonl"):
        for line in text.splitlines():
            if not line.strip():
                continue
            r = json.loads(line)
            if "loss" in r and "step" in r:
                steps.append(r["step"]), losses.append(r["loss"])
            if "eval_loss" in r:
                eval_steps.append(r["step"]), eval_losses.append(r["eval_loss"])
    else:
        train = json.loads(text).get("train")
        if not train:
            sys.exit(f"plot_loss: {path} has no \"train\" record (run torch_train_gpt.py with --train --json)")
        for step, loss in train["log"]:
            steps.append(step), losses.append(loss)
        if train.get("valid_loss") is not None and steps:
            eval_steps.append(steps[-1]), eval_losses.append(train["valid_loss"])
    if not steps and not eval_steps:
        sys.exit(f"plot_loss: {path} holds no loss records")
    return steps, losses, eval_steps, eval_losses


def main(argv):
    if len(argv) < 3 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) > 1 and argv[1] in ("-h", "--help") else 2
    out, runs = argv[1], []
    for arg in argv[2:]:
        label, sep, path = arg.partition("=")
        if not sep or os.path.exists(arg):  # a file alone (its name may hold "=")
            label, path = "", arg
        runs.append((label or os.path.basename(os.path.dirname(os.path.abspath(path))), path))
    try:
        import matplotlib
    except ImportError:
        sys.exit("plot_loss: needs matplotlib (Debian: apt-get install python3-matplotlib)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, (label, path) in enumerate(runs):
        steps, losses, eval_steps, eval_losses = read_run(path)
        color = f"C{i}"
        if steps:
            ax.plot(steps, losses, ".-", color=color, markersize=4, label=f"{label}: training")
        if eval_steps:
            ax.plot(eval_steps, eval_losses, "o", color=color, label=f"{label}: evaluation")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print(f"plot_loss: wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
