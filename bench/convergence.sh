#!/usr/bin/env bash
# Convergence evidence: trains the same model on the same data with the same
# seed under each compression setting, through `gradwire local` (real shard and
# worker processes on loopback), and tabulates final test accuracy, bytes and
# wall time against the dense fp32 run of the same invocation.
#
#   bench/convergence.sh [--epochs N] [--model cnn|mlp] [--workers W]
#                        [--shards S] [--only NAME,NAME] [--out DIR]
#                        [-- extra worker flags]
#
# Writes DIR/convergence.json and DIR/convergence.md (default DIR: build/).
# Every setting runs with the same seed, batch size and server optimizer:
# plain SGD at learning rate 0.5 (momentum on the server amplifies the
# delayed updates that error feedback releases and costs Top-K 1% about 3
# points; see docs/convergence.md). The DGC row keeps its momentum on the
# worker (momentum correction, 0.9) and so runs at 0.05, the same effective
# step. Pulls are dense so that the rows differ only in what the workers
# push, except the last row, which is the `make demo` setting (delta pulls).
set -euo pipefail

usage() {
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-2}"
}

epochs=10
model=mlp
workers=2
shards=2
only=""
out_dir=build
build_dir="${BUILD:-build}"
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --epochs) epochs="$2"; shift 2 ;;
    --epochs=*) epochs="${1#*=}"; shift ;;
    --model) model="$2"; shift 2 ;;
    --model=*) model="${1#*=}"; shift ;;
    --workers) workers="$2"; shift 2 ;;
    --workers=*) workers="${1#*=}"; shift ;;
    --shards) shards="$2"; shift 2 ;;
    --shards=*) shards="${1#*=}"; shift ;;
    --only) only="$2"; shift 2 ;;
    --only=*) only="${1#*=}"; shift ;;
    --out) out_dir="$2"; shift 2 ;;
    --out=*) out_dir="${1#*=}"; shift ;;
    -h|--help) usage 0 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "convergence.sh: unknown argument '$1'" >&2; usage 2 ;;
  esac
done
[[ "$epochs" =~ ^[1-9][0-9]*$ ]] || { echo "--epochs: '$epochs' is not a positive integer" >&2; exit 2; }
[[ "$workers" =~ ^[1-9][0-9]*$ ]] || { echo "--workers: '$workers' is not a positive integer" >&2; exit 2; }
[[ "$shards" =~ ^[1-9][0-9]*$ ]] || { echo "--shards: '$shards' is not a positive integer" >&2; exit 2; }
[[ "$model" == cnn || "$model" == mlp ]] || { echo "--model: '$model' is not cnn or mlp" >&2; exit 2; }

cli="$build_dir/bin/gradwire"
[[ -x "$cli" ]] || { echo "convergence.sh: $cli is missing; run 'make build' first" >&2; exit 1; }

# name | description | worker flags
settings=(
  "dense|dense fp32|--compressor=none --value-type=fp32 --pull=dense"
  "fp16|dense fp16|--compressor=fp16 --pull=dense"
  "topk1-noef|Top-K 1%, no EF|--compressor=topk --ratio=0.01 --error-feedback=false --pull=dense"
  "topk1-ef|Top-K 1% + EF|--compressor=topk --ratio=0.01 --error-feedback --pull=dense"
  "dgc01|Top-K 0.1% DGC (momentum correction 0.9, clip 5, warm-up 1 epoch)|--compressor=dgc --ratio=0.001 --dgc-momentum=0.9 --dgc-clip-norm=5 --dgc-warmup-epochs=1 --lr=0.05 --pull=dense"
  "qsgd|QSGD 256 levels + EF|--compressor=qsgd --levels=256 --error-feedback --pull=dense"
  "onebit-ef|1-bit sign + EF|--compressor=onebit --error-feedback --pull=dense"
  "topk1-ef-delta|Top-K 1% + EF, delta pulls 5% (make demo)|--compressor=topk --ratio=0.01 --error-feedback --pull=delta --pull-ratio=0.05"
)

mkdir -p "$out_dir"
runs_dir="$out_dir/convergence-runs"
rm -rf "$runs_dir"
mkdir -p "$runs_dir"

# The value of a number or string key in a flat JSON object.
json_value() {
  sed -n "s/.*\"$2\": \"\{0,1\}\([^,\"}]*\).*/\1/p" "$1"
}

selected() {
  [[ -z "$only" ]] && return 0
  [[ ",$only," == *",$1,"* ]]
}

rows=()
for setting in "${settings[@]}"; do
  IFS='|' read -r name description flags <<<"$setting"
  selected "$name" || continue
  summary="$runs_dir/$name.json"
  echo "=== $name: $description"
  # shellcheck disable=SC2086
  if ! "$cli" local --shards="$shards" --workers="$workers" --model="$model" \
      --epochs="$epochs" --seed=1 --optimizer=sgd --lr=0.5 $flags --summary-json="$summary" \
      "${extra[@]}" >"$runs_dir/$name.log" 2>&1; then
    echo "convergence.sh: $name failed; see $runs_dir/$name.log" >&2
    tail -n 20 "$runs_dir/$name.log" >&2
    exit 1
  fi
  tail -n 5 "$runs_dir/$name.log"
  rows+=("$name|$description|$summary")
done

# The dense row is the reference for accuracy deltas; without it (--only),
# dense-equivalent bytes still give the compression ratio.
dense_accuracy=""
if [[ -f "$runs_dir/dense.json" ]]; then
  dense_accuracy=$(json_value "$runs_dir/dense.json" test_accuracy)
fi

json="$out_dir/convergence.json"
md="$out_dir/convergence.md"
{
  echo "| setting | test accuracy | vs dense (points) | pushed | pulled | pushed vs dense fp32 | wall s |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
} >"$md"
printf '{"model": "%s", "epochs": %s, "workers": %s, "shards": %s, "runs": [' \
  "$model" "$epochs" "$workers" "$shards" >"$json"
first=1
for row in "${rows[@]}"; do
  IFS='|' read -r name description summary <<<"$row"
  accuracy=$(json_value "$summary" test_accuracy)
  pushed=$(json_value "$summary" pushed_bytes)
  pulled=$(json_value "$summary" pulled_bytes)
  dense_eq=$(json_value "$summary" dense_equivalent_bytes)
  wall=$(json_value "$summary" wall_seconds)
  steps=$(json_value "$summary" steps)
  read -r ratio delta <<<"$(awk -v p="$pushed" -v d="$dense_eq" \
      -v a="$accuracy" -v r="$dense_accuracy" 'BEGIN {
        printf "%.1f %s\n", (p > 0 ? d / p : 0),
               (r == "" ? "null" : sprintf("%.2f", 100 * (a - r))) }')"
  awk -v n="$description" -v a="$accuracy" -v dl="$delta" -v p="$pushed" \
      -v q="$pulled" -v x="$ratio" -v w="$wall" 'BEGIN {
        printf "| %s | %.4f | %s | %.1f MB | %.1f MB | %s× | %.0f |\n",
               n, a, (dl == "null" ? "—" : sprintf("%+.2f", dl)), p / 1e6, q / 1e6, x, w }' >>"$md"
  [[ $first == 1 ]] || printf ', ' >>"$json"
  first=0
  printf '{"name": "%s", "setting": "%s", "test_accuracy": %s, "accuracy_vs_dense_points": %s, "steps": %s, "wall_seconds": %s, "pushed_bytes": %s, "pulled_bytes": %s, "dense_equivalent_bytes": %s, "compression_ratio": %s}' \
    "$name" "$description" "$accuracy" "$delta" "$steps" "$wall" "$pushed" \
    "$pulled" "$dense_eq" "$ratio" >>"$json"
done
printf ']}\n' >>"$json"

echo
echo "$model, $epochs epoch(s), $workers workers, $shards shards, seed 1:"
cat "$md"
echo "wrote $md and $json"
