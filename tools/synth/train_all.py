#!/usr/bin/env python3
"""Trains the whole bundled family models/synth from scratch, in dependency order:

  vq -> vq_refine -> target (+ text conditioner) -> drafter -> chain -> resamplers -> eagle
  -> vq_decoder (decoder only: token ids unchanged, so the AR models stay valid)

Each stage is its own resumable script (see --help of each); an interrupted run continues
where it stopped when this command is run again, and finished stages are skipped. Real
training times are recorded in models/synth/training.json.

  /usr/bin/python3 tools/synth/train_all.py            # everything
  /usr/bin/python3 tools/synth/train_all.py --only target
  MULO_TRAIN_THREADS=1 /usr/bin/python3 tools/synth/train_all.py --only resamplers  # beside another
  /usr/bin/python3 tools/synth/train_all.py --from-scratch
"""
import argparse
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import trainer  # noqa: E402

STAGES = [
    ("vq", ["train_vq.py"]),
    ("vq_refine", ["train_vq.py", "--refine"]),
    ("target", ["train_ar.py", "--role", "target"]),
    ("drafter", ["train_ar.py", "--role", "drafter"]),
    ("chain", ["train_ar.py", "--role", "chain"]),
    ("resamplers", ["train_resamplers.py"]),
    ("eagle", ["train_eagle.py"]),
    # Leaves token ids unchanged, so it runs last: the AR models are trained on the same ids.
    ("vq_decoder", ["train_vq.py", "--decoder_only"]),
]


def stage_dir(stage):
    return os.path.join(trainer.WORK_DIR, stage)


def write_record(record_path):
    """Rebuilds training.json from every finished stage's own report, so two train_all
    processes working on different stages never drop each other's entries."""
    record = {}
    if os.path.exists(record_path):
        with open(record_path) as f:
            record = json.load(f)
    for stage, _ in STAGES:
        report_path = os.path.join(stage_dir(stage), "report.json")
        if os.path.exists(os.path.join(stage_dir(stage), "done")) and os.path.exists(report_path):
            with open(report_path) as f:
                record[stage] = {**record.get(stage, {}), **json.load(f)}
    tmp = record_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(record, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, record_path)
    return record


def run_stage(stage, command):
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
        result = subprocess.run([sys.executable, os.path.join(HERE, command[0])] + command[1:])
        if result.returncode != 0:
            print(f"[train_all] {stage} failed (exit {result.returncode}); re-run to resume",
                  file=sys.stderr)
            sys.exit(result.returncode)
        report_path = os.path.join(stage_dir(stage), "report.json")
        report = {}
        if os.path.exists(report_path):
            with open(report_path) as f:
                report = json.load(f)
        report["wall_minutes_last_run"] = round((time.time() - t0) / 60, 1)
        report["threads"] = int(os.environ.get("MULO_TRAIN_THREADS", os.cpu_count() or 1))
        with open(report_path, "w") as f:
            json.dump(report, f, indent=2)
        with open(done, "w") as f:
            f.write("done\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=[s for s, _ in STAGES], action="append",
                    help="run only these stages (repeatable); finished stages are still skipped: "
                         "delete out/train/<stage> to retrain one")
    ap.add_argument("--from-scratch", action="store_true",
                    help="delete all training state under out/train first")
    args = ap.parse_args()
    if args.from_scratch and os.path.isdir(trainer.WORK_DIR):
        shutil.rmtree(trainer.WORK_DIR)
    os.makedirs(trainer.WORK_DIR, exist_ok=True)
    record_path = os.path.join(trainer.MODELS_DIR, "training.json")
    for stage, command in STAGES:
        if args.only and stage not in args.only:
            continue
        run_stage(stage, command)
        write_record(record_path)
    record = write_record(record_path)
    total = sum(r.get("train_minutes", 0) for r in record.values())
    print(f"[train_all] finished; training minutes recorded: {total:.1f}", flush=True)


if __name__ == "__main__":
    main()
