"""A mixer or regime that lacks a member of its protocol (models.protocols), or a declaration that
lacks a fact (models.facts), fails where it is registered, in one line naming what is missing: at
the decorator, at `declare_*`, at the first import of a declared class, and through the CLI (a
broken VITSCALE_PLUGINS file: one line on stderr, exit 2, no traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import BaseModel

from vitscale.errors import UserError
from vitscale.models.facts import MixerFacts, RegimeFacts
from vitscale.models.protocols import Mixer, Regime, protocol_members
from vitscale.models.registry import (
    MIXERS,
    PLUGINS_ENV,
    REGIMES,
    declare_mixer,
    register_mixer,
    register_regime,
)

PLATFORM = Path(__file__).resolve().parents[2] / "platform"


class HalfSettings(BaseModel):
    depth_scale: float = 1.0


class NoForward:
    """Looks like a mixer but has no forward (and declares no wants_pos_embed)."""

    def __init__(self, config) -> None:
        self.config = config


class NoGuard:
    """A regime without backward_guard, training_flops, or its class attributes."""

    def forward(self, x, grid_hw):
        return x

    def forward_flops(self, outside, unit, nfe=None):
        return outside + unit


def test_every_registered_class_meets_its_protocol() -> None:
    for registry, protocol in ((MIXERS, Mixer), (REGIMES, Regime)):
        for name in registry:
            cls = registry[name]  # a declared class is checked as it is imported here
            assert all(hasattr(cls, m) for m in protocol_members(protocol)), name
            assert isinstance(registry.facts()[name], MixerFacts if protocol is Mixer else RegimeFacts)


def test_the_protocols_name_the_members_the_platform_calls() -> None:
    assert protocol_members(Mixer) == ["forward"]
    assert set(protocol_members(Regime)) == {
        "last_nfe",
        "flops_depend_on_values",
        "forward",
        "forward_flops",
        "training_flops",
        "backward_guard",
    }


def test_a_decorated_mixer_without_forward_fails_in_one_line_naming_what_it_lacks() -> None:
    with pytest.raises(UserError) as caught:
        register_mixer("noforward", settings=HalfSettings)(NoForward)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("mixer 'noforward' (")
    assert "lacks forward, wants_pos_embed" in message and "Mixer protocol" in message
    assert "noforward" not in MIXERS and "noforward" not in MIXERS.settings()


def test_a_decorated_regime_lacking_members_fails_naming_each() -> None:
    with pytest.raises(UserError, match=r"regime 'noguard' .*lacks last_nfe, flops_depend_on_values, "):
        register_regime("noguard")(NoGuard)
    assert "noguard" not in REGIMES


def test_a_declaration_lacking_a_required_fact_or_spelling_one_wrong_fails_in_one_line() -> None:
    with pytest.raises(UserError, match=r"^mixer 'undeclared': its declaration lacks wants_pos_embed"):
        declare_mixer("undeclared", "somewhere:Nothing")
    with pytest.raises(UserError, match=r"^mixer 'misspelt': unknown declaration key\(s\) colour; "):
        declare_mixer("misspelt", "somewhere:Nothing", wants_pos_embed=True, colour="#000000")
    assert "undeclared" not in MIXERS and "misspelt" not in MIXERS


def test_a_declared_class_is_checked_when_first_imported() -> None:
    declare_mixer("lazyhalf", f"{__name__}:NoForward", wants_pos_embed=True)
    try:
        assert "lazyhalf" in MIXERS  # its name and facts are known without importing it
        assert MIXERS.fact("lazyhalf", "wants_pos_embed") is True
        with pytest.raises(UserError, match=r"mixer 'lazyhalf' \(.*NoForward\) .*lacks forward \("):
            MIXERS["lazyhalf"]
    finally:
        MIXERS.unregister("lazyhalf")


def test_a_broken_plugin_ends_the_cli_in_one_line_with_exit_2(tmp_path) -> None:
    plugin = tmp_path / "broken_plugin.py"
    plugin.write_text(
        textwrap.dedent(
            """
            from vitscale.models.registry import register_mixer

            @register_mixer("broken")
            class Broken:
                def __init__(self, config):
                    self.config = config
            """
        )
    )
    env = {**os.environ, PLUGINS_ENV: str(plugin), "PYTHONPATH": str(PLATFORM)}
    proc = subprocess.run(
        [sys.executable, "-m", "vitscale", "model", "info", "--help"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: mixer 'broken' (vitscale_plugin_broken_plugin.Broken) does not meet the Mixer protocol: "
        "it lacks forward, wants_pos_embed (see vitscale.models.protocols.Mixer)"
    ]
