"""Helpers users and our tests share: real models, handler folders, archives, a running server.

What only our tests use lives in `tests/helpers/`.
"""

from modelhost.testing.archives import *  # noqa: F403
from modelhost.testing.handlers import *  # noqa: F403
from modelhost.testing.models import *  # noqa: F403
from modelhost.testing.server import *  # noqa: F403
