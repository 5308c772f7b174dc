"""``server.pool.child``: how a child's end and failures read, and the secrets kept out of them (the
pool's tests show the same words reaching callers from real child processes)."""

from __future__ import annotations

import pytest

from index.catalog.servers import ServerConfig
from server.errors import ChildCrashedError, ServerUnavailableError
from server.pool.child import Child, ServerState, StillStartingError, counting_errors, exit_words, in_flight_words, redact_error

SECRET = "sk-live-0123456789abcdef"


def _config() -> ServerConfig:
    return ServerConfig(name="notes", command="notes-server", env={"NOTES_API_KEY": SECRET})


def test_every_request_in_flight_is_named_when_a_child_exits() -> None:
    assert in_flight_words([]) == ""
    assert in_flight_words(["the call to 'a'"]) == " during the call to 'a'"
    assert in_flight_words(["the call to 'a'", "the call to 'b'"]) == (
        " while it was answering 2 requests (the call to 'a' and the call to 'b')"
    )
    five = [f"the call to '{name}'" for name in "abcde"]
    assert in_flight_words(five) == (
        " while it was answering 5 requests (the call to 'a', the call to 'b', the call to 'c' and 2 more)"
    )


def test_an_exit_without_a_connection_or_requests_reads_as_the_child_s_own() -> None:
    child = Child(name="notes", config=_config())
    assert exit_words(child, None, None) == "it exited on its own (connection closed)"
    child.busy_with.append("the call to 'save'")
    assert exit_words(child, None, None) == "its connection closed during the call to 'save'"


def test_a_failure_is_counted_and_stored_without_the_entry_s_secret() -> None:
    state = ServerState()
    with pytest.raises(ChildCrashedError) as caught, counting_errors(state, _config()):
        raise ChildCrashedError(f"server 'notes' crashed; its last line was: key={SECRET}")
    assert SECRET not in str(caught.value) and SECRET not in (state.last_error or "")
    assert state.errors == 1 and "crashed" in (state.last_error or "")


def test_a_call_that_stops_waiting_for_an_install_is_not_the_child_s_failure() -> None:
    state = ServerState()
    with pytest.raises(StillStartingError), counting_errors(state, _config()):
        raise StillStartingError("server 'notes' is still installing its package: call again")
    assert state.errors == 0 and state.last_error is None


def test_redaction_masks_the_stderr_tail_too() -> None:
    error = ServerUnavailableError("server 'notes' failed to start")
    error.stderr_tail = [f"using key {SECRET}", "bye"]  # type: ignore[attr-defined]
    redacted = redact_error(error, _config())
    assert redacted is error
    assert all(SECRET not in line for line in error.stderr_tail)  # type: ignore[attr-defined]
    assert error.stderr_tail[1] == "bye"  # type: ignore[attr-defined]
