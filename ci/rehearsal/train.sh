#!/usr/bin/env bash
# make image-check, the user's path through the built image: `make train` (a few PPO updates
# on 8 envs, through compose's training service), `make eval` and `make report` of that run,
# and `make tensorboard`, whose TensorBoard must answer HTTP 200 with the run's scalars.
# Docker runs it (Debian's podman 4.3 has no `podman compose`): the image podman built is
# loaded into Docker when Docker lacks that very image. CPU settings, the only differences
# from a user's commands: ci/rehearsal/compose.cpu.yaml drops the GPU reservation,
# HOST_GPU_CHECK=0 skips the host's GPU checks, and --sim-device/--rl-device cpu.
# Then every file of the run must belong to HOST_UID:HOST_GID, and the container's user is
# not root.
# usage: ci/rehearsal/train.sh IMAGE      (env: TENSORBOARD_BASE_IMAGE, IMAGE_CHECK_PORT)
set -euo pipefail
cd "$(dirname "$0")/../.."
tag=$1
export CONTAINERS_CONF=$PWD/ci/rehearsal/containers.conf
export COMPOSE_FILE=compose.yaml:ci/rehearsal/compose.cpu.yaml
tb_base=${TENSORBOARD_BASE_IMAGE:-mapush-debian-base:bookworm}
port=${IMAGE_CHECK_PORT:-16006}
fail() { echo "error: $*" >&2; exit 1; }

docker info >/dev/null 2>&1 || { echo "error: no Docker daemon answers: the training run goes through docker compose (as root: bash ci/install-docker.sh)" >&2; exit 2; }
want=$(podman image inspect --format '{{.Id}}' "$tag")
have=$(docker image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)
if [ "$have" != "sha256:$want" ]; then
    start=$(date +%s)
    podman save --format docker-archive "$tag" | docker load -q
    docker tag "localhost/$tag" "$tag"  # podman names its local images localhost/...
    docker rmi "localhost/$tag" >/dev/null
    echo "image-check: $tag loaded into Docker in $(( $(date +%s) - start ))s"
fi
[ "$(docker run --rm --entrypoint id "$tag" -u)" != 0 ] || fail "the image's user is root"

# the container user Make gives the image (make help prints them)
read -r uid gid < <(make -s help | sed -n 's/.*HOST_UID=\([0-9]*\) HOST_GID=\([0-9]*\).*/\1 \2/p')
run=runs/image-check/$(date +%Y%m%d-%H%M%S)
mkdir -p runs/image-check  # the container's user writes its runs here: theirs, as runs/ is
[ "$(id -u)" != 0 ] || chown "$uid:$gid" runs/image-check
printf 'episode_length: 20\nppo_epoch: 1\n' >runs/image-check/ppo.yaml
cpu="--sim-device cpu --rl-device cpu"
common=(DOCKER=docker IMAGE="$tag" HOST_GPU_CHECK=0)

make train "${common[@]}" NUM_ENVS=8 STEPS=480 RUN_DIR="$run" \
    EXTRA="$cpu --config runs/image-check/ppo.yaml"
[ -f "$run/config.json" ] || fail "make train wrote no $run/config.json"
make eval "${common[@]}" RUN="$run" EXTRA="$cpu --num-envs 8"
[ -s "$run/eval.jsonl" ] || fail "make eval wrote no $run/eval.jsonl"
# what the containers wrote belongs to the host user (make report, next, runs on the host)
bad=$(find "$run" \( ! -uid "$uid" -o ! -gid "$gid" \) -print | head -n 5)
[ -z "$bad" ] || fail "files of $run do not belong to $uid:$gid (HOST_UID:HOST_GID): $bad"
echo "image-check: every file of $run belongs to $uid:$gid"
make report RUN="$run"
[ -s "$run/report/index.html" ] || fail "make report wrote no $run/report/index.html"

make tensorboard TENSORBOARD_BASE_IMAGE="$tb_base" TENSORBOARD_PORT="$port"
trap 'make tensorboard-stop TENSORBOARD_PORT=$port >/dev/null 2>&1 || true' EXIT
name=${run#runs/}
for _ in $(seq 60); do
    body=$(curl -fsS "http://127.0.0.1:$port/data/plugin/scalars/tags" 2>/dev/null) && \
        grep -q "$name" <<<"$body" && break
    sleep 2
done
grep -q "$name" <<<"${body:-}" || fail "TensorBoard at 127.0.0.1:$port lists no scalars of $name"
tag_name=$(python3 -c 'import json, sys
tags = json.loads(sys.argv[1]); run = [r for r in tags if sys.argv[2] in r][0]
print(sorted(tags[run])[0])' "$body" "$name")
code=$(curl -s -o /dev/null -w '%{http_code}' -G "http://127.0.0.1:$port/data/plugin/scalars/scalars" \
    --data-urlencode "run=$(python3 -c 'import json, sys
print([r for r in json.loads(sys.argv[1]) if sys.argv[2] in r][0])' "$body" "$name")" \
    --data-urlencode "tag=$tag_name")
[ "$code" = 200 ] || fail "TensorBoard answered $code for $name's scalar $tag_name"
echo "image-check: TensorBoard answers 200 with $name's scalars ($tag_name, ...)"
