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
for path in (glob.glob("deploy/kubernetes/*.yaml") + glob.glob("deploy/kubernetes-gpu/*.yaml") +
             ["deploy/envoy/envoy.yaml"]):
    docs = [d for d in yaml.safe_load_all(open(path)) if d is not None]
    assert docs, path
    print(f"{path}: {len(docs)} document(s)")
PY
# The kustomizations render with kubectl (kustomize), and the GPU overlay changes what a GPU
# pod needs and nothing else: the CUDA image, --device=cuda in bfloat16, one GPU requested and
# limited, the device plugin's toleration, a GPU node selector and a startup probe long enough
# for loading and capturing graphs; every server flag either manifest passes is one the server
# has (its --helpfull). The base stays the CPU deployment.
command -v kubectl >/dev/null || { echo "kubectl missing: run tools/setup.sh" >&2; exit 1; }
rendered=${TEST_TMPDIR:-/tmp}/rendered
mkdir -p "$rendered"
# kustomize does not read Bazel's runfiles symlinks: render a copy.
cp -rL deploy "$rendered/deploy"
kubectl kustomize "$rendered/deploy/kubernetes" >"$rendered/cpu.yaml" 2>"$rendered/cpu.log" ||
  { cat "$rendered/cpu.log" >&2; exit 1; }
kubectl kustomize "$rendered/deploy/kubernetes-gpu" >"$rendered/gpu.yaml" 2>"$rendered/gpu.log" ||
  { cat "$rendered/gpu.log" >&2; exit 1; }
server/mulo_server --helpfull >"$rendered/help.txt" 2>&1 || true
/usr/bin/python3 - "$rendered" <<'PY'
import re, sys, yaml
root = sys.argv[1]
def load(name):
    docs = [d for d in yaml.safe_load_all(open(f"{root}/{name}.yaml")) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}
cpu, gpu = load("cpu"), load("gpu")
assert set(cpu) == set(gpu), f"the overlay changes the objects: {set(cpu) ^ set(gpu)}"
for key in cpu:
    if key[0] != "Deployment":
        assert cpu[key] == gpu[key], f"the overlay changes {key}"
flags = set(re.findall(r"^\s+--(\w+)", open(f"{root}/help.txt").read(), re.M))
assert "device" in flags and "dtype" in flags, "mulo_server --helpfull lists no flags"
def pod(objects):
    return objects[("Deployment", "mulo")]["spec"]["template"]["spec"]
def args(spec):
    (container,) = spec["containers"]
    return {a.split("=")[0][2:]: a.partition("=")[2] for a in container["args"]}
for name, objects in (("cpu", cpu), ("gpu", gpu)):
    unknown = set(args(pod(objects))) - flags
    assert not unknown, f"{name}: mulo_server has no flag {sorted(unknown)}"
base, spec = pod(cpu), pod(gpu)
(c,) = spec["containers"]
assert "nvidia.com/gpu" not in str(base) and args(base).get("device", "cpu") == "cpu", "base is CPU"
assert c["image"] == "mulo-cuda:latest", c["image"]
a = args(spec)
assert a["device"] == "cuda" and a["dtype"] == "bfloat16", a
assert set(args(base)) <= set(a), f"the overlay drops {set(args(base)) - set(a)}"
res = c["resources"]
assert int(res["requests"]["nvidia.com/gpu"]) == int(res["limits"]["nvidia.com/gpu"]) >= 1, res
assert any(t.get("key") == "nvidia.com/gpu" for t in spec["tolerations"]), spec["tolerations"]
assert spec["nodeSelector"], "no GPU node selector"
probe = c["startupProbe"]
assert probe["periodSeconds"] * probe["failureThreshold"] >= 600, probe
print(f"kustomize: {len(cpu)} objects; the GPU overlay: {c['image']}, "
      f"{res['limits']['nvidia.com/gpu']} GPU, startup {probe['periodSeconds'] * probe['failureThreshold']} s")
PY
# The Dockerfile's `COPY . .` must not send the repository's history or build outputs.
for entry in .git 'bazel-*' out/; do
  grep -qxF "$entry" .dockerignore || { echo ".dockerignore lacks $entry" >&2; exit 1; }
done
echo "deploy checks passed"
