#!/bin/sh
# Build the held-out corpus folder outside the repository and run `memtoc eval coding` on it.
# The transcripts are linked from $CORPUS to ../shared (never copied into the repo): `eval coding`
# follows a corpus's links.
# Usage: evals/heldout/three-agents/run.sh [OUT_DIR] [extra eval args, e.g. --store DIR]
# Environment: SHARED (default ../shared beside the checkout, else /work/shared), CORPUS (default
# /tmp/heldout/three-agents), PYTHON (default .venv/bin/python), CHECK_ONLY=1 (build the folder and
# check the gold quotes, no eval).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
SHARED=${SHARED:-$ROOT/../shared}
[ -d "$SHARED/datasets" ] || SHARED=/work/shared
SRC=$SHARED/datasets/transcripts
PROJECT=$SRC/claude-code/real_projects/-Users-dain-workspace-danieldemmel-me-next
CORPUS=${CORPUS:-/tmp/heldout/three-agents}
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
OUT=${1:-/tmp/heldout/three-agents-out}
[ $# -gt 0 ] && shift

for dir in "$SRC/codex" "$SRC/gemini-cli" "$PROJECT"; do
    [ -d "$dir" ] || { echo "missing $dir" >&2; exit 1; }
done
rm -rf "$CORPUS/transcripts"
mkdir -p "$CORPUS/transcripts"
ln -s "$SRC/codex"/rollout-*.jsonl "$SRC/gemini-cli"/session-*.json "$PROJECT"/*.jsonl \
    "$CORPUS/transcripts/"
cp "$HERE/questions.jsonl" "$CORPUS/questions.jsonl"

# Every gold quote must be in the transcripts: the coding corpora's own standard-library checker,
# taught the Codex and Gemini formats by check_questions.py beside this script.
python3 "$HERE/check_questions.py" \
    --checker "$SHARED/datasets/coding/context-evaluator/check_questions.py" \
    --questions "$CORPUS/questions.jsonl" --transcripts "$CORPUS/transcripts" > "$CORPUS/check.log" \
    || { tail -20 "$CORPUS/check.log" >&2; exit 1; }
tail -1 "$CORPUS/check.log"
[ "${CHECK_ONLY:-0}" = 1 ] && exit 0

cd "$ROOT"
HF_HUB_OFFLINE=1 MEMTOC_EMBED_MODEL=${MEMTOC_EMBED_MODEL:-$SHARED/models/minilm-static-256} \
    nice -n 10 "$PYTHON" -m memtoc eval coding "$CORPUS" --embedder static \
    --methods recall,bm25,rrf,browse,teleport-browse --budgets 500,1000,1500,2000 \
    --no-time-limit --tz UTC \
    --out "$OUT" "$@"
