#!/bin/sh
# Build the held-out corpus folder outside the repository and run `memtoc eval coding` on it.
# The transcripts are linked from $CORPUS to ../shared (never copied into the repo): `eval coding`
# follows a corpus's links.
# Usage: evals/heldout/claude-code-log/run.sh [OUT_DIR] [extra eval args, e.g. --store DIR]
# Environment: SHARED (default ../shared beside the checkout, else /work/shared), CORPUS (default
# /tmp/heldout/claude-code-log), PYTHON (default .venv/bin/python).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
SHARED=${SHARED:-$ROOT/../shared}
[ -d "$SHARED/datasets" ] || SHARED=/work/shared
SRC=$SHARED/datasets/transcripts/claude-code/real_projects
CORPUS=${CORPUS:-/tmp/heldout/claude-code-log}
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
OUT=${1:-/tmp/heldout/out}
[ $# -gt 0 ] && shift

for project in -Users-dain-workspace-claude-code-log-sample -Users-dain-workspace-coderabbit-review-helper; do
    [ -d "$SRC/$project" ] || { echo "missing $SRC/$project" >&2; exit 1; }
done
rm -rf "$CORPUS/transcripts"
mkdir -p "$CORPUS/transcripts"
for project in -Users-dain-workspace-claude-code-log-sample -Users-dain-workspace-coderabbit-review-helper; do
    ln -s "$SRC/$project"/*.jsonl "$CORPUS/transcripts/"
done
cp "$HERE/questions.jsonl" "$CORPUS/questions.jsonl"

# Every gold quote must be in the transcripts (the coding corpora's own standard-library checker).
python3 "$SHARED/datasets/coding/context-evaluator/check_questions.py" \
    --questions "$CORPUS/questions.jsonl" --transcripts "$CORPUS/transcripts" | tail -1

cd "$ROOT"
HF_HUB_OFFLINE=1 MEMTOC_EMBED_MODEL=${MEMTOC_EMBED_MODEL:-$SHARED/models/minilm-static-256} \
    nice -n 10 "$PYTHON" -m memtoc eval coding "$CORPUS" --embedder static \
    --methods recall,bm25,rrf,browse,teleport-browse --no-time-limit --tz Europe/London \
    --out "$OUT" "$@"
