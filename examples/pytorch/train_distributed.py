#!/usr/bin/env python3
"""A data-parallel PyTorch trainer for a gang of nodes on refuel's contract.

The model, the problem and the checkpoints are train.py's (beside this
file): a small MLP fitted to a fixed random one with SGD and momentum, on
CPU. Here every node of the gang runs one rank, with torch.distributed on
the gloo backend: each rank computes the gradient of its own shard of the
step's batch, the ranks all-gather their gradients and every rank adds
them up in rank order. The sum is the same bits on every rank and in every
run, so the model after N steps is the same whichever attempts they took:
a gang stopped and resumed from its checkpoint ends with exactly the
weights of a gang of as many nodes never interrupted. (A different number
of nodes groups the sums otherwise and gives other bits.)

The contract (pkg/agent's documentation and the README):
  * REFUEL_NODE_RANK, REFUEL_NUM_NODES, REFUEL_MASTER_ADDR and
    REFUEL_MASTER_PORT place this rank in its gang; without them it trains
    alone. Rank 0 listens at the master address (torch's TCP store). They
    are read anew by every attempt: an elastic gang (resources.min_nodes)
    resumes on another number of nodes from the same checkpoint, which
    holds the model and the optimizer alone.
  * Every rank resumes from the step-<N> directory the agent restored in its
    $REFUEL_CHECKPOINT_DIR (the job's latest checkpoint, the same on every
    node); the ranks check they agree on N.
  * Only rank 0 writes checkpoints (".tmp-..." then renamed to step-<N>),
    every --checkpoint-every steps or $REFUEL_CHECKPOINT_INTERVAL_SECONDS;
    they are the job's.
  * SIGTERM on any rank: its next gradient says so, the ranks agree to stop
    after that step, rank 0 writes its checkpoint, and every rank prints
    REFUEL_STOPPED and exits 0. A rank stopped before its gang has formed
    prints REFUEL_STOPPED at the step it restored and exits 0 at once.
  * After the last step every rank waits until rank 0 has written the final
    checkpoint and prints REFUEL_DONE; rank 0 exits 0 at once, the others
    exit 0 once it has gone: no rank is done before the job is.
  * A rank that goes away (its collective fails or times out, --timeout):
    rank 0 writes the checkpoint of the last step done; every rank left
    prints REFUEL_STOPPED and exits 0, and the gang resumes from it.

Usage: train_distributed.py [--steps 600] [--seed 1] [--checkpoint-every K]
                            [--step-time SECONDS] [--timeout SECONDS]
Exit status: 0 finished or stopped (rank 0's checkpoint on disk), 1 failed
(the gang could not form, the ranks resumed from different steps), 2 bad
usage.
"""

# train.py installs its SIGTERM handler as it is imported, before torch
# (which takes a second): a notice that comes early is recorded in
# train._stop, not met by the default action, death.
import train

import argparse
import datetime
import hashlib
import ipaddress
import os
import signal
import sys
import time

import torch
import torch.distributed as dist


def log(rank, msg):
    print("train_distributed.py rank %d: %s" % (rank, msg), file=sys.stderr, flush=True)


def place():
    """This rank's place in its gang from the contract's variables: rank, nodes, address, port."""
    nodes = int(os.environ.get("REFUEL_NUM_NODES") or 1)
    if nodes <= 1:
        return 0, 1, None, None
    rank = int(os.environ["REFUEL_NODE_RANK"])
    addr, port = os.environ["REFUEL_MASTER_ADDR"], int(os.environ["REFUEL_MASTER_PORT"])
    if not 0 <= rank < nodes:
        raise ValueError("REFUEL_NODE_RANK=%d is not one of 0 to %d" % (rank, nodes - 1))
    return rank, nodes, addr, port


def loopback(addr):
    try:
        return addr == "localhost" or ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return False


def interrupted(e):
    """Whether a wait of torch's failed because a signal came (EINTR): a
    SIGTERM interrupts it before its Python handler has run."""
    return "Interrupted system call" in str(e)


def form(rank, nodes, addr, port, timeout):
    """Forms the gang: the ranks meet in torch's TCP store, which rank 0
    serves at the master address, then start the gloo group on it. The
    ranks wait for each other in short polls, so that a SIGTERM meanwhile
    stops this rank at once rather than at the end of torch's own wait.
    Returns False when stopped (a SIGTERM, or rank 0 gone while waiting);
    raises when the gang does not form within timeout."""
    if train._stop:  # torch's connecting hears no SIGTERM that came before it
        log(rank, "stopped before the gang formed")
        return False
    deadline = time.monotonic() + timeout
    wait = datetime.timedelta(seconds=timeout)
    try:
        # A rank above 0 connects, retrying while rank 0 starts.
        store = dist.TCPStore(addr, port, nodes, rank == 0, wait, wait_for_workers=False)
    except RuntimeError as e:
        if train._stop or interrupted(e):
            log(rank, "stopped before the gang formed: %s" % e)
            return False
        raise
    try:
        store.add("joined", 1)
        while store.add("joined", 0) < nodes:
            if train._stop:
                log(rank, "stopped before the gang formed")
                return False
            if time.monotonic() > deadline:
                raise TimeoutError("%d of %d ranks joined" % (store.add("joined", 0), nodes))
            time.sleep(0.05)
    except RuntimeError as e:  # rank 0's store went away
        log(rank, "rank 0 went away before the gang formed: %s" % e)
        return False
    dist.init_process_group("gloo", store=store, rank=rank, world_size=nodes, timeout=wait)
    return True


def flat_grads(student):
    return [p.grad.reshape(-1) for p in student.parameters()]


def main():
    ap = argparse.ArgumentParser(description="A deterministic data-parallel PyTorch trainer for refuel.")
    ap.add_argument("--steps", type=int, default=600, help="total steps")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--checkpoint-every", type=int, default=0,
                    help="rank 0 checkpoints every K steps; 0 (default) every $REFUEL_CHECKPOINT_INTERVAL_SECONDS")
    ap.add_argument("--step-time", type=float, default=0.0,
                    help="pace each step to take at least this many seconds")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="seconds the ranks wait for each other to join and at every step")
    args = ap.parse_args()
    if args.steps < 1 or args.checkpoint_every < 0 or args.step_time < 0 or args.timeout <= 0:
        ap.error("--steps must be at least 1, --checkpoint-every and --step-time not negative, --timeout positive")
    try:
        rank, nodes, addr, port = place()
    except (KeyError, ValueError) as e:
        print("train_distributed.py: the gang's variables: %s" % e, file=sys.stderr)
        return 2
    ckpt_dir = os.environ.get("REFUEL_CHECKPOINT_DIR")
    if not ckpt_dir:
        print("train_distributed.py: REFUEL_CHECKPOINT_DIR is not set", file=sys.stderr)
        return 2
    os.makedirs(ckpt_dir, mode=0o700, exist_ok=True)
    interval = float(os.environ.get("REFUEL_CHECKPOINT_INTERVAL_SECONDS") or 60)

    # One thread and deterministic kernels: the same bits on every run.
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    teacher, student, opt = train.build(args.seed)
    saved = train.resume(ckpt_dir, args.seed, args.steps, student, opt)
    step = max(saved, 0)

    if nodes > 1:
        if loopback(addr):
            # Every rank on this machine (the local and simulated clouds):
            # gloo's own connections go over loopback too.
            os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        try:
            formed = form(rank, nodes, addr, port, args.timeout)
        except (RuntimeError, OSError, TimeoutError) as e:
            log(rank, "the gang of %d did not form at %s:%d within %gs: %s" % (nodes, addr, port, args.timeout, e))
            return 1
        if not formed:
            return stopped(rank, ckpt_dir, step, saved, args, student, opt, float("nan"))
        steps = [torch.zeros(1, dtype=torch.int64) for _ in range(nodes)]
        try:
            dist.all_gather(steps, torch.tensor([step], dtype=torch.int64))
        except (RuntimeError, OSError) as e:
            log(rank, "a rank went away as the gang formed: %s; the gang stops at step %d" % (e, step))
            return stopped(rank, ckpt_dir, step, saved, args, student, opt, float("nan"))
        if len({int(s) for s in steps}) != 1:
            log(rank, "the ranks resumed from different steps %s: the agent restores the job's checkpoint on every rank"
                % [int(s) for s in steps])
            return 1
        log(rank, "rank %d of %d joined at %s:%d; training from step %d" % (rank, nodes, addr, port, step))

    lo, hi = rank * train.BATCH // nodes, (rank + 1) * train.BATCH // nodes
    train.progress(step, args.steps)
    loss = float("nan")
    last_save = last_print = time.monotonic()
    while step < args.steps and not (nodes == 1 and train._stop):
        began = time.monotonic()
        x, y = train.batch(args.seed, step, teacher)
        opt.zero_grad()
        # The shard's share of the batch's mean squared error: the shards'
        # gradients add up to the whole batch's.
        out = ((student(x[lo:hi]) - y[lo:hi]) ** 2).sum() / train.BATCH
        out.backward()
        mine = torch.cat(flat_grads(student) + [out.detach().reshape(1), torch.tensor([1.0 if train._stop else 0.0])])
        if nodes > 1:
            gathered = [torch.empty_like(mine) for _ in range(nodes)]
            try:
                dist.all_gather(gathered, mine)
            except (RuntimeError, OSError) as e:
                log(rank, "a rank went away during step %d: %s; the gang stops at step %d" % (step + 1, e, step))
                return stopped(rank, ckpt_dir, step, saved, args, student, opt, loss)
        else:
            gathered = [mine]
        total = gathered[0].clone()
        for g in gathered[1:]:  # in rank order: the same sum on every rank
            total += g
        stop = any(g[-1].item() > 0 for g in gathered)
        offset = 0
        for p in student.parameters():
            p.grad.copy_(total[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
        opt.step()
        step += 1
        loss = total[-2].item()
        rest = args.step_time - (time.monotonic() - began)
        if rest > 0:
            time.sleep(rest)
        now = time.monotonic()
        due = step == args.steps or (
            step % args.checkpoint_every == 0 if args.checkpoint_every else now - last_save >= interval)
        if rank == 0 and due:
            train.save(ckpt_dir, step, args.steps, args.seed, loss, student, opt)
            saved, last_save, last_print = step, now, now
            train.progress(step, args.steps, loss)
        elif now - last_print >= 0.5:
            train.progress(step, args.steps, loss)
            last_print = now
        if stop:
            log(rank, "the gang stops at step %d" % step)
            return stopped(rank, ckpt_dir, step, saved, args, student, opt, loss)
    if step < args.steps:
        return stopped(rank, ckpt_dir, step, saved, args, student, opt, loss)
    if rank == 0 and step != saved:
        train.save(ckpt_dir, step, args.steps, args.seed, loss, student, opt)
        saved = step
    if nodes > 1:
        # No rank is done before the job's final checkpoint is on disk:
        # rank 0 comes here once it is.
        try:
            dist.barrier()
        except (RuntimeError, OSError) as e:
            log(rank, "a rank went away after the last step: %s; the gang stops at step %d" % (e, step))
            return stopped(rank, ckpt_dir, step, saved, args, student, opt, loss)
    settled()
    if rank != 0:  # rank 0 reported the step with its checkpoint
        train.progress(step, args.steps, loss)
    digest = hashlib.sha256(train.weights_bytes(student)).hexdigest()
    print("REFUEL_DONE step=%d total=%d loss=%.6g digest=%s" % (step, args.steps, loss, digest), flush=True)
    if nodes > 1:
        # Rank 0 ends first, and the others after it: the job's outcome is
        # rank 0's, and when another rank ends first refuel stops rank 0
        # (its gang lost a rank), which while torch tears down (a third of
        # a second) turns done into stopped. So rank 0 leaves at once, and
        # the others wait for its connection to close (it sends nothing).
        if rank == 0:
            sys.stderr.flush()
            os._exit(0)
        try:
            dist.recv(torch.zeros(1), src=0)
        except (RuntimeError, OSError):
            pass
    return 0


def stopped(rank, ckpt_dir, step, saved, args, student, opt, loss):
    """Ends a rank the gang stopped at step: rank 0 checkpoints it first
    (unless it is on disk, or step 0, before any training)."""
    if rank == 0 and step != saved and step > 0:
        train.save(ckpt_dir, step, args.steps, args.seed, loss, student, opt)
    settled()
    train.progress(step, args.steps)
    print("REFUEL_STOPPED step=%d total=%d" % (step, args.steps), flush=True)
    return 0


def settled():
    """Ignores SIGTERM from now on: what there was to save is saved, and a
    stop that comes while Python shuts down would otherwise find its
    default action restored and end an exit 0 as killed (143)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


if __name__ == "__main__":
    sys.exit(main())
