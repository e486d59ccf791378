"""What the multi-rank end-to-end scripts share: the mpirun command line
(loopback only, --oversubscribe, as root where needed), its environment, and
finding the process of one rank of a job (to kill or stop it)."""
import os
import shutil

MPIRUN = [shutil.which("mpirun") or "mpirun", "--oversubscribe", "--mca",
          "btl", "self,vader", "--mca", "oob_tcp_if_include", "lo"]


def mpi_env(timeout_s):
    """The environment of an mpirun job whose collectives give up after
    `timeout_s` seconds."""
    return dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
                OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                OMPI_MCA_btl_vader_single_copy_mechanism="none",
                KILN_COMM_TIMEOUT_S=str(timeout_s))


def mpi_launcher(ranks, timeout_s):
    """(command prefix, environment) that run a tool as `ranks` MPI ranks,
    passing this process's KILN_* variables (the HIP and RCCL libraries, the
    timeout) on to every rank."""
    env = mpi_env(timeout_s)
    passed = [a for k in sorted(env) if k.startswith("KILN_")
              for a in ("-x", k)]
    return MPIRUN + ["-np", str(ranks)] + passed, env


def _parent_of(pid):
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return 0
    return int(stat[stat.rindex(")") + 2:].split()[1])


def _descends_from(pid, ancestor):
    for _ in range(64):
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
        pid = _parent_of(pid)
    return False


def rank_pid(tool, rank, job_pid):
    """The `tool` process of MPI rank `rank` under mpirun `job_pid` (Linux
    /proc; other tests may run their own jobs at the same time)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
            environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if tool.encode() in cmdline and \
                f"OMPI_COMM_WORLD_RANK={rank}".encode() in environ and \
                _descends_from(int(pid), job_pid):
            return int(pid)
    return None
