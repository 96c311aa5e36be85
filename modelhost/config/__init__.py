"""The one typed configuration tree: the only reader of config files and environment variables.

Each field of `Config` carries its help text and, where they exist, its MMS/TorchServe
``config.properties`` key and its SageMaker variables. From those fields come, never written
twice, the ``MODELHOST_<FIELD>`` variables, the ``--field-name`` flags and the properties mapping.

Precedence, highest first: flags > environment > modelhost.toml > config.properties > defaults.
An empty environment variable counts as unset.

The table is `settings.py`; reading and checking the layers, `loading.py`; what MMS, TorchServe
and SageMaker users bring along, `migration.py`.
"""

from modelhost.config.loading import cli_options, load_config
from modelhost.config.migration import (
    SAGEMAKER_OTHERS,
    THREAD_VARIABLES,
    Explained,
    explain,
    outside_variables,
    properties_keys,
)
from modelhost.config.settings import (
    ADMISSIONS,
    ENV_PREFIX,
    EVICTION_POLICIES,
    LOG_LEVELS,
    OPTIONAL_RUNTIMES,
    CliOption,
    Config,
    env_name,
)

__all__ = [
    "ADMISSIONS",
    "ENV_PREFIX",
    "EVICTION_POLICIES",
    "LOG_LEVELS",
    "OPTIONAL_RUNTIMES",
    "SAGEMAKER_OTHERS",
    "THREAD_VARIABLES",
    "CliOption",
    "Config",
    "Explained",
    "cli_options",
    "env_name",
    "explain",
    "load_config",
    "outside_variables",
    "properties_keys",
]
