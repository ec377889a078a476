"""Browser attack tests: the browser tests' own fixtures (tests/ui/conftest.py)."""

from tests.ui.conftest import fake, jp_asyncio_loop, jp_server_cleanup

__all__ = ["fake", "jp_asyncio_loop", "jp_server_cleanup"]
