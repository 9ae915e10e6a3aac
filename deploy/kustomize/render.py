"""Writes deploy/kustomize/base from the Helm chart's default render (release `gateway`),
one file per kind, so a Kustomize user starts from what the chart makes; the deployment
checks fail when the two differ. Run: .venv/bin/python -m deploy.kustomize.render"""

from __future__ import annotations

from pathlib import Path

import helm_python as helm
import yaml

CHART = Path(__file__).parents[1] / "helm" / "gateway"
BASE = Path(__file__).parent / "base"


def rendered() -> dict[str, str]:
    """File name to manifest, for each manifest of the default render."""
    chart = helm.Chart.load(CHART)
    try:
        files = chart.render({}, name="gateway", namespace="default", is_install=True)
    finally:
        chart.close()
    out: dict[str, str] = {}
    for path, text in sorted(files.items()):
        for doc in yaml.safe_load_all(text) if path.endswith(".yaml") else ():
            if doc:
                out[f"{doc['kind'].lower()}.yaml"] = yaml.safe_dump(doc, sort_keys=False)
    return out


def main() -> None:
    files = rendered()
    for old in BASE.glob("*.yaml"):
        old.unlink()
    for name, text in files.items():
        (BASE / name).write_text(text)
    listing = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization"}
    (BASE / "kustomization.yaml").write_text(
        yaml.safe_dump({**listing, "resources": sorted(files)}, sort_keys=False)
    )


if __name__ == "__main__":
    main()
