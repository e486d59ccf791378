#!/usr/bin/python3
"""Runs comm-failure-case under mpirun and checks that a dead or hung rank
ends the whole job: within the timeout, with a non-zero exit status, with
the message that says why, and with no process left behind.

  check_failure.py --mpirun "mpirun;--mca;..." --program PATH --np N
                   --scenario exit|hang --collective NAME [--launcher-kills]

hang: rank 1 sleeps; the waiting ranks' collective times out after
$KILN_COMM_TIMEOUT_S and they abortAll, so stderr names the collective
(with --collective none, the other ranks' exit waits that long for rank 1,
then ends the job).
exit: rank 1 leaves without MPI_Finalize. With --launcher-kills, mpirun
notices and ends the job first (its message names rank 1); otherwise
mpirun is told to allow such exits (orte_allowed_exit_without_sync) so that
only Kiln's timeout can end the job, and stderr names the collective.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import time

# The names the MPI backend uses in its messages.
COLLECTIVES = {
    "allreduce": "allReduceSum",
    "allgather": "allGather",
    "allgatherv": "allGatherV",
    "alltoallv": "allToAllV",
    "broadcast": "broadcast",
    "barrier": "barrier",
    "none": None,  # no collective: the exit waits for the other ranks
}


def leftovers(program, session):
    """Live processes running `program` in the session this script gave
    mpirun (so a job of another test is never counted); zombies have no exe
    link."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry}/exe") != program:
                continue
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[3]) == session:  # after comm: state ppid pgrp session
                pids.append(int(entry))
        except (OSError, IndexError, ValueError):
            pass
    return pids


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mpirun", required=True)
    p.add_argument("--program", required=True)
    p.add_argument("--np", type=int, required=True)
    p.add_argument("--scenario", choices=["exit", "hang"], required=True)
    p.add_argument("--collective", choices=sorted(COLLECTIVES), required=True)
    p.add_argument("--launcher-kills", action="store_true")
    a = p.parse_args()
    a.program = os.path.realpath(a.program)

    timeout = float(os.environ.get("KILN_COMM_TIMEOUT_S", "60"))
    cmd = a.mpirun.split(";") + ["-np", str(a.np)]
    if a.scenario == "exit" and not a.launcher_kills:
        cmd += ["--mca", "orte_allowed_exit_without_sync", "1"]
    cmd += [a.program, a.scenario, a.collective]
    print("running:", " ".join(cmd), flush=True)

    # A bound with room for start-up and MPI_Abort's teardown on 2 busy
    # cores; the point is that it is finite.
    bound = timeout + 6
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=bound + 10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        print(out + err)
        print(f"FAIL: the job was still running after {bound + 10:.0f} s")
        return 1
    elapsed = time.monotonic() - start
    print(out + err)
    print(f"exit status {proc.returncode}, {elapsed:.1f} s "
          f"(timeout {timeout:g} s, bound {bound:g} s)")

    problems = []
    if proc.returncode == 0:
        problems.append("the job exited 0")
    if elapsed > bound:
        problems.append(f"the job took {elapsed:.1f} s, more than {bound:g} s")
    # With 2 ranks rank 0 is the only one waiting; with more, whichever
    # waiting rank aborts first may end the others before they print.
    waiting = "0" if a.np == 2 else "[02-9]"
    if a.scenario == "exit" and a.launcher_kills:
        expected = r"process rank 1 with PID \d+ on\s+node \S+ exiting improperly"
    elif COLLECTIVES[a.collective] is None:
        expected = (rf"kiln: rank {waiting} of {a.np}: the other ranks did not "
                    rf"reach the end of the job within [0-9.]+ s")
    else:
        expected = (rf"kiln: rank {waiting} of {a.np}: unavailable: mpi "
                    rf"{COLLECTIVES[a.collective]} on rank {waiting} of {a.np}: "
                    rf".*timed out after [0-9.]+ s waiting for the other ranks")
    if not re.search(expected, err):
        problems.append(f"stderr lacks /{expected}/")

    # mpirun has returned: no rank may outlive it.
    deadline = time.monotonic() + 3
    while leftovers(a.program, proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    stray = leftovers(a.program, proc.pid)
    for pid in stray:
        os.kill(pid, signal.SIGKILL)
    if stray:
        problems.append(f"processes left running: {stray}")

    for problem in problems:
        print("FAIL:", problem)
    if not problems:
        print("ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
