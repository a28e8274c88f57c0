"""The one end-to-end client fixture: a server per test over stdio, started as the module's `lsp` marker asks.

    pytestmark = pytest.mark.lsp(profiles=[...], example="llama3-70b", rooted=True, settings={...}, init={...},
                                 shutdown=True)

`profiles` (default: every profile of tests.support.lsp_e2e.PROFILES) parametrizes the test; `example` copies
examples/<name> as the session's root (else a fresh folder), `rooted=False` starts with no workspace root;
`settings` answer workspace/configuration, `init` is the initializationOptions; `shutdown=False` leaves the
shutdown to the test. Every session must end without an error popup (errors go to the log, never to
window/showMessage). Tests take `client` (the pytest-lsp LanguageClient) or `ctx` (a Ctx)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.support.lsp_e2e import PROFILES, SERVER, Ctx, copy_example, ctx_of, start


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "lsp(**options): how tests/e2e's client fixture starts its server")


def _options(node: Any) -> dict[str, Any]:
    marker = node.get_closest_marker("lsp")
    return dict(marker.kwargs) if marker else {}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "client" in metafunc.fixturenames:
        metafunc.parametrize("client", _options(metafunc.definition).get("profiles", PROFILES), indirect=True)


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, request: pytest.FixtureRequest,
                 tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[None]:
    options, profile = _options(request.node), request.param
    root = tmp_path_factory.mktemp(profile.split("@")[0])
    if options.get("example"):
        root = copy_example(options["example"], root)
    seen = await start(lsp_client, profile, root if options.get("rooted", True) else None,
                       settings=options.get("settings"), init=options.get("init"))
    lsp_client.hp_ctx = Ctx(lsp_client, profile, root, seen)  # type: ignore[attr-defined]
    yield
    if options.get("shutdown", True):
        assert [m for m in lsp_client.messages if m.type == types.MessageType.Error] == []
        await lsp_client.shutdown_session()


@pytest.fixture()
def ctx(client: LanguageClient) -> Ctx:
    return ctx_of(client)
