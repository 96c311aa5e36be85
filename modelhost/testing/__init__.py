"""Helpers users and our tests share, by subject:

- `models`    real artifacts trained on scikit-learn's bundled data sets (and other runtimes')
- `handlers`  model folders with MMS handlers and SageMaker inference scripts
- `archives`  archives of model folders
- `server`    a modelhost server running in a subprocess on a free loopback port

Everything is importable from here (`testing.iris_logreg`, `testing.RunningServer`). What only
our tests use (hostile archives, a gated handler, store servers) lives in `tests/helpers/`.
"""

from modelhost.testing.archives import *  # noqa: F403
from modelhost.testing.handlers import *  # noqa: F403
from modelhost.testing.models import *  # noqa: F403
from modelhost.testing.server import *  # noqa: F403
