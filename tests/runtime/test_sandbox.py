"""Which variables agents see, where their secrets go, and the bubblewrap command line
around an agent."""

from __future__ import annotations

import json
import stat
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

import agents.egress
import agents.forwarder
from agents.base import AttemptContext
from agents.endpoints import EgressRoutes, egress_routes
from orchestrator.app.plans import chosen_sandbox
from orchestrator.core.plan import AgentSpec, Endpoint, ResolvedPlan, ResolvedSubtask, SandboxSpec
from orchestrator.errors import EnvironmentProblem
from orchestrator.git.invocation import trust_repository
from orchestrator.runtime.attempts import RunFiles, scrub, write_attempt_files
from orchestrator.runtime.sandbox import (
    AgentPlace,
    BwrapSandbox,
    ExecutionSandbox,
    LocalSandbox,
    sandbox_for,
    without_secrets,
)

ENV = {
    "PATH": "/bin",
    "HOME": "/home/u",
    "GITHUB_TOKEN": "t",
    "AWS_SECRET_ACCESS_KEY": "s",
    "DB_PASSWORD": "p",
    "ANTHROPIC_API_KEY": "a",
    "OPENAI_API_KEY": "o",
    "KAIRO_IDEMPOTENCY_KEY": "k",
}


def test_secret_looking_variables_are_withheld_unless_passed() -> None:
    assert without_secrets(ENV, passed=["DB_PASSWORD"], kind="shell") == {
        "PATH": "/bin",
        "HOME": "/home/u",
        "DB_PASSWORD": "p",
        "KAIRO_IDEMPOTENCY_KEY": "k",
    }


def test_an_agent_kind_gets_the_credentials_it_logs_in_with_and_no_others() -> None:
    env = without_secrets(ENV, passed=[], kind="claude-code")
    assert "ANTHROPIC_API_KEY" in env and "OPENAI_API_KEY" not in env
    assert "GITHUB_TOKEN" not in env


def test_an_agent_sent_to_an_endpoint_gets_none_of_its_vendor_s_keys() -> None:
    # The plan's endpoint (a gateway, someone's proxy) must not see the user's own keys:
    # the agent gets the one key_env names instead (agents/endpoints.py).
    env = without_secrets(ENV, passed=[], kind="claude-code", vendor=False)
    assert "ANTHROPIC_API_KEY" not in env and env["PATH"] == "/bin"


def test_a_variable_whose_value_is_a_credential_is_withheld_whatever_its_name() -> None:
    env = {
        **ENV,
        "DATABASE_URL": "postgres://u:PASSWORD1234@host/db",
        "BUILD_LABEL": "ghp_aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4",
        "HOMEPAGE": "https://example.com/shop",
    }
    given = without_secrets(env, passed=["BUILD_LABEL"], kind="shell")
    assert "DATABASE_URL" not in given and given["HOMEPAGE"] == "https://example.com/shop"
    assert given["BUILD_LABEL"] == env["BUILD_LABEL"]  # the plan passes it


KEY = "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe"


def attempt_files(
    tmp_path: Path,
    agent: AgentSpec,
    sandbox: ExecutionSandbox | None = None,
    place: AgentPlace | None = None,
    **environment: str,
) -> RunFiles:
    files = RunFiles(tmp_path / "run" / "a" / "1")
    context = AttemptContext(
        execution_id="e",
        subtask_id="a",
        attempt=1,
        prompt="do it",
        prompt_file=str(files.prompt),
        feedback="",
        files=(),
        worktree=str(tmp_path),
        idempotency_key="k",
        usage_file=str(files.usage),
    )
    write_attempt_files(
        files,
        spec=ResolvedSubtask(id="a", title="a", prompt="do it", agent=agent),
        context=context,
        base_environment={"PATH": "/bin", **environment},
        tmux_socket=None,
        wake_channel="w",
        sandbox=sandbox or LocalSandbox(),
        place=replace(place, run_dir=files.directory)
        if place
        else AgentPlace(tmp_path, files.directory, tmp_path / ".git"),
    )
    return files


def test_the_runner_spec_holds_no_secret_the_credentials_file_its_agent_s_own(
    tmp_path: Path,
) -> None:
    agent = AgentSpec(kind="shell", run="true", env={"ANTHROPIC_API_KEY": "${MY_KEY}"})
    files = attempt_files(tmp_path, agent, MY_KEY=KEY, DEPLOY_TOKEN="deploy-9f8e7d6c")

    spec = json.loads(files.spec.read_text())
    taken = json.loads(files.credentials.read_text())

    assert KEY not in files.spec.read_text() and "DEPLOY_TOKEN" not in spec["env"]
    assert spec["credentials_path"] == str(files.credentials) and spec["env"]["PATH"] == "/bin"
    assert taken == {"env": {"ANTHROPIC_API_KEY": KEY}, "redact": [["ANTHROPIC_API_KEY", KEY]]}
    assert stat.S_IMODE(files.credentials.stat().st_mode) == 0o600


def test_codex_s_endpoint_key_is_a_secret_whatever_the_plan_names_it(tmp_path: Path) -> None:
    # codex reads its endpoint's key from the variable `key_env` names, which may be named
    # and valued like anything else.
    endpoint = Endpoint(url="http://127.0.0.1:8080/v1", key_env="GATEWAY")
    files = attempt_files(tmp_path, AgentSpec(kind="codex", endpoint=endpoint), GATEWAY="plainword")

    assert "GATEWAY" not in json.loads(files.spec.read_text())["env"]
    assert json.loads(files.credentials.read_text())["env"] == {"GATEWAY": "plainword"}


def test_an_agent_with_no_secret_gets_no_credentials_file(tmp_path: Path) -> None:
    files = attempt_files(tmp_path, AgentSpec(kind="shell", run="true"), DEPLOY_TOKEN="d-9f8e7d6c")
    assert "credentials_path" not in json.loads(files.spec.read_text())
    assert not files.credentials.exists()


def test_once_its_runner_ended_an_attempt_s_files_hold_no_secret(tmp_path: Path) -> None:
    files = RunFiles(tmp_path)
    url = 'postgres://u:pa"ss\\word@host/db'  # JSON writes it otherwise than it prints
    files.output.write_text(f"connecting to {url}\n" + "x" * 3_000_000 + KEY)
    files.exit.write_text(json.dumps({"exit_code": 0, "output_tail": f"{url} {KEY}"}))
    files.usage.write_text(json.dumps({"summary": "all fine"}) + "\n")
    files.credentials.write_text("{}")  # its runner never took it
    untouched = files.usage.stat().st_ino

    scrub(files, [("DATABASE_URL", url), ("API_KEY", KEY)])

    output = files.output.read_text()
    assert output.startswith("connecting to [redacted: DATABASE_URL]\n")
    assert output.endswith("x[redacted: API_KEY]") and KEY not in output
    tail = json.loads(files.exit.read_text())["output_tail"]
    assert tail == "[redacted: DATABASE_URL] [redacted: API_KEY]"
    assert files.usage.stat().st_ino == untouched  # nothing to cut out: not rewritten
    assert not files.credentials.exists()


def test_a_scrub_writes_nothing_through_a_link_planted_at_its_temporary_file(
    tmp_path: Path,
) -> None:
    files = RunFiles(tmp_path / "run")
    files.directory.mkdir()
    files.output.write_text(f"the key: {KEY}\n")
    mine = tmp_path / "notes.txt"
    mine.write_text("the user's\n")
    # Where the scrub writes the log anew: an agent's link, which O_TRUNC would follow.
    (files.directory / ".output.log.scrubbed").symlink_to(mine)

    scrub(files, [("API_KEY", KEY)])

    assert mine.read_text() == "the user's\n"
    assert files.output.read_text() == "the key: [redacted: API_KEY]\n"


def test_the_local_sandbox_runs_the_agent_as_it_is() -> None:
    place = AgentPlace(Path("/w"), Path("/r"), Path("/g"))
    assert LocalSandbox().wrap(["claude", "-p"], place) == ["claude", "-p"]


def linked_worktree(tmp_path: Path) -> AgentPlace:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    identity = ["-c", "user.name=a", "-c", "user.email=a@b"]
    subprocess.run(["git", "-C", str(repo), *identity, "commit", "-qm", "i", "--allow-empty"])
    config = repo / ".git" / "config"
    config.write_text(
        config.read_text() + '[remote "origin"]\n\turl = https://user:ghp_token@example.com/r\n'
    )
    worktree = tmp_path / "wt"
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", str(worktree)], check=True)
    trust_repository(repo, repo / ".git", repo / ".git")
    return AgentPlace(
        worktree,
        tmp_path / "run",
        (repo / ".git").resolve(),
        state_dir=tmp_path / "state",
        state_variables=("CLAUDE_CONFIG_DIR",),
        start_commit="a" * 40,
        checkout=repo,
    )


def pairs(argv: list[str], option: str) -> list[tuple[str, str]]:
    return [(argv[i + 1], argv[i + 2]) for i, arg in enumerate(argv) if arg == option]


def test_bwrap_lets_the_agent_write_its_worktree_scratch_and_state_only(tmp_path: Path) -> None:
    place = linked_worktree(tmp_path)
    place.run_dir.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    sandbox = BwrapSandbox(binary="bwrap", network="none", environment={"HOME": str(home)})
    argv = sandbox.wrap(["sh", "-c", "x"], place)

    private = place.git_common_dir / "worktrees" / "wt"
    assert pairs(argv, "--bind") == [
        (str(place.worktree), str(place.worktree)),
        (str(place.scratch), str(place.scratch)),
        (str(place.state_dir), str(place.state_dir)),
        (str(place.scratch / "git"), str(private)),  # a copy: the real one is untouched
    ]
    # its own git: HEAD detached at the start, objects of its own, the repository's borrowed
    assert (place.scratch / "git" / "HEAD").read_text() == "a" * 40 + "\n"
    assert ("GIT_OBJECT_DIRECTORY", str(place.scratch / "objects")) in pairs(argv, "--setenv")
    assert ("CLAUDE_CONFIG_DIR", str(place.state_dir)) in pairs(argv, "--setenv")
    # the git directory read-only, its config without the remote's token
    assert (str(place.git_common_dir), str(place.git_common_dir)) in pairs(argv, "--ro-bind")
    reduced = dict(pairs(argv, "--ro-bind"))[str(place.scratch / "git-config")]
    assert reduced == str(place.git_common_dir / "config")
    assert "ghp_token" not in (place.scratch / "git-config").read_text()
    assert "[core]" in (place.scratch / "git-config").read_text()
    tmpfs = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--tmpfs"]
    for hidden in ("/tmp", "/run", str(home), str(place.checkout)):
        assert hidden in tmpfs
    assert argv[argv.index("--remount-ro") + 1] == str(place.checkout)
    for option in ("--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-net"):
        assert option in argv
    assert argv[argv.index("--uid") + 1] != "0" and "--die-with-parent" in argv
    assert argv[-4:] == ["--", "sh", "-c", "x"]


def test_under_endpoint_egress_runs_outside_and_the_forwarder_inside(tmp_path: Path) -> None:
    place = linked_worktree(tmp_path)
    routes = EgressRoutes(proxy=3128, allow=("api.anthropic.com:443",), hold=("ANTHROPIC_API_KEY",))
    argv = BwrapSandbox(binary="bwrap").wrap(["claude", "-p"], replace(place, egress=routes))
    socket = str(place.run_dir / "egress" / "egress.sock")
    egress, inside = argv.index("bwrap"), argv.index("--", argv.index("bwrap"))
    assert argv[1:egress] == [
        "-I", "-S", str(Path(agents.egress.__file__).absolute()), "--socket", socket,
        "--proxy", "3128", "--allow", "api.anthropic.com:443", "--hold", "ANTHROPIC_API_KEY", "--",
    ]  # fmt: skip
    assert argv[inside + 2 :] == [
        "-I", "-S", str(Path(agents.forwarder.__file__).absolute()), "--socket", socket,
        "--listen", "3128", "--", "claude", "-p",
    ]  # fmt: skip
    sandbox = argv[egress:inside]
    assert "--unshare-net" in sandbox
    egress_dir = str(place.run_dir / "egress")
    assert sandbox[-5:] == ["--ro-bind", egress_dir, egress_dir, "--chdir", str(place.worktree)]
    proxy = sandbox.index("HTTPS_PROXY")
    assert sandbox[proxy - 1 : proxy + 2] == ["--setenv", "HTTPS_PROXY", "http://127.0.0.1:3128"]


def test_an_agent_with_no_model_to_reach_gets_no_network_and_no_egress(tmp_path: Path) -> None:
    place = replace(linked_worktree(tmp_path), egress=egress_routes(AgentSpec(run="x"), {}))
    argv = BwrapSandbox(binary="bwrap").wrap(["sh", "-c", "x"], place)
    assert argv[0] == "bwrap" and "--unshare-net" in argv and "HTTPS_PROXY" not in argv


def test_behind_egress_the_runner_holds_an_endpoint_s_key_and_the_agent_s_url_is_local(
    tmp_path: Path,
) -> None:
    endpoint = Endpoint(url="https://gateway.example/anthropic", key_env="GATEWAY")
    agent = AgentSpec(kind="claude-code", endpoint=endpoint)
    place = linked_worktree(tmp_path)
    files = attempt_files(tmp_path, agent, BwrapSandbox(binary="bwrap"), place, GATEWAY=KEY)

    spec = json.loads(files.spec.read_text())
    assert spec["env"]["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:3127/anthropic"
    argv = spec["argv"]
    assert argv[argv.index("--reverse") + 1] == "3127=https://gateway.example/anthropic"
    assert argv[argv.index("--hold") + 1] == "ANTHROPIC_API_KEY"
    assert "--allow" not in argv  # not its vendor's API: the plan sends it elsewhere
    # the key reaches egress through the runner's credentials file, never the spec
    assert json.loads(files.credentials.read_text())["env"] == {"ANTHROPIC_API_KEY": KEY}
    assert KEY not in files.spec.read_text()


def test_a_planted_link_in_the_scratch_is_removed_not_followed(tmp_path: Path) -> None:
    place = linked_worktree(tmp_path)
    (place.scratch / "git").mkdir(parents=True)
    mine = tmp_path / "notes.txt"
    mine.write_text("the user's\n")
    (place.scratch / "git-config").symlink_to(mine)
    (place.scratch / "git" / "HEAD").symlink_to(mine)

    BwrapSandbox(binary="bwrap").wrap(["true"], place)

    assert mine.read_text() == "the user's\n"


def test_a_missing_bwrap_is_an_environment_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(EnvironmentProblem, match="bubblewrap is not installed"):
        sandbox_for(SandboxSpec(kind="bwrap"))
    assert sandbox_for(SandboxSpec()).kind == "local"


def plan_with(sandbox: SandboxSpec) -> ResolvedPlan:
    subtask = ResolvedSubtask(id="a", title="a", prompt="p", agent=AgentSpec(kind="shell", run="x"))
    return ResolvedPlan(name="p", sandbox=sandbox, subtasks=(subtask,))


def test_a_plan_naming_no_sandbox_gets_bwrap_where_it_runs_and_is_told_why_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chosen, said = chosen_sandbox(plan_with(SandboxSpec(kind="auto")))
    assert (chosen.sandbox.kind, said) == ("bwrap", ())  # bubblewrap runs on this machine

    monkeypatch.setenv("PATH", "/nonexistent")
    chosen, (warning,) = chosen_sandbox(plan_with(SandboxSpec(kind="auto")))
    assert chosen.sandbox.kind == "local"
    assert warning.startswith("agents run without a sandbox, as you: bubblewrap is not installed")


def test_a_plan_choosing_local_is_warned_of_and_one_choosing_bwrap_is_not() -> None:
    _, (warning,) = chosen_sandbox(plan_with(SandboxSpec(kind="local")))
    assert "agents run as you" in warning
    assert chosen_sandbox(plan_with(SandboxSpec(kind="bwrap")))[1] == ()


def test_a_check_reaches_the_network_of_its_step() -> None:
    from orchestrator.core.plan import NetworkSpec
    from orchestrator.runtime.check_sandbox import check_network
    from orchestrator.runtime.processes import CHECKS

    spec = SandboxSpec(kind="bwrap", network=NetworkSpec(checks="all", setup="none"))
    assert {check: check_network(spec, check) for check in CHECKS} == {
        "verify": "all",
        "integration": "all",
        "setup": "none",
    }
    assert check_network(SandboxSpec(kind="bwrap"), "verify") == "none"  # the default
    assert check_network(SandboxSpec(kind="bwrap"), "setup") == "all"
