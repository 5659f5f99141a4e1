"""The coding CLIs memstream serves: one registry every place reads (the hook, install, capture, recall, the CLI).

A leaf: the standard library only, so ``memstream hook`` (which must start fast) can read it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Host:
    """One coding CLI."""

    #: As ``memstream hook``, ``install`` and ``uninstall`` name it.
    name: str
    #: Its session files' format, as ``memstream ingest --llm`` and ``capture.model.Source`` name it.
    llm_source: str
    #: Events after which its hook captures the session file.
    capture_events: tuple[str, ...]
    #: The SessionStart sources that get the [MEMORY] block; empty: it has no SessionStart hook.
    session_start: frozenset[str] = frozenset()
    #: Other names its SessionStart hook may be called by.
    aliases: tuple[str, ...] = ()
    #: Where ``install`` may write its hooks: the user's config, a project's.
    install_scopes: tuple[str, ...] = ("user", "project")
    #: The CLI's own variable for its home (``CODEX_HOME``), and the folder under it the CLI uses as its
    #: home (Gemini's ``GEMINI_CLI_HOME`` stands for the user's home: it reads ``$GEMINI_CLI_HOME/.gemini``).
    home_env: str = ""
    home_under: str = ""

    def home_from(self, value: str) -> str | None:
        """The CLI's home, given its home variable's ``value`` (None: unset, the CLI uses its default)."""
        if not value:
            return None
        return f"{value.rstrip('/')}/{self.home_under}" if self.home_under else value

    @property
    def session_root(self) -> str:
        """The Settings field of its home folder (``MEMSTREAM_<SOURCE>_DIR``, ``--<source>-dir``)."""
        return f"{self.llm_source}_dir"

    @property
    def events(self) -> tuple[str, ...]:
        """The events ``install`` registers the hook for: capture events, then SessionStart if it has one."""
        return self.capture_events + (("SessionStart",) if self.session_start else ())


_EVERY_START = frozenset({"startup", "resume", "clear", "compact"})

#: Every supported host, in the order help texts list them.
HOSTS: tuple[Host, ...] = (
    Host("claude-code", "claude", ("Stop", "SessionEnd"), _EVERY_START, ("claude",), home_env="CLAUDE_CONFIG_DIR"),
    Host("codex", "codex", ("Stop",), _EVERY_START, home_env="CODEX_HOME"),
    Host(
        "gemini",
        "gemini",
        ("AfterAgent", "SessionEnd"),
        frozenset({"startup", "resume", "clear"}),
        ("gemini-cli",),
        home_env="GEMINI_CLI_HOME",
        home_under=".gemini",
    ),
    # Kimi CLI reads hooks from its user config only; KIMI_SHARE_DIR moves its ~/.kimi.
    Host("kimi", "kimi", ("Stop", "SessionEnd"), install_scopes=("user",), home_env="KIMI_SHARE_DIR"),
)
BY_NAME: dict[str, Host] = {host.name: host for host in HOSTS}
#: The hosts' names, as ``memstream hook`` and ``memstream install`` take them.
NAMES: tuple[str, ...] = tuple(BY_NAME)
#: The session formats, as ``memstream ingest --llm`` takes them; each has a ``--<source>-dir`` root.
LLM_SOURCES: tuple[str, ...] = tuple(host.llm_source for host in HOSTS)


def find(name: str) -> Host | None:
    """The host called ``name`` or one of its aliases."""
    return BY_NAME.get(name) or next((host for host in HOSTS if name in host.aliases), None)
