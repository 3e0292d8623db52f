#!/usr/bin/env bash
# Checks the deploy/ files with the real tools where we have them: promtool validates the
# alert rules and every PromQL expression of the Grafana dashboard (wrapped as recording rules),
# and the Kubernetes / Envoy YAML and dashboard JSON must parse; .dockerignore keeps .git and
# build outputs out of the image's build context.
set -euo pipefail
[[ -x /usr/bin/promtool ]] || { echo "promtool missing: run tools/setup.sh" >&2; exit 1; }
/usr/bin/promtool check rules deploy/prometheus/alerts.yml
# The alerts' unit tests, on series measured from each method (bench/acceptance_series.sh)...
/usr/bin/promtool test rules tests/deploy/alerts_test.yml
# ...and the control: the rule they replaced (accepted / drafted < 0.05, which fires for healthy
# tree methods) must fail them.
control=${TEST_TMPDIR:-/tmp}/control
mkdir -p "$control/deploy/prometheus" "$control/tests/deploy"
cp tests/deploy/alerts_test.yml "$control/tests/deploy/"
/usr/bin/python3 - deploy/prometheus/alerts.yml "$control/deploy/prometheus/alerts.yml" <<'PY'
import sys, yaml
rules = yaml.safe_load(open(sys.argv[1]))
for rule in rules["groups"][0]["rules"]:
    if rule.get("alert") == "MuloAcceptanceCollapsed":
        rule["expr"] = ("sum by (model, method) (rate(mulo_spec_accepted_tokens_total[15m]))"
                        " / sum by (model, method) (rate(mulo_spec_drafted_tokens_total[15m])) < 0.05")
yaml.safe_dump(rules, open(sys.argv[2], "w"))
PY
if /usr/bin/promtool test rules "$control/tests/deploy/alerts_test.yml" >"$control/promtool.log" 2>&1; then
  echo "control failed: the old MuloAcceptanceCollapsed rule passes tests/deploy/alerts_test.yml" >&2
  exit 1
fi
# ...for the reason the rule was replaced: it fires for the healthy eagle series.
grep -q 'method="eagle", model="synth",' "$control/promtool.log" ||
  { cat "$control/promtool.log" >&2; exit 1; }
echo "alert tests pass; the old acceptance rule fails them, as it must"
tmp=${TEST_TMPDIR:-/tmp}/dashboard_rules.yml
/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
dash = json.load(open("deploy/grafana/mulo-dashboard.json"))
exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
assert exprs, "dashboard has no queries"
with open(sys.argv[1], "w") as f:
    f.write("groups:\n  - name: dashboard\n    rules:\n")
    for i, e in enumerate(exprs):
        f.write(f"      - record: dashboard:panel_{i}\n        expr: {json.dumps(e)}\n")
print(f"{len(exprs)} dashboard queries")
PY
/usr/bin/promtool check rules "$tmp"
/usr/bin/python3 - <<'PY'
import glob, yaml
for path in glob.glob("deploy/kubernetes/*.yaml") + ["deploy/envoy/envoy.yaml"]:
    docs = [d for d in yaml.safe_load_all(open(path)) if d is not None]
    assert docs, path
    print(f"{path}: {len(docs)} document(s)")
PY
# The Dockerfile's `COPY . .` must not send the repository's history or build outputs.
for entry in .git 'bazel-*' out/; do
  grep -qxF "$entry" .dockerignore || { echo ".dockerignore lacks $entry" >&2; exit 1; }
done
echo "deploy checks passed"
