#!/usr/bin/env bash
# Fetch REPO at exactly COMMIT into DEST and verify it; the .git folder is dropped and the
# verified commit written to DEST/.upstream-commit.
# usage: fetch-upstream.sh REPO COMMIT DEST
set -euo pipefail

if [ $# -ne 3 ]; then
    echo "usage: fetch-upstream.sh REPO COMMIT DEST" >&2
    exit 2
fi
repo=$1
commit=$2
dest=$3
if ! [[ $commit =~ ^[0-9a-f]{40}$ ]]; then
    echo "error: commit '$commit' of $repo is not a full 40-hex commit id" >&2
    exit 2
fi

git init -q "$dest"
git -C "$dest" remote add origin "$repo"
# A fetch by commit id is one small pack; a server that refuses it gets a full fetch.
if ! git -C "$dest" fetch -q --depth 1 origin "$commit" 2>/dev/null; then
    git -C "$dest" fetch -q origin
fi
if ! git -C "$dest" -c advice.detachedHead=false checkout -q "$commit"; then
    echo "error: $repo has no commit $commit" >&2
    exit 1
fi
head=$(git -C "$dest" rev-parse HEAD)
if [ "$head" != "$commit" ]; then
    echo "error: $repo: checked out $head, but the pin is $commit" >&2
    exit 1
fi
rm -rf "$dest/.git"
printf '%s %s\n' "$repo" "$commit" >"$dest/.upstream-commit"
echo "$repo at $commit"
