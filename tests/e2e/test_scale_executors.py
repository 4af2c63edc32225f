"""A parallel pipeline's job: N worker ops, the executor chosen by configuration only.

For each executor of :data:`platform_defs.pipelines.EXECUTORS` whose package is installed (the
``scale`` extra brings dagster-k8s, dagster-docker, dagster-celery-k8s), the same pipeline file
builds a job of ``pipeline.parallelism`` worker ops under that executor, whose run config keeps the
one-op shape (``ops.run_<name>.config``, mapped to every worker).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._config import validate_config

from platform_defs.pipelines import EXECUTOR_ENV, EXECUTORS, ExecutorUnavailableError, build_pipeline_job

EXECUTOR_NAMES = {"multiprocess": "multiprocess", "in_process": "in_process", "k8s": "k8s",
                  "celery_k8s": "celery-k8s", "docker": "docker"}


def _pipeline(tmp_path: Path, parallelism: int) -> Path:
    path = tmp_path / "par.yaml"
    path.write_text(yaml.safe_dump({
        "pipeline": {"name": "kafka-to-iceberg", "parallelism": str(parallelism)},
        "source": {"type": "kafka", "properties.bootstrap.servers": "127.0.0.1:1", "topic": "a;b",
                   "value.format": "debezium-json"},
        "sink": {"type": "iceberg", "catalog.properties.uri": "${ICEBERG_CATALOG_URI}",
                 "catalog.properties.warehouse": "${ICEBERG_WAREHOUSE}"},
    }))
    return path


@pytest.mark.parametrize("executor", sorted(EXECUTORS))
def test_the_job_builds_with_each_installed_executor(tmp_path, monkeypatch, executor):
    module = EXECUTORS[executor][0]
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install changelake[scale])")
    monkeypatch.setenv(EXECUTOR_ENV, executor)
    job = build_pipeline_job(_pipeline(tmp_path, 3))
    assert job.executor_def.name == EXECUTOR_NAMES[executor]
    (graph_node,) = job.graph.nodes
    assert graph_node.name == "run_kafka_to_iceberg"
    assert sorted(n.name for n in graph_node.definition.nodes) == ["worker_0", "worker_1", "worker_2"]
    assert all(n.definition.retry_policy is not None for n in graph_node.definition.nodes)
    config = {"ops": {"run_kafka_to_iceberg": {"config": {"until_caught_up": True}}}}
    assert validate_config(job.run_config_schema.config_type, config).success


def test_one_worker_stays_one_op_in_process(tmp_path):
    job = build_pipeline_job(_pipeline(tmp_path, 1))
    assert job.executor_def is dg.in_process_executor
    assert [n.name for n in job.graph.nodes] == ["run_kafka_to_iceberg"]


def test_a_worker_job_is_one_op_whatever_the_parallelism(tmp_path):
    job = build_pipeline_job(_pipeline(tmp_path, 4), worker_id="pod-7")
    assert [n.name for n in job.graph.nodes] == ["run_kafka_to_iceberg"]
    assert job.tags["changelake/worker"] == "pod-7"


def test_an_unknown_executor_names_the_choices(tmp_path, monkeypatch):
    monkeypatch.setenv(EXECUTOR_ENV, "slurm")
    with pytest.raises(ExecutorUnavailableError, match="'slurm' is not an executor; choose one of celery_k8s, docker"):
        build_pipeline_job(_pipeline(tmp_path, 2))
