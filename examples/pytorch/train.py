#!/usr/bin/env python3
"""A PyTorch trainer that follows refuel's trainer contract.

It fits a small MLP (the student) to a fixed random one (the teacher) with
SGD and momentum, on CPU, and is deterministic to the bit: the batch of
step n is drawn from a generator seeded by (seed, n) alone, so a run
resumed from any checkpoint ends with exactly the weights of a run never
interrupted.

The contract (pkg/agent's documentation and the README):
  * $REFUEL_CHECKPOINT_DIR holds step-<N> directories; the trainer resumes
    from the highest one that loads whole.
  * A checkpoint is written into a ".tmp-..." directory, synced, then
    renamed to step-<N>: the rename is what makes it complete.
  * SIGTERM (a spot interruption notice, a pause): finish the step under
    way, write a final checkpoint, exit 0.
  * Progress goes to stdout as "REFUEL_PROGRESS step=<N> total=<T>".
  * $REFUEL_CHECKPOINT_INTERVAL_SECONDS says how often to checkpoint.

A checkpoint step-<N> holds:
  model.pt     torch.save of the student's and the optimizer's state and N
  weights.bin  the student's parameters as little-endian float32, in
               state_dict order: what two runs compare
  state.json   {"step", "total", "seed", "loss", "digest"}, digest being
               the sha256 of weights.bin

Usage: train.py [--steps 600] [--seed 1] [--checkpoint-every K]
                [--step-time SECONDS]
Exit status: 0 finished or stopped with its checkpoint on disk, 1 failed,
2 bad usage.
"""

import signal

# Before anything slow (importing torch takes a second): a notice that
# comes early must find the handler, not the default action, death.
_stop = False


def _on_signal(signum, frame):
    global _stop
    _stop = True


signal.signal(signal.SIGTERM, _on_signal)
signal.signal(signal.SIGINT, _on_signal)

import argparse
import hashlib
import json
import os
import shutil
import struct
import sys
import tempfile
import time

import torch

FEATURES, HIDDEN, BATCH = 16, 32, 64
LR, MOMENTUM = 0.05, 0.9


def log(msg):
    print("train.py: " + msg, file=sys.stderr, flush=True)


def progress(step, total, loss=None):
    extra = "" if loss is None else " loss=%.6g" % loss
    print("REFUEL_PROGRESS step=%d total=%d%s" % (step, total, extra), flush=True)


def mlp():
    return torch.nn.Sequential(
        torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, 1)
    )


def build(seed):
    """The teacher, the student and its optimizer, all from the seed."""
    torch.manual_seed(seed)
    teacher, student = mlp(), mlp()
    for p in teacher.parameters():
        p.requires_grad_(False)
    opt = torch.optim.SGD(student.parameters(), lr=LR, momentum=MOMENTUM)
    return teacher, student, opt


def batch(seed, step, teacher):
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    x = torch.rand((BATCH, FEATURES), generator=g) * 2 - 1
    noise = torch.rand((BATCH, 1), generator=g) * 0.02 - 0.01
    return x, teacher(x) + noise


def weights_bytes(student):
    out = bytearray()
    for t in student.state_dict().values():
        flat = t.detach().to(torch.float32).contiguous().view(-1).tolist()
        out += struct.pack("<%df" % len(flat), *flat)
    return bytes(out)


def parse_step(name):
    digits = name[len("step-"):] if name.startswith("step-") else ""
    return int(digits) if digits.isdigit() else None


def write_synced(path, write):
    """Creates path 0600, has write fill it, and syncs it to disk."""
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())


def sync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save(ckpt_dir, step, total, seed, loss, student, opt):
    # mkdtemp makes the directory 0700; the files are 0600.
    tmp = tempfile.mkdtemp(prefix=".tmp-step-%d-" % step, dir=ckpt_dir)
    weights = weights_bytes(student)
    state = {"model": student.state_dict(), "optimizer": opt.state_dict(), "step": step}
    write_synced(os.path.join(tmp, "model.pt"), lambda f: torch.save(state, f))
    write_synced(os.path.join(tmp, "weights.bin"), lambda f: f.write(weights))
    meta = {"step": step, "total": total, "seed": seed, "loss": loss,
            "digest": hashlib.sha256(weights).hexdigest()}
    write_synced(os.path.join(tmp, "state.json"), lambda f: f.write((json.dumps(meta) + "\n").encode()))
    sync_dir(tmp)
    # rename(2) does not replace a directory with files in it, so a step-<N>
    # left by an earlier life (one resume skipped as unreadable) goes aside.
    final, aside = os.path.join(ckpt_dir, "step-%d" % step), tmp + ".old"
    if os.path.exists(final):
        os.rename(final, aside)
    os.rename(tmp, final)
    sync_dir(ckpt_dir)
    shutil.rmtree(aside, ignore_errors=True)
    log("wrote step-%d (loss %.6g)" % (step, loss))


def resume(ckpt_dir, seed, total, student, opt):
    """Loads the newest checkpoint that reads back whole; returns its step, or -1."""
    steps = []
    for name in os.listdir(ckpt_dir):
        n = parse_step(name)
        if n is not None and os.path.isdir(os.path.join(ckpt_dir, name)):
            steps.append((n, name))
    for n, name in sorted(steps, reverse=True):
        d = os.path.join(ckpt_dir, name)
        try:
            with open(os.path.join(d, "state.json")) as f:
                meta = json.load(f)
            state = torch.load(os.path.join(d, "model.pt"))
            if meta["step"] != n or state["step"] != n:
                raise ValueError("names step %d" % meta["step"])
            if meta["seed"] != seed or n > total:
                raise SystemExit("train.py: %s is of seed %d, or past step %d: it belongs to another run"
                                 % (name, meta["seed"], total))
            student.load_state_dict(state["model"])
            opt.load_state_dict(state["optimizer"])
            if hashlib.sha256(weights_bytes(student)).hexdigest() != meta["digest"]:
                raise ValueError("weights differ from state.json's digest")
        except (OSError, ValueError, KeyError, RuntimeError) as e:
            log("skipping %s: %s" % (name, e))
            continue
        log("resuming from %s of %d (attempt %s)" % (name, total, os.environ.get("REFUEL_ATTEMPT", "?")))
        return n
    log("no checkpoint in %s: starting at step 0 of %d" % (ckpt_dir, total))
    return -1


def main():
    ap = argparse.ArgumentParser(description="A deterministic PyTorch trainer for refuel.")
    ap.add_argument("--steps", type=int, default=600, help="total steps")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--checkpoint-every", type=int, default=0,
                    help="checkpoint every K steps; 0 (default) every $REFUEL_CHECKPOINT_INTERVAL_SECONDS")
    ap.add_argument("--step-time", type=float, default=0.0,
                    help="pace each step to take at least this many seconds")
    args = ap.parse_args()
    if args.steps < 1 or args.checkpoint_every < 0 or args.step_time < 0:
        ap.error("--steps must be at least 1, --checkpoint-every and --step-time not negative")
    ckpt_dir = os.environ.get("REFUEL_CHECKPOINT_DIR")
    if not ckpt_dir:
        print("train.py: REFUEL_CHECKPOINT_DIR is not set", file=sys.stderr)
        return 2
    os.makedirs(ckpt_dir, mode=0o700, exist_ok=True)
    interval = float(os.environ.get("REFUEL_CHECKPOINT_INTERVAL_SECONDS") or 60)

    # One thread and deterministic kernels: the same bits on every run.
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    teacher, student, opt = build(args.seed)
    saved = resume(ckpt_dir, args.seed, args.steps, student, opt)
    step = max(saved, 0)
    progress(step, args.steps)
    loss = float("nan")
    last_save = last_print = time.monotonic()
    while step < args.steps and not _stop:
        began = time.monotonic()
        x, y = batch(args.seed, step, teacher)
        opt.zero_grad()
        out = torch.nn.functional.mse_loss(student(x), y)
        out.backward()
        opt.step()
        step += 1
        loss = out.item()
        rest = args.step_time - (time.monotonic() - began)
        if rest > 0:
            time.sleep(rest)
        now = time.monotonic()
        due = step == args.steps or (
            step % args.checkpoint_every == 0 if args.checkpoint_every else now - last_save >= interval)
        if due:
            save(ckpt_dir, step, args.steps, args.seed, loss, student, opt)
            saved, last_save, last_print = step, now, now
            progress(step, args.steps, loss)
        elif now - last_print >= 0.5:
            progress(step, args.steps, loss)
            last_print = now
    if step != saved:
        save(ckpt_dir, step, args.steps, args.seed, loss, student, opt)
        progress(step, args.steps, loss)
    digest = hashlib.sha256(weights_bytes(student)).hexdigest()
    if step == args.steps:
        print("REFUEL_DONE step=%d total=%d loss=%.6g digest=%s" % (step, args.steps, loss, digest), flush=True)
    else:
        print("REFUEL_STOPPED step=%d total=%d" % (step, args.steps), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
