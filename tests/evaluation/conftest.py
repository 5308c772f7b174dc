"""Fixtures shared by the evaluation tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.scripted_openai import ScriptedOpenAI


@pytest.fixture
def llm() -> Iterator[ScriptedOpenAI]:
    """A scripted OpenAI-compatible endpoint on 127.0.0.1; tests set ``llm.handler`` or ``push``."""
    with ScriptedOpenAI() as server:
        yield server
