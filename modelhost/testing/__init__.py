"""Helpers users and our tests share, by subject:

- `models`    real artifacts trained on scikit-learn's bundled data sets (and other runtimes')
- `handlers`  model folders with MMS handlers and SageMaker inference scripts
- `archives`  archives of model folders, hostile ones included
- `server`    a modelhost server running in a subprocess on a free loopback port

Everything is importable from here as before (`testing.iris_logreg`, `testing.RunningServer`).
"""

from modelhost.testing.archives import *  # noqa: F403
from modelhost.testing.handlers import *  # noqa: F403
from modelhost.testing.models import *  # noqa: F403
from modelhost.testing.server import *  # noqa: F403
