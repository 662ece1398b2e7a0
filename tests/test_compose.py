"""compose.yaml cannot be run here (no Docker engine), so it is checked by reading it: every
service our image runs calls a command the project really has, and the wiring makes sense."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import click
import yaml

from cli.main import main

ROOT = Path(__file__).resolve().parents[1]


def unset(value: object) -> str:
    """What a compose value is when its variable is unset: ``${NAME:-default}`` is default."""
    text = str(value)
    found = re.fullmatch(r"\$\{[A-Z_]+:-(.*)\}", text)
    return found.group(1) if found else text


def compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def resolve(argv: list[str]) -> click.Command:
    """The click command ``argv`` (after ``pylota``) names; fails if any word is unknown."""
    command: click.Command = main
    ctx = click.Context(main)
    for word in argv:
        if word.startswith("-"):
            break
        assert isinstance(command, click.Group), f"{command.name} has no subcommand {word}"
        sub = command.get_command(ctx, word)
        assert sub is not None, f"pylota has no command {' '.join(argv)}"
        command = sub
    return command


def test_every_project_command_exists():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["pylota"] == "cli.main:main"
    services = compose()["services"]
    ours = {name: s for name, s in services.items() if s.get("build") == "."}
    assert set(ours) == {"migrate", "front", "worker", "batch-worker", "smtp"}
    for name, service in ours.items():
        argv = service["command"]
        assert argv[0] == "pylota", name
        command = resolve(argv[1:])
        options = {o for p in command.params for o in getattr(p, "opts", [])}
        for flag in (a.split("=")[0] for a in argv[1:] if a.startswith("--")):
            assert flag in options, f"{name}: pylota {argv[1]} has no {flag}"
    health = services["worker"]["healthcheck"]["test"]
    assert health[1] == "pylota"
    assert "--check" in {o for p in resolve(health[2:]).params for o in p.opts}


def test_services_wait_for_what_they_need():
    services = compose()["services"]
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("front", "worker", "batch-worker", "smtp"):
        needs = services[name]["depends_on"]
        assert needs["migrate"]["condition"] == "service_completed_successfully"
        assert needs["redis"]["condition"] == "service_healthy"
        # the same variables everywhere, and nothing that pins a worker to one instance
        assert services[name]["environment"] is services["migrate"]["environment"]
        # and every other variable of .env (PM_SIGNING_SECRET, ...) too: a new user's
        # PM_WEB_BOT_AUTH=on in .env had no effect, since only the listed ones were passed
        assert services[name]["env_file"] == [{"path": ".env", "required": False}]
        assert "container_name" not in services[name]
    assert "ports" not in services["worker"], "workers must scale: --scale worker=N"
    for name, service in services.items():
        if name != "migrate":  # every long-running service comes back after a crash (issue 9)
            assert service.get("restart") in ("unless-stopped", "always"), name
    for name in ("postgres", "redis", "front", "worker", "smtp"):
        assert "healthcheck" in services[name], name


def test_mail_goes_out_through_the_sink_and_comes_in_through_the_listener():
    services = compose()["services"]
    env = services["migrate"]["environment"]
    sink = services["mailpit"]
    published = {p.split(":")[-1] for p in sink["ports"]}
    assert {"1025", "8025"} <= published
    # by default the workers' relay is the sink, on its SMTP port
    relay = (unset(env["PM_SMTP_RELAY_HOST"]), unset(env["PM_SMTP_RELAY_PORT"]))
    assert relay == ("mailpit", "1025")
    assert "mailpit" in services["batch-worker"]["depends_on"]
    listener = services["smtp"]
    assert listener["environment"] is env
    assert listener["command"][:2] == ["pylota", "smtp"]
    assert f"{env['PM_SMTP_LISTEN_PORT']}:{env['PM_SMTP_LISTEN_PORT']}" in listener["ports"]
    assert env["PM_SMTP_LISTEN_HOST"] == "0.0.0.0"  # reachable from outside its container
    assert str(env["PM_SMTP_LISTEN_PORT"]) in " ".join(listener["healthcheck"]["test"])
    for name in ("smtp", "batch-worker"):
        needs = listener["depends_on"] if name == "smtp" else services[name]["depends_on"]
        assert needs["migrate"]["condition"] == "service_completed_successfully"


def test_environment_names_are_settings():
    from shared.config import Settings

    env = compose()["services"]["front"]["environment"]
    fields = {f.upper() for f in Settings.__struct_fields__}
    assert set(env) <= fields
    assert {"DATABASE_URL", "REDIS_URL", "PM_HASH_KEY", "PM_API_HOST"} <= set(env)


def test_dockerfile_copies_the_packages_the_commands_import():
    dockerfile = (ROOT / "Dockerfile").read_text()
    for package in ("cli", "shared", "front", "workers"):
        assert f"COPY {package} ./{package}" in dockerfile
