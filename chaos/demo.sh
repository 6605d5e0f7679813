#!/bin/sh
# demo.sh up|down|status — a 3-node (up to 5) skein cluster in containers.
#
# up      creates the network (and empties the shared directory of a
#         previous demo's events and locks), starts NAME-a, NAME-b, NAME-c
#         (and NAME-d, NAME-e) from the image (make image), each with 8
#         simulated H100s, and waits for a leader; stopped containers are
#         started again. The cluster is secure: NAME-a creates its CA, the
#         others are admitted with join tokens it makes; the CA
#         certificate is copied to SHARED/ca.crt. Each node's API is published on 127.0.0.1 (PORT,
#         PORT+10, PORT+20, ...) and reachable at its IP (SUBNET.11, .12, ...)
#         from a Linux host. Once formed, the cluster's ACLs are
#         bootstrapped: the admin token is kept in SHARED/admin.token, and
#         SHARED/user.token holds a submitter token of the user "demo",
#         whose jobs run as nobody (the image has no account "demo").
# down    removes the containers and the network; the shared directory stays.
# status  lists the containers, the cluster status and the workload's
#         violations recorded in SHARED/events.log.
#
# Settings (environment):
#   SKEIN_DEMO_NAME    container and node name prefix, network NAME-demo (skein)
#   SKEIN_DEMO_IMAGE   image (skein:dev)
#   SKEIN_DEMO_SUBNET  first three octets of the network's /24 (172.28.0)
#   SKEIN_DEMO_PORT    first host port for the APIs; empty: publish none (7470)
#   SKEIN_DEMO_TOKEN   the cluster's API token, used until the ACL bootstrap (demo)
#   SKEIN_DEMO_SHARED  host directory mounted at /shared in every node (/tmp/NAME-demo)
#   SKEIN_DEMO_NODES   number of nodes, 3 to 5 (3)
#   SKEIN_DEMO_VOTERS  Raft voters among them, odd (3)
#   SKEIN_DEMO_ENGINE  1: the nodes run image jobs on this host's container
#                      engine (its socket is mounted into every node, which
#                      makes the nodes root on this host); jobs' containers
#                      live inside their node's container and may mount
#                      SHARED, which every node also sees at its own path
#                      (0)
set -eu

NAME=${SKEIN_DEMO_NAME:-skein}
IMAGE=${SKEIN_DEMO_IMAGE:-skein:dev}
SUBNET=${SKEIN_DEMO_SUBNET:-172.28.0}
PORT=${SKEIN_DEMO_PORT-7470}
TOKEN=${SKEIN_DEMO_TOKEN:-demo}
SHARED=${SKEIN_DEMO_SHARED:-/tmp/$NAME-demo}
NET=$NAME-demo
COUNT=${SKEIN_DEMO_NODES:-3}
VOTERS=${SKEIN_DEMO_VOTERS:-3}
ENGINE=${SKEIN_DEMO_ENGINE:-0}
case $COUNT in
3) NODES="a b c" ;;
4) NODES="a b c d" ;;
5) NODES="a b c d e" ;;
*)
	echo "demo.sh: SKEIN_DEMO_NODES=$COUNT: want 3, 4 or 5" >&2
	exit 2
	;;
esac
LABEL=skein-demo=$NAME

die() {
	echo "demo.sh: $*" >&2
	exit 1
}

# index prints the position of node $1 in a..e, from 0.
index() {
	case $1 in
	a) echo 0 ;;
	b) echo 1 ;;
	c) echo 2 ;;
	d) echo 3 ;;
	e) echo 4 ;;
	esac
}

ip_of() {
	echo "$SUBNET.$((11 + $(index "$1")))"
}

port_of() {
	echo $((PORT + 10 * $(index "$1")))
}

# running prints the names of this demo's running containers.
running() {
	docker ps --filter "label=$LABEL" --format '{{.Names}}' | sort
}

# count prints how many events of kind $1 the workload recorded.
count() {
	grep -c "\"event\":\"$1\"" "$SHARED/events.log" || true
}

# sk runs the skein CLI in container $1 with the admin token once the
# cluster's ACLs are bootstrapped (read from the shared directory inside
# the container, so that it is on no command line), and with the
# cluster's API token before.
sk() {
	node=$1
	shift
	if [ -s "$SHARED/admin.token" ]; then
		docker exec "$node" sh -c 'SKEIN_TOKEN=$(cat /shared/admin.token) exec skein "$@"' sh "$@"
	else
		docker exec "$node" skein "$@"
	fi
}

# formed reports whether NAME-a sees a leader, every node ready and
# the voters it should have (nodes join as non-voters and are promoted
# once they have been healthy for a moment).
formed() {
	st=$(sk "$NAME-a" status 2>/dev/null) || return 1
	case $st in
	*"none (no leader"*) return 1 ;;
	*"$COUNT/$COUNT ready"*) ;;
	*) return 1 ;;
	esac
	want=$VOTERS
	[ "$COUNT" -ge "$want" ] || want=$((COUNT - (1 - COUNT % 2)))
	voters=$(sk "$NAME-a" raft peers 2>/dev/null | grep -c ' voter ') || return 1
	[ "$voters" -eq "$want" ]
}

# wait_up waits until the agent in container $1 answers.
wait_up() {
	i=0
	until sk "$1" status >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -lt 60 ] || die "$1 did not start within 30 s; see: docker logs $1"
		sleep 0.5
	done
}

# engine_mounts prints the docker run options that give a node this host's
# container engine with SKEIN_DEMO_ENGINE=1: its socket, and SHARED where
# the host has it, since the engine reads jobs' mount sources on the host.
engine_mounts() {
	if [ "$ENGINE" = 1 ]; then
		echo "-v /var/run/docker.sock:/var/run/docker.sock -v $SHARED:$SHARED"
	fi
}

# engine_flags prints the agent flags of node container $1 for image jobs:
# their containers live inside the node's and may mount SHARED.
engine_flags() {
	if [ "$ENGINE" = 1 ]; then
		echo "--in-container $1 --allow-mount $SHARED"
	else
		echo "--container-socket none"
	fi
}

# join_token makes a one-use join token on the founder, valid for an hour.
join_token() {
	sk "$NAME-$founder" join-token create --uses 1 --ttl 1h 2>/dev/null
}

up() {
	docker image inspect "$IMAGE" >/dev/null 2>&1 || die "image $IMAGE not found; build it with: make image"
	mkdir -p "$SHARED"
	# A root agent runs the workload as nobody: let it write its locks and events.
	[ "$(id -u)" != 0 ] || chmod 1777 "$SHARED"
	if ! docker network inspect "$NET" >/dev/null 2>&1; then
		# A new demo starts with no events, lock files or tokens.
		rm -f "$SHARED/events.log" "$SHARED"/gpu-*.lock "$SHARED"/job-*.lock "$SHARED"/*.token
		docker network create --subnet "$SUBNET.0/24" --label "$LABEL" "$NET" >/dev/null
	fi
	founder=$(echo "$NODES" | cut -d' ' -f1)
	for n in $NODES; do
		c=$NAME-$n
		state=$(docker inspect --format '{{.State.Status}}' "$c" 2>/dev/null || true)
		case $state in
		running) continue ;;
		"") ;;
		*)
			# A stopped node keeps its certificate in its data dir.
			docker start "$c" >/dev/null
			continue
			;;
		esac
		publish=
		if [ -n "$PORT" ]; then
			publish="-p 127.0.0.1:$(port_of "$n"):7470"
		fi
		# The first node founds the cluster and its CA; the others are
		# admitted with a join token it makes, and join through it.
		join=
		if [ "$n" != "$founder" ]; then
			join="--join $(ip_of "$founder")"
			token=$(join_token) || die "no join token from $NAME-$founder; see: docker logs $NAME-$founder"
		fi
		# The CLI in each container talks to its own agent over TLS. The
		# data dir is named after the container: agents that share an
		# engine tell their jobs' containers apart by it. An agent in a
		# container without privileges cannot make cgroups (the engine's
		# are read-only there): its jobs run unconfined within the
		# container, which the engine confines, hence --allow-unconfined.
		# shellcheck disable=SC2046,SC2086 # $publish, $join and the engine options are lists of words
		docker run -d --name "$c" --hostname "$c" --label "$LABEL" \
			--network "$NET" --ip "$(ip_of "$n")" $publish \
			--user "$(id -u):$(id -g)" -v "$SHARED:/shared" -e "SKEIN_TOKEN=$TOKEN" \
			-e "SKEIN_ADDR=https://127.0.0.1:7470" -e "SKEIN_CACERT=/data/$c/tls/ca.crt" \
			-e "SKEIN_JOIN_TOKEN=${token:-}" $(engine_mounts) \
			"$IMAGE" skein agent --name "$c" --data-dir "/data/$c" --bind 0.0.0.0 \
			--advertise "$(ip_of "$n")" --gpus sim:8xH100-80 --voters "$VOTERS" --allow-unconfined $join \
			$(engine_flags "$c") >/dev/null
		if [ "$n" = "$founder" ]; then
			wait_up "$c"
			# The CA certificate, for clients on the host.
			docker exec "$c" cat "/data/$c/tls/ca.crt" >"$SHARED/ca.crt"
		fi
	done
	# Wait for a leader and every node.
	i=0
	until formed; do
		i=$((i + 1))
		[ $i -lt 60 ] || die "no leader with $COUNT ready nodes and their voters after 30 s; see: docker logs $NAME-a"
		sleep 0.5
	done
	if [ ! -s "$SHARED/admin.token" ]; then
		# Users get tokens of their own: the first admin's, and a
		# submitter's for the host's CLI and the tests.
		(umask 077 && sk "$NAME-a" acl bootstrap >"$SHARED/admin.token.new" 2>/dev/null) ||
			die "skein acl bootstrap failed; see: docker logs $NAME-a"
		mv "$SHARED/admin.token.new" "$SHARED/admin.token"
		(umask 077 && sk "$NAME-a" acl token create --user demo --role submitter >"$SHARED/user.token" 2>/dev/null) ||
			die "no user token; see: docker logs $NAME-a"
	fi
	sk "$NAME-a" nodes
	echo
	echo "shared directory: $SHARED (mounted at /shared)"
	echo "CA certificate: $SHARED/ca.crt"
	echo "tokens: $SHARED/user.token (user demo, submitter), $SHARED/admin.token (admin)"
	if [ -n "$PORT" ]; then
		echo "export SKEIN_TOKEN_FILE=$SHARED/user.token SKEIN_ADDR=https://127.0.0.1:$PORT SKEIN_CACERT=$SHARED/ca.crt   # $NAME-a; $NAME-b: $(port_of b), $NAME-c: $(port_of c)"
	fi
}

down() {
	ids=$(docker ps -aq --filter "label=$LABEL")
	# With SKEIN_DEMO_ENGINE=1, the jobs' containers too, running or not.
	for n in $NODES; do
		ids="$ids $(docker ps -aq --filter "label=skein.alloc-dir=/data/$NAME-$n/allocs")"
	done
	if [ -n "$(echo "$ids" | tr -d ' ')" ]; then
		# shellcheck disable=SC2086 # a list of IDs
		docker rm -f $ids >/dev/null
	fi
	if docker network inspect "$NET" >/dev/null 2>&1; then
		docker network rm "$NET" >/dev/null
	fi
	echo "removed the containers of $NAME and network $NET; $SHARED is kept"
}

status() {
	docker ps -a --filter "label=$LABEL" --format 'table {{.Names}}\t{{.Status}}\t{{.Ports}}'
	first=$(running | head -n 1)
	if [ -n "$first" ]; then
		echo
		sk "$first" status || true
	fi
	if [ -f "$SHARED/events.log" ]; then
		echo
		echo "$SHARED/events.log: start $(count start), stop $(count stop), violation $(count violation)"
		grep '"event":"violation"' "$SHARED/events.log" || true
	fi
}

case ${1:-} in
up) up ;;
down) down ;;
status) status ;;
*)
	echo "usage: $0 up|down|status" >&2
	exit 2
	;;
esac
