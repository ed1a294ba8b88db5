"""Run a command and stamp each line it prints with the seconds since it started: where a run spends its time.
Usage (from the repository root):
  python nbs/data/scripts/ep_probe/timeline.py ep_probe --out o --cache_dir <empty folder>"""
import subprocess, sys, time
t0 = time.perf_counter()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
for line in p.stdout:
    if line.strip(): print(f"{time.perf_counter()-t0:6.2f} {line.rstrip()[:110]}", flush=True)
p.wait(); print(f"{time.perf_counter()-t0:6.2f} exit {p.returncode}")
