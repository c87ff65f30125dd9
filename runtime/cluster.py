"""A TensorFlow cluster to run placements on: local worker processes, or the hosts of a cluster spec.

:class:`LocalWorkers` starts N ``tf.distribute.Server`` processes on this machine (module
:mod:`dplace.runtime.worker`): each pinned to its own cores with 1 intra-op and 1 inter-op thread, on
ports chosen free, bound to loopback only (TensorFlow's gRPC server binds the wildcard address, hard-coded;
a small ``LD_PRELOAD`` shim, ``loopback_bind.c`` compiled once into the user's cache, turns it into
loopback, and :func:`listening` checks it from ``/proc`` after start: a worker found listening beyond
loopback is an error). Workers are stopped on exit, on Ctrl-C and when one dies; each also dies with
its parent (``PR_SET_PDEATHSIG`` and a closed standard input).

:func:`read_cluster_spec` reads a spec of real hosts (TF_CONFIG's ``cluster`` form). The client never
listens: it drives the cluster through a TF1 session whose master is task 0 (``grpc://HOST:PORT``).
"""
from __future__ import annotations

import hashlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dplace.errors import DplaceError, InvalidInstanceError

SHIM_SOURCE = Path(__file__).with_name("loopback_bind.c")
READY_TIMEOUT_S = 300.0  # TensorFlow's import takes 5-30 s per process on a loaded 2-core box
# Worker environment: TensorFlow's BFC allocator on the CPU keeps the statistics that
# ``get_memory_info`` reads (the default CPU allocator keeps none: current and peak stay 0). oneDNN stays
# as in the client: with it off in the workers only, ResNet-50's loss differed from the client's
# single-device step by 2e-4 at step 1 and 1.3 % at step 2 (other conv kernels); with it on, equal.
WORKER_ENV = {"TF_CPU_ALLOCATOR_USE_BFC": "true", "TF_CPP_MIN_LOG_LEVEL": "2"}


LOST_WORKER_WAIT_S = 2.0  # how long a lost connection waits for a local worker's death to show


class ClusterError(DplaceError):
    """A worker could not start (port in use, no loopback binding) or died."""


@dataclass
class Cluster:
    """Tasks of one TensorFlow job and, per instance device, the TensorFlow device it maps to."""

    tasks: list[str]  # HOST:PORT per task
    job: str = "worker"
    devices: dict[str, str] = field(default_factory=dict)  # instance device name -> TF device string
    local: "LocalWorkers | None" = None

    @property
    def target(self) -> str:
        return "grpc://" + self.tasks[0]

    def task_device(self, task: int, kind: str = "CPU", index: int = 0) -> str:
        return f"/job:{self.job}/replica:0/task:{task}/device:{kind}:{index}"

    def map_devices(self, names: list[str]) -> "Cluster":
        """``self`` with instance device ``names[i]`` on the i-th task's CPU:0 unless the spec named
        devices already (then every name must be among them)."""
        if self.devices:
            missing = [n for n in names if n not in self.devices]
            if missing:
                raise InvalidInstanceError(f"cluster spec: devices has no entry for instance device {missing[0]!r}")
            return self
        if len(names) > len(self.tasks):
            raise InvalidInstanceError(f"cluster: the instance has {len(names)} devices but job {self.job!r} has "
                                       f"{len(self.tasks)} task(s)")
        return Cluster(self.tasks, self.job, {n: self.task_device(i) for i, n in enumerate(names)}, self.local)

    def check_alive(self, wait_s: float = 0.0) -> None:
        """Raise the one error naming the local worker that died (:meth:`LocalWorkers.check_alive`).
        ``wait_s``: after a TensorFlow error of a lost connection (Unavailable, Aborted, ...), wait up to
        this long for a worker's death to show: a killed process's sockets close before it can be waited
        for, so under load the connection's error can come first (seen: "connection reset" instead of
        "worker 1 ... died"). Returns when no local worker died (the caller raises the connection's error)."""
        if self.local is None:
            return
        deadline = time.monotonic() + wait_s
        while True:
            self.local.check_alive()
            if time.monotonic() >= deadline:
                return
            time.sleep(0.02)


def read_cluster_spec(path: str) -> Cluster:
    """A cluster from a JSON file: ``{"cluster": {"worker": ["host:port", ...]}}`` (TF_CONFIG's form),
    or the inner ``{"worker": [...]}``; optional ``"devices": {"CPU:0": "/job:worker/replica:0/task:0/
    device:GPU:0", ...}`` maps instance devices to TensorFlow devices (default: device i on task i's CPU:0)."""
    from dplace.instance.io import read_json

    data = read_json(path, "cluster spec")
    if not isinstance(data, dict):
        raise InvalidInstanceError(f"cluster spec {path!r}: must be a JSON object, got {type(data).__name__}")
    spec = data.get("cluster", data)
    if not isinstance(spec, dict):
        raise InvalidInstanceError(f"cluster spec {path!r}: 'cluster' must be an object")
    jobs = {k: v for k, v in spec.items() if k != "devices"}
    if len(jobs) != 1:
        raise InvalidInstanceError(f"cluster spec {path!r}: needs exactly one job, got {sorted(jobs) or 'none'}")
    job, tasks = next(iter(jobs.items()))
    if not isinstance(tasks, list) or not tasks or not all(isinstance(t, str) and t.rsplit(":", 1)[-1].isdigit()
                                                            for t in tasks):
        raise InvalidInstanceError(f"cluster spec {path!r}: job {job!r} must list tasks as 'host:port', got {tasks!r}")
    devices = data.get("devices", spec.get("devices")) or {}
    if not isinstance(devices, dict) or not all(isinstance(v, str) and v.startswith("/job:") for v in devices.values()):
        raise InvalidInstanceError(f"cluster spec {path!r}: 'devices' must map instance devices to "
                                   "'/job:...' device strings")
    return Cluster(list(tasks), str(job), dict(devices))


# ------------------------------------------------------------------------------ loopback only
def shim_path() -> Path:
    """The compiled ``loopback_bind`` shim, built once per source version into the user's cache."""
    src = SHIM_SOURCE.read_bytes()
    tag = hashlib.sha256(src).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dplace"
    out = cache / f"loopback_bind-{tag}.so"
    if out.exists():
        return out
    cache.mkdir(parents=True, exist_ok=True)
    cc = os.environ.get("CC", "cc")
    fd, tmp = tempfile.mkstemp(prefix="loopback_bind-", suffix=".so", dir=cache)
    os.close(fd)
    try:
        proc = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", tmp, str(SHIM_SOURCE), "-ldl"],
                              capture_output=True, text=True)
    except OSError as exc:
        os.unlink(tmp)
        raise ClusterError(f"workers: cannot build the loopback shim (C compiler {cc!r}: {exc.strerror}); "
                           "without it TensorFlow's servers would listen on every interface") from None
    if proc.returncode != 0:
        os.unlink(tmp)
        first = (proc.stderr.strip().splitlines() or ["?"])[0]
        raise ClusterError(f"workers: cannot build the loopback shim with {cc!r}: {first}")
    os.replace(tmp, out)
    return out


def _socket_inodes(pid: int) -> set[str]:
    out = set()
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            link = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            out.add(link[8:-1])
    return out


def _address(hex_addr: str) -> str:
    ip, port = hex_addr.split(":")
    raw = bytes.fromhex(ip)
    if len(raw) == 4:
        return f"{socket.inet_ntop(socket.AF_INET, raw[::-1])}:{int(port, 16)}"
    raw = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))  # /proc keeps each 32-bit word host-order
    return f"[{socket.inet_ntop(socket.AF_INET6, raw)}]:{int(port, 16)}"


def listening(pid: int) -> list[str]:
    """Addresses ``ip:port`` on which process ``pid`` listens (TCP, from /proc/net/tcp and tcp6)."""
    inodes = _socket_inodes(pid)
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 9 and cols[3] == "0A" and cols[9] in inodes:  # 0A: LISTEN
                out.append(_address(cols[1]))
    return out


def is_loopback(address: str) -> bool:
    host = address.rsplit(":", 1)[0].strip("[]")
    return host.startswith("127.") or host in ("::1", "::ffff:127.0.0.1") or host.startswith("::ffff:127.")


# ------------------------------------------------------------------------------ local workers
def free_ports(n: int) -> list[int]:
    """``n`` distinct ports free on 127.0.0.1 now (another process may take one before a worker binds
    it: :meth:`LocalWorkers.start` then tries new ones)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class LocalWorkers:
    """N local worker processes; a context manager (``with LocalWorkers(2) as w: w.cluster``) that
    stops every one of them on exit, also on an exception or Ctrl-C."""

    def __init__(self, n: int, *, cores: list[list[int]] | None = None, threads: int = 1,
                 ports: list[int] | None = None, ready_timeout_s: float = READY_TIMEOUT_S,
                 inter_threads: int | None = None):
        if n < 1:
            raise InvalidInstanceError(f"--workers must be >= 1, got {n}")
        have = sorted(os.sched_getaffinity(0))
        self.n = n
        self.cores = cores or [[have[i % len(have)]] for i in range(n)]
        self.shared_cores = n > len(have)  # more workers than cores: some share one
        self.threads = threads
        self.inter_threads = inter_threads or threads  # inter-op threads (the pool that serves transfers too)
        self.ports = ports
        self.ready_timeout_s = ready_timeout_s
        self.procs: list[subprocess.Popen] = []
        self._stopped: list[subprocess.Popen] = []  # every worker stop() ended (for checks)
        self._stopping = False  # stop() runs: exits are not deaths
        self.died: tuple[int, int, int] | None = None  # (task, pid, exit code) of the first worker that died
        self.cluster: Cluster | None = None
        self._logs: list[Any] = []

    # -- lifetime
    def __enter__(self) -> "LocalWorkers":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> Cluster:
        shim = shim_path()
        fixed = self.ports is not None
        for attempt in range(1 if fixed else 3):
            ports = list(self.ports) if fixed else free_ports(self.n)
            try:
                self._spawn(ports, shim)
                break
            except _PortTaken as exc:
                self.stop()
                if fixed or attempt == 2:
                    raise ClusterError(f"worker {exc.task}: port {exc.port} on 127.0.0.1 is in use ({exc.msg})") from None
        pids = [p.pid for p in self.procs]
        for i, pid in enumerate(pids):
            wide = [a for a in listening(pid) if not is_loopback(a)]
            if wide:
                self.stop()
                raise ClusterError(f"worker {i}: listens beyond loopback on {wide[0]}; stopped")
        return self.cluster

    def _spawn(self, ports: list[int], shim: Path) -> None:
        tasks = [f"localhost:{p}" for p in ports]
        env = dict(os.environ, **WORKER_ENV)
        env["LD_PRELOAD"] = " ".join(x for x in (str(shim), os.environ.get("LD_PRELOAD", "")) if x)
        self.procs, self._logs, self._stopping = [], [], False
        try:
            for i in range(self.n):
                log = tempfile.TemporaryFile(prefix=f"dplace-worker{i}-")
                self._logs.append(log)
                cmd = [sys.executable, "-m", "dplace.runtime.worker", "--task", str(i), "--tasks", ",".join(tasks),
                       "--cores", ",".join(map(str, self.cores[i])), "--threads", str(self.threads),
                       "--inter-threads", str(self.inter_threads)]
                self.procs.append(subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                                   env=env, text=True, bufsize=1))
            deadline = time.monotonic() + self.ready_timeout_s
            for i, proc in enumerate(self.procs):
                line = self._readline(i, deadline)
                if line.startswith("error"):
                    msg = line[6:].strip()
                    if "gRPC server" in msg or "in use" in msg.lower():
                        raise _PortTaken(i, ports[i], msg)
                    raise ClusterError(f"worker {i}: {msg}")
                if not line.startswith("ready"):
                    raise ClusterError(f"worker {i}: exited before it was ready (exit code {proc.poll()}): "
                                       f"{self._log_tail(i)}")
        except BaseException:
            self.stop()
            raise
        self.cluster = Cluster(tasks, "worker", {}, self)
        self._watch = threading.Thread(target=self._watchdog, args=(list(self.procs),), daemon=True)
        self._watch.start()

    def _watchdog(self, procs: list[subprocess.Popen]) -> None:
        """When a worker dies, note it and kill the others: a session blocked on the dead one (the master
        would wait for it until the operation timeout) then fails at once, and :meth:`check_alive` names
        the worker that died first."""
        while not self._stopping:
            for i, proc in enumerate(procs):
                code = proc.poll()
                if code is not None:
                    if self._stopping:
                        return
                    if self.died is None:
                        self.died = (i, proc.pid, code)
                    for other in procs:
                        if other.poll() is None:
                            try:
                                other.kill()
                            except ProcessLookupError:
                                pass
                    return
            time.sleep(0.1)

    def _readline(self, i: int, deadline: float) -> str:
        proc = self.procs[i]
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ClusterError(f"worker {i}: not ready after {self.ready_timeout_s:.0f} s")
            r, _, _ = select.select([proc.stdout], [], [], min(left, 1.0))
            if r:
                return proc.stdout.readline().strip()
            if proc.poll() is not None:
                return ""

    def _log_tail(self, i: int) -> str:
        log = self._logs[i]
        log.seek(0)
        lines = [ln for ln in log.read().decode(errors="replace").splitlines() if ln.strip()]
        return lines[-1][:300] if lines else "no output"

    def check_alive(self) -> None:
        """Raise :class:`ClusterError` naming the first worker that exited (after stopping the rest)."""
        died = self.died
        if died is None:
            died = next(((i, p.pid, p.poll()) for i, p in enumerate(self.procs) if p.poll() is not None), None)
            # kept: the stop below empties self.procs, and a caller asking again (a session that then ends
            # with TensorFlow's own error) must hear the same death, not nothing
            if died is not None:
                self.died = died
        if died is not None:
            i, pid, code = died
            how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
            self.stop()
            raise ClusterError(f"worker {i} (pid {pid}) died ({how}); every worker stopped")

    def ask(self, task: int, command: str, timeout_s: float = 30.0) -> str:
        """Send one control command to worker ``task`` and return its answer line."""
        proc = self.procs[task]
        proc.stdin.write(command + "\n")
        proc.stdin.flush()
        return self._readline(task, time.monotonic() + timeout_s)

    def stop(self) -> None:
        """Stop every worker: close its standard input, then SIGTERM, then SIGKILL; wait for each.
        Idempotent, safe from ``finally`` and on Ctrl-C."""
        procs, self.procs = self.procs, []
        self._stopping = True  # the watchdog must not take these exits for deaths
        self._stopped.extend(procs)
        for proc in procs:
            try:
                proc.stdin.close()
            except (OSError, ValueError, BrokenPipeError):
                pass
        for proc in procs:
            for sig, wait in ((None, 2.0), (signal.SIGTERM, 3.0), (signal.SIGKILL, 10.0)):
                if proc.poll() is not None:
                    break
                if sig is not None:
                    try:
                        proc.send_signal(sig)
                    except ProcessLookupError:
                        break
                try:
                    proc.wait(wait)
                except subprocess.TimeoutExpired:
                    continue
            if proc.stdout:
                proc.stdout.close()
        for log in self._logs:
            log.close()
        self._logs = []

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]


class _PortTaken(Exception):
    def __init__(self, task: int, port: int, msg: str):
        super().__init__(msg)
        self.task, self.port, self.msg = task, port, msg


def describe(cluster: Cluster) -> dict[str, Any]:
    return {"tasks": cluster.tasks, "job": cluster.job, "devices": cluster.devices,
            "local": cluster.local is not None,
            "cores": cluster.local.cores if cluster.local else None}


def dumps(cluster: Cluster) -> str:
    return json.dumps(describe(cluster))
