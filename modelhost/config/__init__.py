"""The one typed configuration tree: the only reader of config files and environment variables.

Each `Config` field yields its ``MODELHOST_*`` variable, ``--flag`` and properties key, so none
is written twice. Precedence: flags > environment > modelhost.toml > config.properties >
defaults; an empty variable counts as unset.
"""

from modelhost.config.loading import (
    cli_options,
    listen_host,
    listeners,
    load_config,
    properties_file,
)
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
    PRELOADABLE_RUNTIMES,
    CliOption,
    Config,
    env_name,
    flag_name,
)

__all__ = [
    "ADMISSIONS",
    "ENV_PREFIX",
    "EVICTION_POLICIES",
    "LOG_LEVELS",
    "PRELOADABLE_RUNTIMES",
    "SAGEMAKER_OTHERS",
    "THREAD_VARIABLES",
    "CliOption",
    "Config",
    "Explained",
    "cli_options",
    "env_name",
    "flag_name",
    "explain",
    "listen_host",
    "listeners",
    "load_config",
    "outside_variables",
    "properties_file",
    "properties_keys",
]
