"""Developer and CI sessions for the placement monorepo.

`nox` runs the default set (what CI runs); `nox --list` shows every session.
"""

from __future__ import annotations

from pathlib import Path

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.download_python = "never"
nox.options.error_on_missing_interpreters = True
nox.options.reuse_venv = "yes"
nox.options.sessions = ["lint", "typecheck", "tests", "core_alone", "examples"]

PYTHON = "3.11"
ROOT = Path(__file__).parent
CORE = "packages/placement-core"
TEST_DEPS = ["pytest>=8", "hypothesis>=6.100"]

# What each package's test session installs (itself plus the packages it builds on).
PACKAGE_INSTALLS = {
    "core": [CORE],
}
SOURCES = ["noxfile.py", "packages", "tests", "benchmarks", "examples"]


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Ruff lint and format check over the whole tree."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", *SOURCES)
    session.run("ruff", "format", "--check", *SOURCES)


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy --strict (with the pydantic plugin) over every package's sources."""
    session.install("mypy>=1.11", "types-PyYAML", *TEST_DEPS)
    for path in PACKAGE_INSTALLS["core"]:
        session.install("-e", path)
    session.run("mypy", "packages/placement-core/src")


@nox.session(python=PYTHON)
@nox.parametrize("package", list(PACKAGE_INSTALLS))
def tests(session: nox.Session, package: str) -> None:
    """Run one package's test folder (tests/<package>/) against its installed package."""
    session.install(*TEST_DEPS)
    for path in PACKAGE_INSTALLS[package]:
        session.install(path)
    session.run("pytest", f"tests/{package}", *session.posargs)


@nox.session(python=PYTHON)
def core_alone(session: nox.Session) -> None:
    """Build the core wheel, install it alone, prove ray/native are absent, plan the example."""
    dist = session.create_tmp()
    session.install("build")
    session.run("python", "-m", "build", "--wheel", "--outdir", dist, CORE)
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


@nox.session(python=PYTHON)
def examples(session: nox.Session) -> None:
    """Validate and plan every shipped example config with the `placement` CLI."""
    session.install(CORE)
    for config in sorted((ROOT / "examples").glob("*.yaml")):
        session.run("placement", "validate", str(config))
        session.run("placement", "plan", str(config), "--format", "table")


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Run the benchmarks and print tables of timings and ratios."""
    session.install(CORE)
    session.run("python", "benchmarks/bench_core_plan.py", *session.posargs)
