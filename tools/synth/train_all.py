#!/usr/bin/env python3
"""Trains the whole bundled family models/synth from scratch, in dependency order:

  vq -> vq_refine -> vq_decoder -> target (+ text conditioner) -> drafter, chain, resamplers,
  eagle

Each stage is its own resumable script (see --help of each); an interrupted run continues
where it stopped when this command is run again, and finished stages are skipped. Real
training times are recorded in models/synth/training.json.

  /usr/bin/python3 tools/synth/train_all.py            # everything
  /usr/bin/python3 tools/synth/train_all.py --only target
  MULO_TRAIN_THREADS=1 /usr/bin/python3 tools/synth/train_all.py --only resamplers  # beside another
  /usr/bin/python3 tools/synth/train_all.py --from-scratch

After the target, the four stages that depend only on it and the VQ run in two lanes of one
thread each ({drafter, chain} beside {resamplers, eagle}): these models are too small to use
two threads well, so two one-thread stages side by side finish sooner than one after the
other with two threads each. --lanes 1 runs them one after the other. The wall time of every
invocation, killed ones included (a heartbeat file per invocation under <train dir>/invocations),
is added up in training.json ("family").
"""
import argparse
import fcntl
import json
import os
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import trainer  # noqa: E402
import wall_ledger  # noqa: E402

STAGES = [
    ("vq", ["train_vq.py"]),
    ("vq_refine", ["train_vq.py", "--refine"]),
    # Decoder only: token ids stay as vq_refine left them. Before the resamplers, whose pixel
    # loss goes through the final decoder.
    ("vq_decoder", ["train_vq.py", "--decoder_only"]),
    ("target", ["train_ar.py", "--role", "target"]),
    ("drafter", ["train_ar.py", "--role", "drafter"]),
    ("chain", ["train_ar.py", "--role", "chain"]),
    ("resamplers", ["train_resamplers.py"]),
    ("eagle", ["train_eagle.py"]),
]
# Stages that need only the target (and conditioner) and the VQ, in lanes that may run side
# by side; each lane keeps its own order. They are the last stages of STAGES.
AFTER_TARGET_LANES = [["drafter", "chain"], ["resamplers", "eagle"]]
LANED = {stage for lane in AFTER_TARGET_LANES for stage in lane}
assert {stage for stage, _ in STAGES[-len(LANED):]} == LANED


class StageFailed(Exception):
    pass


def stage_dir(stage):
    return os.path.join(trainer.WORK_DIR, stage)


def is_done(stage):
    return os.path.exists(os.path.join(stage_dir(stage), "done"))


def write_record(record_path, family=None):
    """Rebuilds training.json from every finished stage's own report, so two train_all
    processes working on different stages never drop each other's entries; `family`, when
    given, replaces the family's wall-time entry. Returns the record."""
    record = {}
    if os.path.exists(record_path):
        with open(record_path) as f:
            record = json.load(f)
    for stage, _ in STAGES:
        report_path = os.path.join(stage_dir(stage), "report.json")
        if os.path.exists(os.path.join(stage_dir(stage), "done")) and os.path.exists(report_path):
            with open(report_path) as f:
                record[stage] = {**record.get(stage, {}), **json.load(f)}
    if family is not None:
        record["family"] = family
    trainer.write_json(record_path, record)
    return record


def run_stage(stage, command, threads=None):
    """Trains one stage unless it is done. A lock per stage lets a second train_all (say
    `--only resamplers` on a free core) run beside this one without training a stage twice:
    whoever comes second waits, then sees the done marker."""
    os.makedirs(stage_dir(stage), exist_ok=True)
    done = os.path.join(stage_dir(stage), "done")
    with open(os.path.join(stage_dir(stage), "lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"[train_all] {stage}: another train_all is training it; waiting", flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(done):
            print(f"[train_all] {stage}: already done, skipping", flush=True)
            return
        print(f"[train_all] {stage}: {' '.join(command)}", flush=True)
        t0 = time.time()
        env = dict(os.environ)
        if threads:
            env["MULO_TRAIN_THREADS"] = str(threads)
        result = subprocess.run([sys.executable, os.path.join(HERE, command[0])] + command[1:],
                                env=env)
        if result.returncode != 0:
            raise StageFailed(f"[train_all] {stage} failed (exit {result.returncode}); "
                              "re-run to resume")
        report_path = os.path.join(stage_dir(stage), "report.json")
        report = {}
        if os.path.exists(report_path):
            with open(report_path) as f:
                report = json.load(f)
        report["wall_minutes_last_run"] = round((time.time() - t0) / 60, 1)
        report["threads"] = trainer.configured_threads(env)
        trainer.write_json(report_path, report)
        with open(done, "w") as f:
            f.write("done\n")


def record_family_wall(record_path, lanes):
    """Brings training.json up to date with the family's wall time: the sum over every
    invocation in the ledger, killed ones included; returns the record."""
    seconds = wall_ledger.invocations(os.path.join(trainer.WORK_DIR, "invocations"))
    return write_record(record_path, {"wall_minutes": round(sum(seconds) / 60, 1),
                                      "invocations": len(seconds), "lanes_after_target": lanes})


def run_lanes(lanes, commands, record_path, record_lock):
    """Runs each lane (a list of stages, in order) in its own thread with its share of the
    cores; the first failure is raised once every lane has stopped."""
    threads = max(1, trainer.configured_threads() // len(lanes))
    errors = []

    def lane_main(stages):
        try:
            for stage in stages:
                run_stage(stage, commands[stage], threads if len(lanes) > 1 else None)
                with record_lock:
                    write_record(record_path)
        except StageFailed as e:
            errors.append(e)

    workers = [threading.Thread(target=lane_main, args=(lane,)) for lane in lanes]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        raise errors[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=[s for s, _ in STAGES], action="append",
                    help="run only these stages (repeatable); finished stages are still skipped: "
                         "delete out/train/<stage> to retrain one")
    ap.add_argument("--from-scratch", action="store_true",
                    help="delete all training state under out/train first")
    ap.add_argument("--lanes", type=int, choices=[1, 2], default=2,
                    help="run the stages after the target in 2 lanes side by side (default) "
                         "or in 1")
    args = ap.parse_args()
    if args.from_scratch and os.path.isdir(trainer.WORK_DIR):
        shutil.rmtree(trainer.WORK_DIR)
    os.makedirs(trainer.WORK_DIR, exist_ok=True)
    record_path = os.path.join(trainer.MODELS_DIR, "training.json")
    os.makedirs(trainer.MODELS_DIR, exist_ok=True)
    commands = dict(STAGES)
    wanted = [stage for stage, _ in STAGES if not args.only or stage in args.only]
    heartbeat = float(os.environ.get("MULO_WALL_HEARTBEAT_S", 30))
    failure = None
    with wall_ledger.WallLedger(os.path.join(trainer.WORK_DIR, "invocations"), heartbeat):
        try:
            for stage in wanted:
                if stage not in LANED:
                    run_stage(stage, commands[stage])
                    write_record(record_path)
            # Finished stages drop out of the lanes, so a lone remaining lane gets every core.
            lanes = [[s for s in lane if s in wanted and not is_done(s)]
                     for lane in AFTER_TARGET_LANES]
            if args.lanes == 1:
                lanes = [[s for lane in lanes for s in lane]]
            lanes = [lane for lane in lanes if lane]
            if lanes:
                run_lanes(lanes, commands, record_path, threading.Lock())
        except StageFailed as e:
            failure = e
    record = record_family_wall(record_path, args.lanes)
    if failure:
        print(failure, file=sys.stderr)
        sys.exit(1)
    total = sum(r.get("train_minutes", 0) for r in record.values())
    print(f"[train_all] finished; training minutes recorded: {total:.1f} (stages), "
          f"{record['family']['wall_minutes']:.1f} wall minutes over "
          f"{record['family']['invocations']} invocation(s)", flush=True)


if __name__ == "__main__":
    main()
