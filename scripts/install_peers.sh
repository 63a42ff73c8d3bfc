#!/usr/bin/env bash
# The peers benchmarks/peers.py compares our client with, each in a virtual environment of its
# own under ${XDG_CACHE_HOME:-~/.cache}/inferlab-bench/peers/<tool>: GuideLLM 0.8.1, SGLang
# 0.5.9's bench_serving and vLLM 0.33.0's `vllm bench serve`. Every package of each is pinned in
# scripts/peers/<tool>.txt (their versions move the figures) and installed with --no-deps, so
# pip resolves nothing: no CUDA torch, no nvidia-* wheels, the same environment every time.
#
# Idempotent: a venv whose `pip freeze` already equals its list is left alone; any other is
# built anew beside it and swapped in only once its smoke check passed.
#
#   scripts/install_peers.sh                 # all three
#   scripts/install_peers.sh guidellm vllm   # some
#
# torch==2.13.0+cpu (GuideLLM's and vLLM's) is the CPU wheel from the machine's wheel directory
# (pip's find-links, /opt/wheels here); PyPI has only the CUDA build for Linux, so without that
# directory the install stops at torch, saying so.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
peers="${XDG_CACHE_HOME:-$HOME/.cache}/inferlab-bench/peers"
python="${PYTHON:-python3}"
tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=(guidellm sglang vllm)

pinned() { grep -v '^#' "$here/peers/$1.txt" | LC_ALL=C sort -f; }

smoke() { # the command peers.py runs, asked for its help: imports everything it needs
    local venv=$1 tool=$2
    case $tool in
    guidellm) "$venv/bin/guidellm" run --help ;;
    sglang) "$venv/bin/python" -m sglang.bench_serving --help ;;
    vllm) "$venv/bin/vllm" bench serve --help ;;
    esac
}

for tool in "${tools[@]}"; do
    list="$here/peers/$tool.txt"
    [ -f "$list" ] || { echo "install_peers: no pinned list for '$tool' ($list)" >&2; exit 2; }
    venv="$peers/$tool"
    if [ -x "$venv/bin/python" ] &&
        [ "$("$venv/bin/python" -m pip freeze 2>/dev/null | LC_ALL=C sort -f)" = "$(pinned "$tool")" ]; then
        echo "$tool: up to date ($venv)"
        continue
    fi
    echo "$tool: building $venv"
    started=$SECONDS
    rm -rf "$venv.new"
    mkdir -p "$peers"
    "$python" -m venv "$venv.new"
    "$venv.new/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r "$list"
    if ! smoke "$venv.new" "$tool" >"$venv.new/smoke.log" 2>&1; then
        echo "install_peers: $tool does not start; see $venv.new/smoke.log" >&2
        exit 1
    fi
    rm -f "$venv.new/smoke.log"
    rm -rf "$venv"
    mv "$venv.new" "$venv"
    # A venv's scripts name its interpreter by path: point them at the final directory.
    grep -lr --null "$venv.new" "$venv/bin" | xargs -0 -r sed -i "s|$venv.new|$venv|g"
    echo "$tool: ready in $((SECONDS - started)) s ($venv)"
done
