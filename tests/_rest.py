"""MLflow's REST API, read as its UI reads it: plain HTTP against a real ``mlflow server``."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from typing import Any


def get(url: str, endpoint: str, **query: str) -> Any:
    with urllib.request.urlopen(
        f"{url}{endpoint}?{urllib.parse.urlencode(query)}", timeout=30
    ) as response:
        return json.loads(response.read())


def post(url: str, endpoint: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        f"{url}{endpoint}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def experiment(url: str, name: str = "arecall") -> dict[str, Any]:
    found: dict[str, Any] = get(
        url, "/api/2.0/mlflow/experiments/get-by-name", experiment_name=name
    )["experiment"]
    return found


def tags_of(entity: dict[str, Any]) -> dict[str, str]:
    """An experiment's or a run's tags (``{"data": {"tags": [...]}}`` or ``{"tags": [...]}``)."""
    items = entity.get("data", entity).get("tags", [])
    return {t["key"]: t["value"] for t in items}


def runs(url: str, experiment_name: str = "arecall") -> list[dict[str, Any]]:
    """Every run of the experiment, as the runs table lists it."""
    found = post(
        url,
        "/api/2.0/mlflow/runs/search",
        {"experiment_ids": [experiment(url, experiment_name)["experiment_id"]], "max_results": 500},
    )
    listed: list[dict[str, Any]] = found.get("runs", [])
    return listed


def metrics(run: dict[str, Any]) -> dict[str, float]:
    return {m["key"]: float(m["value"]) for m in run["data"].get("metrics", [])}


def params(run: dict[str, Any]) -> dict[str, str]:
    return {p["key"]: p["value"] for p in run["data"].get("params", [])}


def datasets(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's dataset inputs: each dataset's fields and its input tags."""
    out = []
    for item in run.get("inputs", {}).get("dataset_inputs", []):
        entry = dict(item["dataset"])
        entry["tags"] = {t["key"]: t["value"] for t in item.get("tags", [])}
        out.append(entry)
    return out


def artifacts(url: str, run_id: str, path: str = "") -> dict[str, bool]:
    """The run's artifacts at ``path``: name → whether it is a directory."""
    listed = get(url, "/api/2.0/mlflow/artifacts/list", run_id=run_id, path=path)
    return {f["path"]: bool(f.get("is_dir")) for f in listed.get("files", [])}


def history(url: str, run_id: str, key: str) -> list[tuple[int, float]]:
    """A metric's logged (step, value) pairs: what the UI draws as its curve."""
    found = get(url, "/api/2.0/mlflow/metrics/get-history", run_id=run_id, metric_key=key)
    return sorted((int(m["step"]), float(m["value"])) for m in found.get("metrics", []))
