"""Nothing of a local Ray listens beyond 127.0.0.1: in-process Ray (`vitscale.tune.cluster.connect`)
and a `infra/local/ray-up.sh` cluster. Every listening TCP socket of the processes a test started is
read from `ss -ltnp` and must be on loopback; then, from a network namespace the test creates (a
veth pair, a non-loopback address on each side), a connection to the GCS port must be refused, while
a socket the test binds on 0.0.0.0 is reached the same way (so a refusal means the port is closed to
the network, not that the probe cannot reach the host). The namespace part skips where the machine
does not permit creating one."""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
pytest_plugins = ["fixtures_cluster"]

from vitscale.tune import cluster  # noqa: E402

LOCAL = Path(__file__).resolve().parents[2] / "infra" / "local"


@dataclass(frozen=True)
class Listener:
    host: str
    port: int
    pid: int
    name: str


def _parents() -> dict[int, int]:
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    return parents


def _args(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").replace("\0", " ")
    except OSError:
        return ""


def started_by(roots: set[int], marker: str | None = None) -> set[int]:
    """`roots`, every process whose arguments hold `marker` (a Ray session dir), and descendants."""
    parents = _parents()
    tree = set(roots) | ({p for p in parents if marker in _args(p)} if marker else set())
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if pid not in tree and parent in tree:
                tree.add(pid)
                grew = True
    return tree


def listeners(pids: set[int]) -> list[Listener]:
    """The listening TCP sockets (`ss -ltnpH`) that any of `pids` holds."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        fields = line.split()
        host, _, port = fields[3].rpartition(":")
        for name, pid in re.findall(r'\("([^"]*)",pid=(\d+)', line):
            if int(pid) in pids:
                found.append(Listener(host.strip("[]"), int(port), int(pid), name))
    return found


def on_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1, or an IPv4-mapped loopback (`::ffff:127.0.0.1`, how gRPC's IPv6 sockets
    bound to 127.0.0.1 show); never `*`, 0.0.0.0 or ::."""
    try:
        address = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return False  # "*": every interface
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


def test_loopback_is_what_ss_shows_for_127_and_mapped_addresses_only():
    assert on_loopback("127.0.0.1") and on_loopback("::1") and on_loopback("::ffff:127.0.0.1")
    assert not on_loopback("*") and not on_loopback("0.0.0.0") and not on_loopback("::")
    assert not on_loopback("192.0.2.2") and not on_loopback("::ffff:192.0.2.2")


def test_in_process_ray_and_clusters_at_127_stay_on_loopback_and_others_do_not():
    assert cluster.is_loopback(None) and cluster.is_loopback("127.0.0.1:6379")
    assert cluster.is_loopback("localhost:6379") and cluster.is_loopback("[::1]:6379")
    assert cluster.is_loopback("ray://127.0.0.1:10001")
    assert not cluster.is_loopback("10.0.0.5:6379") and not cluster.is_loopback("head.example:6379")


# -- a network namespace on the other end of a veth pair -------------------------------------------
HOST_SIDE, PROBE_SIDE = "198.51.100.1", "198.51.100.2"  # TEST-NET-2, a /30 of its own


@contextmanager
def probe_namespace():
    """A network namespace whose only way to this host is a veth pair: HOST_SIDE here, PROBE_SIDE
    there. Skips where the machine does not permit making one (no root, no `ip`)."""
    if shutil.which("ip") is None:
        pytest.skip("no `ip` command to create a network namespace")
    tag = uuid.uuid4().hex[:6]
    ns, here, there = f"vsprobe{tag}", f"vsh{tag}", f"vsn{tag}"
    made = subprocess.run(["ip", "netns", "add", ns], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot create a network namespace here ({made.stderr.strip()})")
    try:
        for command in (
            ["ip", "link", "add", here, "type", "veth", "peer", "name", there],
            ["ip", "link", "set", there, "netns", ns],
            ["ip", "addr", "add", f"{HOST_SIDE}/30", "dev", here],
            ["ip", "link", "set", here, "up"],
            ["ip", "netns", "exec", ns, "ip", "addr", "add", f"{PROBE_SIDE}/30", "dev", there],
            ["ip", "netns", "exec", ns, "ip", "link", "set", there, "up"],
        ):
            step = subprocess.run(command, capture_output=True, text=True)
            if step.returncode != 0:
                pytest.skip(
                    f"cannot wire a network namespace here ({' '.join(command)}: {step.stderr.strip()})"
                )
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)  # takes the veth pair with it
        subprocess.run(["ip", "link", "del", here], capture_output=True)


def connect_from(ns: str, port: int) -> str:
    """'connected', 'refused' or the error, for a TCP connect from namespace `ns` to HOST_SIDE:port."""
    probe = textwrap.dedent(
        f"""
        import socket
        try:
            socket.create_connection(({HOST_SIDE!r}, {port}), timeout=5).close()
            print("connected")
        except ConnectionRefusedError:
            print("refused")
        except OSError as exc:
            print(exc)
        """
    )
    out = subprocess.run(
        ["ip", "netns", "exec", ns, sys.executable, "-c", probe], capture_output=True, text=True, timeout=60
    )
    return out.stdout.strip() or out.stderr.strip()


def assert_closed_to_the_network(ports: list[int]) -> None:
    """From another network namespace each port is refused; a 0.0.0.0 socket is reached (control)."""
    with probe_namespace() as ns, socket.socket() as control:
        control.bind(("0.0.0.0", 0))
        control.listen()
        assert connect_from(ns, control.getsockname()[1]) == "connected"
        for port in ports:
            assert connect_from(ns, port) == "refused", port


# -- in-process Ray --------------------------------------------------------------------------------
DRIVER = textwrap.dedent(
    """
    import sys, ray
    from vitscale.tune import cluster
    cluster.connect(num_cpus=1)

    @ray.remote
    def ping():
        return 1

    ray.get(ping.remote())  # a worker process, with its own gRPC port
    node = ray._private.worker._global_node
    print("SESSION", node.get_session_dir_path(), node.gcs_address, flush=True)
    sys.stdin.read()  # until the test is done looking
    ray.shutdown()
    """
)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_in_process_ray_listens_on_127_0_0_1_only_and_its_gcs_refuses_the_network():
    env = {k: v for k, v in os.environ.items() if k != cluster.LOOPBACK_ENV}  # vitscale sets it itself
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        line = driver.stdout.readline()
        while not line.startswith("SESSION "):  # connect's own lines come first ("in-process Ray ready ...")
            assert line, "the driver exited before printing its session"
            line = driver.stdout.readline()
        _, session_dir, gcs_address = line.split()
        sockets = listeners(started_by({driver.pid}, session_dir))
        names = {s.name for s in sockets}
        assert {"gcs_server", "raylet"} <= names, sockets  # what Ray's default binds on every interface
        assert [s for s in sockets if not on_loopback(s.host)] == []
        assert gcs_address.startswith("127.0.0.1:")
        gcs_port = int(gcs_address.rpartition(":")[2])
        raylet_ports = [s.port for s in sockets if s.name == "raylet"]
        assert_closed_to_the_network([gcs_port, *raylet_ports])
    finally:
        driver.communicate("", timeout=120)
    assert driver.returncode == 0


# -- infra/local/ray-up.sh -------------------------------------------------------------------------
def cluster_processes(temp_dir: str) -> set[int]:
    """Every process of the ray-up.sh cluster at temp_dir: its recorded sessions and descendants."""
    state = Path(temp_dir, "vitscale-cluster.env").read_text()
    sids = set(re.search(r'VITSCALE_RAY_SIDS="([^"]*)"', state).group(1).split())
    out = subprocess.run(["ps", "-eo", "pid=,sid="], capture_output=True, text=True, check=True).stdout
    roots = {int(pid) for pid, sid in (line.split() for line in out.splitlines()) if sid in sids}
    return started_by(roots, f"={temp_dir}/")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_ray_up_cluster_listens_on_127_0_0_1_only_and_refuses_the_network(ray_cluster):
    sockets = listeners(cluster_processes(ray_cluster.temp_dir))
    assert len({s.pid for s in sockets if s.name == "raylet"}) == 2, sockets  # the head and worker 1
    assert "gcs_server" in {s.name for s in sockets}
    assert [s for s in sockets if not on_loopback(s.host)] == []
    gcs_port = int(ray_cluster.gcs_address.rpartition(":")[2])
    dashboard_port = int(ray_cluster.dashboard_url.rpartition(":")[2])
    assert {gcs_port, dashboard_port} <= {s.port for s in sockets}
    assert_closed_to_the_network([gcs_port, dashboard_port])


def test_ray_up_refuses_an_open_cluster_without_authentication_in_one_line(tmp_path):
    proc = subprocess.run(
        [str(LOCAL / "ray-up.sh"), "--open", "--auth", "disabled", "--temp-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stdout == ""
    [line] = proc.stderr.splitlines()
    assert line.startswith("error: --open with --auth disabled") and "token" in line
    assert list(tmp_path.iterdir()) == []  # refused before anything started
