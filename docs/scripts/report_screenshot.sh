#!/bin/sh
# The README's picture (docs/assets/report.png): the HTML report of the GRPO example, as headless
# Chromium shows it at 1280x900. Run from the repository root with ptplan installed and the
# system Chromium (`apt-get install chromium`); nothing is fetched (the report is self-contained).
set -eu
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
ptplan -q plan examples/grpo-7b.yaml --format html --no-timings -o "$tmp/plan.html"
chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --hide-scrollbars \
    --window-size=1280,900 --screenshot="$tmp/report.png" "file://$tmp/plan.html" 2>/dev/null
mkdir -p docs/assets
cp "$tmp/report.png" docs/assets/report.png
echo "wrote docs/assets/report.png"
