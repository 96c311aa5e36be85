# ruff: noqa: E501  (a table of test ids: one per line reads better than wrapped strings)
"""Every setting a migrating user can give does what it says or is refused at start.

One row per flag of `serve --help`, per config.properties key modelhost knows, and per outside
variable it reads (SageMaker's, MMS's, the runtimes' thread counts). A row names the test that
observes the setting's effect (most on a real server with real workers), or the value refused at
start and the words of the refusal's way out. Adding a setting without a row fails this suite.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import NamedTuple

import pytest

from modelhost.config import cli_options, load_config, outside_variables, properties_keys
from modelhost.errors import ConfigError

TESTS = Path(__file__).resolve().parents[1]
MIGRATION = "e2e/test_migration_effects.py::"
CONFIG = "config/test_migration_config.py::"


class Refused(NamedTuple):
    """Given this way, the server refuses to start, and the message names `instead`."""

    flags: dict[str, object]
    environ: dict[str, str]
    properties: str
    instead: str


def refused_key(key: str, instead: str) -> Refused:
    return Refused({}, {}, f"{key}=x\n", instead)


# an effect: the test that observes it
EFFECTS: dict[str, str] = {
    "--management-api": "e2e/test_conformance_mms_management.py::test_get_valid_model_answers_one_object_as_mms_does",
    "--sagemaker-contract": "e2e/test_container.py::test_multi_model_mode_keeps_the_contract",
    "--model-store": "e2e/test_remote_stores.py::test_first_invocation_downloads_and_the_next_is_a_hit",
    "--host": "security/test_proxy_and_tls_e2e.py::test_the_server_speaks_tls_with_the_given_certificate",
    "--port": "e2e/test_invoke.py::test_sagemaker_target_model_header_invokes_by_store_path",
    "--memory-budget": "e2e/test_budget.py",
    "--frontend-memory-allowance": "test_app_memory.py::test_frontend_allowance_is_paid_for",
    "--disk-budget": "e2e/test_disk.py::test_an_archive_larger_than_the_disk_budget_is_507",
    "--devices": "e2e/test_devices.py::test_devices_naming_a_device_the_workers_cannot_use_refuses_to_start",
    "--device-budget": "e2e/test_devices.py::test_a_device_budget_smaller_than_the_device_is_the_budget",
    "--fake-devices": "e2e/test_devices.py::test_a_model_moves_to_the_device_on_first_use_and_is_served_there",
    "--workers-per-device": "e2e/test_devices.py::test_workers_per_device_puts_two_copies_of_a_hot_model_on_one_device",
    "--device-batch-size": "e2e/test_devices.py::test_a_model_on_a_device_batches_by_the_device_batch_size",
    "--cache-dir": "e2e/test_disk.py::test_cycling_archives_keeps_the_disk_budget",
    "--allowed-urls": "e2e/test_remote_stores.py::test_post_models_loads_only_from_allowed_urls",
    "--store-timeout-s": "e2e/test_remote_stores.py::test_a_stalled_store_is_504_within_the_store_timeout",
    "--store-attempts": "e2e/test_remote_stores.py::test_store_dying_mid_download_leaves_nothing",
    "--revalidate-interval-s": "e2e/test_remote_stores.py::test_revalidation_fetches_replaced_object",
    "--workers": "e2e/test_scheduling.py::test_hot_model_scales_out_and_in",
    "--fronts": "e2e/test_front_processes.py::test_connections_spread_over_the_fronts_alone",
    "--workers-per-model": MIGRATION + "test_workers_per_model_loads_that_many",
    "--max-workers-per-model": "e2e/test_scheduling.py::test_full_queue_answers_429",
    "--threads-per-worker": "e2e/test_scheduling.py::test_max_concurrency_caps_requests_in_flight_across_models",
    "--scale-in-idle-s": "e2e/test_scheduling.py::test_hot_model_scales_out_and_in",
    "--max-concurrency": "e2e/test_scheduling.py::test_max_concurrency_caps_requests_in_flight_across_models",
    "--job-queue-size": "e2e/test_scheduling.py::test_full_queue_answers_429",
    "--default-response-timeout-s": "e2e/test_scheduling.py::test_request_past_deadline_gets_504",
    "--max-request-size": "e2e/test_invoke.py::test_body_over_the_limit_is_413",
    "--max-concurrent-downloads": "e2e/test_setting_effects.py::test_max_concurrent_downloads_is_a_cap",
    "--eviction-policy": "e2e/test_setting_effects.py::test_the_eviction_policy_given_picks_the_victims",
    "--max-connections": "e2e/test_setting_effects.py::test_max_connections_is_a_cap",
    "--max-rows-per-request": "security/test_row_limit_e2e.py::test_max_rows_per_request_is_413",
    "--max-response-size": MIGRATION + "test_max_response_size_is_413",
    "--batch-size": "e2e/test_scheduling.py::test_custom_handlers_receive_the_waiting_requests_as_one_list",
    "--max-batch-delay-ms": "e2e/test_scheduling.py::test_sklearn_batch_isolates_bad_request",
    "--load-models": "e2e/test_remote_stores.py::test_load_models_all_preloads_the_prefix",
    "--pinned-models": "e2e/test_runtimes_and_manifest.py::test_pinned_models_stay_and_declared_memory_is_reserved",
    "--admission": "cache/test_policy_contract.py::test_admission_keeps_the_hot_set_through_a_scan",
    "--min-residency-s": "cache/test_policy_contract.py::test_lru_equals_a_brute_force_lru",
    "--sizing-names": "e2e/test_sizing.py::test_sizing_names_zero_serves_without_a_curve",
    "--thrash-window-s": "e2e/test_sizing.py::test_thrash_alarm_fires_on_twice_the_room",
    "--idle-unload-s": "e2e/test_runtimes_and_manifest.py::test_idle_models_are_unloaded_pinned_ones_stay",
    "--multi-model": "e2e/test_container.py::test_multi_model_mode_loads_from_opt_ml_models",
    "--single-model": "e2e/test_container.py::test_single_model_mode_serves_opt_ml_model",
    "--management-port": "e2e/test_torchserve.py::test_register_describe_unregister",
    "--management-host": MIGRATION + "test_management_host_binds_the_management_api",
    "--metrics-port": MIGRATION + "test_metrics_address_serves_metrics_on_its_own_port",
    "--metrics-host": MIGRATION + "test_metrics_address_serves_metrics_on_its_own_port",
    "metrics_address": CONFIG + "test_metrics_address_opens_a_metrics_port",
    "--management-token": "http/test_management_auth.py::test_remote_callers_need_the_right_token",
    "--management-token-file": "e2e/test_management_token_file.py::test_a_rotated_management_token_takes_effect_without_a_restart",
    "--forwarded-allow-ips": "security/test_proxy_and_tls_e2e.py::test_forwarded_for_is_believed_from_configured_proxies_only",
    "--ssl-certfile": "security/test_proxy_and_tls_e2e.py::test_the_server_speaks_tls_with_the_given_certificate",
    "--ssl-keyfile": "security/test_proxy_and_tls_e2e.py::test_the_server_speaks_tls_with_the_given_certificate",
    "--drain-timeout-s": "e2e/test_observe_events.py::test_an_open_stream_does_not_hold_a_draining_server",
    "--access-log": "e2e/test_observe_metrics.py::test_the_access_log_has_a_line_per_request",
    "--header-timeout-s": "security/test_floods_e2e.py::test_a_connection_that_never_finishes_its_headers_is_closed",
    "--min-body-rate": "security/test_slow_clients_e2e.py::test_a_body_trickled_below_the_minimum_rate_closes_its_connection",
    "--send-timeout-s": "security/test_slow_clients_e2e.py::test_a_client_that_reads_no_answers_is_cut_off",
    "--max-event-streams": "security/test_floods_e2e.py::test_event_streams_past_cap_are_503",
    "--grpc-front": "e2e/test_grpc_oip.py::test_the_start_line_names_the_front",
    "--grpc-max-streams": "security/test_http2_floods_e2e.py::test_streams_past_the_cap_end_their_connection",
    "--grpc-max-connections": "security/test_http2_floods_e2e.py::test_connections_past_the_cap_are_closed",
    "--grpc-connections-per-s": "security/test_http2_reconnecting_floods_e2e.py::test_an_address_opening_connections_too_fast_is_refused",
    "--grpc-connection-idle-s": "security/test_http2_connection_ages_e2e.py::test_an_idle_connection_is_told_goaway_and_closed",
    "--grpc-connection-age-s": "security/test_http2_connection_ages_e2e.py::test_an_old_connection_is_told_goaway_then_closed",
    "--refuse-pickle": "security/test_refuse_pickle.py::test_pickle_based_artifacts_are_refused_when_asked",
    "--untrusted-workers": "security/test_tenant_trust_e2e.py::test_trusted_and_untrusted_models_never_share_a_worker",
    "--instance-id": "fleet/test_instance_header.py::test_a_refusal_names_the_configured_instance",
    "--worker-load-timeout-s": "faults/test_self_healing_e2e.py::test_hung_load_fails_at_its_deadline",
    "--worker-max-scratch": "security/test_scratch_bound_e2e.py::test_a_model_filling_its_scratch_folder_is_replaced_then_held_back",
    "--worker-max-growth": "faults/test_growing_models_e2e.py::test_a_model_keeping_memory_is_replaced_with_its_worker_then_held_back",
    "--tenant-from": "e2e/test_tenant_identity.py::test_every_protocol_carries_the_tenant",
    "--tenant-tokens-file": "e2e/test_tenant_identity.py::test_a_known_token_names_its_tenant",
    "--tenant-models": "security/test_tenant_models_e2e.py::test_another_tenant_s_model_is_403_and_never_loaded",
    "--tenants-file": "e2e/test_tenant_policies.py::test_editing_the_file_changes_a_tenants_rate",
    "--config": "config/test_config.py::test_file_locations_from_flags_and_environment",
    "--mms-config": CONFIG + "test_mms_config_file_variable_wins",
    "--torchserve-metrics": "e2e/test_torchserve_metrics.py::test_get_metrics",
    "--model-snapshot": "e2e/test_restore_registered.py::test_torchserves_snapshot_registers_its_models",
    "model_snapshot": "e2e/test_restore_registered.py::test_torchserves_snapshot_registers_its_models",
    "--restore-registered": "e2e/test_restore_registered.py::test_a_restart_keeps_the_registered_models",
    "--token-auth": "e2e/test_torchserve_tokens.py::test_inference_api_with_incorrect_token",
    "--token-expiration-min": "protocols/test_keys.py::test_keys_expire_but_the_api_key_renews_them",
    "disable_token_authorization": "e2e/test_torchserve_tokens.py::test_disable_token_authorization",
    "enable_model_api": "e2e/test_torchserve_model_api.py::test_register_model",
    "--model-api": "e2e/test_torchserve_model_api.py::test_register_model_failing",
    "enable_token_authorization": CONFIG
    + "test_token_authorization_is_on_as_torchserve_turns_it_on",
    "token_expiration_min": CONFIG + "test_token_expiration_min_maps",
    # config.properties
    "model_store": "config/test_config.py::test_properties_mapping",
    "inference_address": "config/test_config.py::test_properties_mapping",
    "management_address": CONFIG + "test_management_address_binds_the_management_api",
    "metrics_mode": CONFIG + "test_metrics_mode_prometheus_asks_for_torchserve_names",
    "default_workers_per_model": "config/test_config.py::test_properties_mapping",
    "job_queue_size": "config/test_config.py::test_properties_mapping",
    "default_response_timeout": "config/test_config.py::test_properties_mapping",
    "default_startup_timeout": "config/test_real_config_files.py::"
    "test_default_startup_timeout_sets_the_load_timeout",
    "max_request_size": "config/test_config.py::test_properties_mapping",
    "--default-accept": "e2e/test_sagemaker_environment.py::test_default_invocations_accept_answers_requests_without_accept",
    "max_response_size": "config/test_config.py::test_properties_mapping",
    "batch_size": "config/test_config.py::test_properties_mapping",
    "max_batch_delay": "config/test_config.py::test_properties_mapping",
    "load_models": "config/test_config.py::test_properties_load_models_list_and_continuation",
    "certificate_file": CONFIG + "test_torchserve_tls_keys_map_to_the_ssl_settings",
    "private_key_file": CONFIG + "test_torchserve_tls_keys_map_to_the_ssl_settings",
    "preload_model": CONFIG + "test_preload_model_notice_says_model_memory_is_not_shared",
    "grpc_inference_port": "rpc/test_grpc_settings.py::test_torchserve_grpc_ports_set_the_grpc_ports",
    "--grpc-port": "e2e/test_grpc_oip.py::test_is_server_live_and_ready",
    "grpc_management_port": "rpc/test_grpc_settings.py::test_torchserve_grpc_ports_set_the_grpc_ports",
    "--grpc-management-port": "e2e/test_grpc_torchserve.py::test_register_describe_scale_unregister",
    "grpc_inference_address": "rpc/test_grpc_settings.py::test_torchserve_grpc_addresses_set_the_grpc_hosts",
    "--grpc-host": "e2e/test_torchserve_user.py::test_grpc_ping_and_list_models_on_the_grpc_addresses",
    "grpc_management_address": "rpc/test_grpc_settings.py::test_torchserve_grpc_addresses_set_the_grpc_hosts",
    "--grpc-management-host": "e2e/test_torchserve_user.py::test_grpc_ping_and_list_models_on_the_grpc_addresses",
    "grpc_inference_max_connection_age_ms": "rpc/test_grpc_settings.py::test_torchserve_grpc_connection_ages_set_the_connection_age",
    # outside variables
    "SAGEMAKER_BIND_TO_PORT": "config/test_config.py::test_sagemaker_variables",
    "SAGEMAKER_MODEL_SERVER_WORKERS": CONFIG
    + "test_sagemaker_model_server_workers_means_workers_per_model",
    "SAGEMAKER_MODEL_SERVER_TIMEOUT": "config/test_config.py::test_sagemaker_variables",
    "SAGEMAKER_MULTI_MODEL": CONFIG + "test_single_model_mode_needs_a_model",
    "SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS": "e2e/test_sagemaker_inference_toolkit.py::test_model_server_timeout_seconds_bounds_a_request",
    "SAGEMAKER_MAX_PAYLOAD_IN_MB": "e2e/test_sagemaker_inference_toolkit.py::test_max_payload_in_mb_raises_the_request_limit",
    "MMS_CONFIG_FILE": CONFIG + "test_mms_config_file_variable_wins",
    "TS_CONFIG_FILE": "config/test_config.py::test_file_locations_from_flags_and_environment",
    "OMP_NUM_THREADS": MIGRATION + "test_the_users_thread_variables_win_and_are_reported",
    "MKL_NUM_THREADS": MIGRATION + "test_the_users_thread_variables_win_and_are_reported",
    "NUMEXPR_NUM_THREADS": MIGRATION + "test_the_users_thread_variables_win_and_are_reported",
    "VECLIB_MAXIMUM_THREADS": MIGRATION + "test_the_users_thread_variables_win_and_are_reported",
    "OPENBLAS_NUM_THREADS": MIGRATION + "test_the_users_thread_variables_win_and_are_reported",
    "--preload-runtimes": MIGRATION + "test_preload_runtimes_is_what_the_workers_have_imported",
    "--max-unpacked-bytes": MIGRATION + "test_the_unpack_limits_refuse_an_archive_past_them",
    "--max-unpacked-files": MIGRATION + "test_the_unpack_limits_refuse_an_archive_past_them",
    "--log-level": MIGRATION + "test_log_level_warning_leaves_out_info_lines",
    "--metrics-model-series": MIGRATION + "test_largest_model_gets_its_own_series",
    "SAGEMAKER_SAFE_PORT_RANGE": "config/test_real_config_files.py::test_sagemaker_multi_model_container",
    "SAGEMAKER_HANDLER": "config/test_real_config_files.py::test_sagemaker_multi_model_container",
    "SAGEMAKER_BASE_DIR": "config/test_migration_config.py::test_sagemaker_variables_with_no_use_here_are_reported",
    "SAGEMAKER_CONTAINER_LOG_LEVEL": "config/test_migration_config.py::test_sagemaker_variables_with_no_use_here_are_reported",
    "SAGEMAKER_SUBMIT_DIRECTORY": "e2e/test_sagemaker_inference_toolkit.py::test_submit_directory_is_reported_as_not_fetched",
    "SAGEMAKER_PROGRAM": "e2e/test_sagemaker_environment.py::test_sagemaker_program_names_the_script_in_code",
    "SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT": "e2e/test_sagemaker_environment.py::test_default_invocations_accept_answers_requests_without_accept",
}

REFUSED: dict[str, Refused] = {
    "SAGEMAKER_ADDITIONAL_MODEL_SERVER_OPTIONS": Refused(
        {}, {"SAGEMAKER_ADDITIONAL_MODEL_SERVER_OPTIONS": "-x"}, "", "MODELHOST_*"
    ),
    "keystore": refused_key("keystore", "certificate_file"),
    "keystore_pass": refused_key("keystore_pass", "private_key_file"),
    "keystore_type": refused_key("keystore_type", "certificate_file"),
    "allowed_urls": refused_key("allowed_urls", "--allowed-urls"),
    "models": refused_key("models", "manifest"),
    "install_py_dep_per_model": refused_key("install_py_dep_per_model", "requirements"),
    "cors_allowed_origin": refused_key("cors_allowed_origin", "reverse proxy"),
    "cors_allowed_methods": refused_key("cors_allowed_methods", "reverse proxy"),
    "cors_allowed_headers": refused_key("cors_allowed_headers", "reverse proxy"),
    "plugins_path": refused_key("plugins_path", "Python"),
}

# config.properties keys of MMS and TorchServe with no effect to have here: reported at start
# with the reason, each in its own words (never the generic "has no meaning" of unknown keys)
NOTICED = {
    "vmargs",
    "number_of_netty_threads",
    "netty_client_threads",
    "async_logging",
    "use_native_io",
    "io_ratio",
    "initial_worker_port",
    "number_of_gpu",
    "enable_envvars_config",
    "decode_input_request",
    "blacklist_env_vars",
    "default_service_handler",
    "unregister_model_timeout",
    "workflow_store",
    "snapshot_store",
    "metrics_format",
    "metrics_config",
    "enable_metrics_api",
    "disable_system_metrics",
    "limit_max_image_pixels",
    "enable_grpc_ssl",
    "grpc_management_max_connection_age_ms",
    "grpc_inference_max_connection_age_grace_ms",
    "grpc_management_max_connection_age_grace_ms",
    # TorchServe 0.9-0.12's other keys (its ConfigManager)
    "debug",
    "model_metrics_auto_detect",
    "metric_time_interval",
    "system_metrics_cmd",
    "ipex_enable",
    "ipex_gpu_enable",
    "cpu_launcher_enable",
    "cpu_launcher_args",
    "service_envelope",
    "ts_open_inference_protocol",
    "model_server_home",
    "prefer_direct_buffer",
    "initial_distribution_port",
    "cpp_log_config",
    "ts_header_key_sequence_id",
    "ts_header_key_sequence_start",
    "ts_header_key_sequence_end",
    "use_env_allowed_urls",
}

# settings whose effect no test observes yet: this list may only shrink
NOT_YET_OBSERVED: dict[str, str] = {}  # settings whose effect no test observes yet: keep it empty


def every_setting() -> set[str]:
    flags = {option.flag for option in cli_options()}
    return flags | set(properties_keys()) | set(outside_variables())


def test_every_setting_has_exactly_one_row() -> None:
    rows = [*EFFECTS, *REFUSED, *NOTICED, *NOT_YET_OBSERVED]
    assert len(rows) == len(set(rows)), "a setting has two rows"
    missing, stale = every_setting() - set(rows), set(rows) - every_setting()
    assert not missing, f"settings without a row (add its effect's test, or refuse it): {missing}"
    assert not stale, f"rows for settings that no longer exist: {stale}"


@pytest.mark.parametrize("setting", sorted(EFFECTS))
def test_the_effects_test_exists(setting: str) -> None:
    path, _, name = EFFECTS[setting].partition("::")
    source = (TESTS / path).read_text(encoding="utf-8")
    if name:
        defined = {n.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)}
        assert name in defined, f"{setting}: no test {name} in {path}"


@pytest.mark.parametrize("setting", sorted(REFUSED))
def test_refused_setting_fails_at_start(setting: str, tmp_path: Path) -> None:
    """A refused setting fails at start naming what to use."""
    row = REFUSED[setting]
    if row.properties:
        (tmp_path / "config.properties").write_text(row.properties, encoding="utf-8")
    with pytest.raises(ConfigError) as refusal:
        load_config(row.flags, row.environ, tmp_path)
    assert row.instead in str(refusal.value)


@pytest.mark.parametrize("key", sorted(NOTICED))
def test_noticed_key_is_reported_at_start(key: str, tmp_path: Path) -> None:
    """A noticed key is reported at start with its reason."""
    (tmp_path / "config.properties").write_text(f"{key}=true\n", encoding="utf-8")
    (notice,) = load_config({}, {}, tmp_path).notices
    assert f"'{key}'" in notice and "has no meaning in modelhost" not in notice


def test_refused_properties_keys_are_the_ones_config_refuses() -> None:
    refused = {key for key, kind in properties_keys().items() if kind == "refused"}
    assert refused == {key for key in REFUSED if not key.startswith("SAGEMAKER_")}


def test_migrating_md_names_the_settings_not_yet_observed() -> None:
    """The page's "Not done yet" names what NOT_YET_OBSERVED holds, and nothing once it is empty."""
    page = (TESTS.parent / "docs" / "migrating.md").read_text(encoding="utf-8")
    items = page.split("## Not done yet", 1)[1].split("\n- ")
    said = " ".join(item for item in items if "test_every_setting.py" in item)
    named = set(re.findall(r"`([\w-]+)`", said))
    assert named == {flag.removeprefix("--").replace("-", "_") for flag in NOT_YET_OBSERVED}
