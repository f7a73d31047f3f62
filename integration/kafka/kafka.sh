#!/usr/bin/env bash
# Real Apache Kafka (KRaft) for the integration tests.
#
#   integration/kafka/kafka.sh up|down|reset|status|logs [N] [-f]|stop-node N|start-node N|freeze-node N|
#                              thaw-node N|coordinator GROUP|txn-coordinator TXN_ID|elect-leaders|
#                              group-config GROUP K=V...|smoke
#
# Cluster source, in this order:
#   1. KAFKA_BROKERS set       -> an external cluster; up/down/reset do nothing.
#   2. a Docker engine answers -> docker compose -f <repo>/docker-compose.yml (single node).
#   3. otherwise               -> broker jars from Maven Central, run as local JVMs
#                                 (1 or 3 combined broker+controller nodes on 127.0.0.1).
# KAFKA_MODE=docker|jars forces 2 or 3. See README.md next to this file.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd -P)
PROG="kafka.sh"

set_version() { # the jars of Kafka $1 live in $CACHE_DIR/libs
  VERSION=$1
  CACHE_DIR=${KAFKA_CACHE_DIR:-${HOME:-/tmp}/.cache/rx-kafka-broker}/kafka-$VERSION
  LIBS=$CACHE_DIR/libs
}
set_version "${KAFKA_VERSION:-4.1.1}"
DATA_DIR=${KAFKA_DATA_DIR:-$REPO_ROOT/integration/.kafka} # one per cluster that runs at once
STATE_FILE=$DATA_DIR/state
COMPOSE_FILE=$REPO_ROOT/docker-compose.yml
LOG4J_CONF=$SCRIPT_DIR/log4j2.properties

KAFKA_MODE=${KAFKA_MODE:-auto}
NODES=${KAFKA_NODES:-1}
PORT_BASE=${KAFKA_PORT_BASE:-9092}
SASL=${KAFKA_SASL:-1}
SASL_USER=${KAFKA_SASL_USER:-test-user}
SASL_PASSWORD=${KAFKA_SASL_PASSWORD:-test-secret}
TLS=${KAFKA_TLS:-1}     # SSL and SASL_SSL (SCRAM) listeners, with a CA generated at `up`
OAUTH=${KAFKA_OAUTH:-1} # SASL_PLAINTEXT listener with OAUTHBEARER (unsecured JWS, for tests)
TLS_DIR=$DATA_DIR/tls
START_TIMEOUT=${KAFKA_START_TIMEOUT:-90}
STOP_TIMEOUT=${KAFKA_STOP_TIMEOUT:-15}
HEAP_OPTS=${KAFKA_HEAP_OPTS:--Xms256m -Xmx512m}
# The test brokers run light loads, several at once on a small machine (make test's lanes): the C1
# compiler alone (no C2) halves a broker's CPU to start (~7.5 → ~3.7 CPU-s) and cuts its idle CPU
# by ~40% (measured here); KAFKA_BROKER_JIT=c2 restores the default tiered compilation.
BROKER_JIT_OPTS=$([[ ${KAFKA_BROKER_JIT:-c1} == c2 ]] || echo "-XX:TieredStopAtLevel=1")
BROKER_JVM_OPTS="$BROKER_JIT_OPTS -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true -Dlog4j2.configurationFile=$LOG4J_CONF ${KAFKA_JVM_OPTS:-}"
TOOL_JVM_OPTS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xmx256m -Djava.awt.headless=true -Dlog4j2.configurationFile=$LOG4J_CONF"

# Java: $JAVA_HOME if set (as Maven does), else the one on PATH.
if [[ -n ${JAVA_HOME:-} && -x $JAVA_HOME/bin/java ]]; then JAVA=$JAVA_HOME/bin/java JAVAC=$JAVA_HOME/bin/javac; else JAVA=java JAVAC=javac; fi

STARTED_PIDS=()   # brokers started by this invocation; killed if it fails
HELPER_PID=""     # a running ClusterCheck

say() { printf '%s: %s\n' "$PROG" "$*"; }
warn() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() { warn "ERROR: $*"; exit 1; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
secs() { local ms=$1; printf '%d.%01ds' $((ms / 1000)) $(((ms % 1000) / 100)); }

usage() {
  cat <<EOF
usage: $PROG <command>
  up            start the test cluster (no-op when it already runs healthy)
  fetch         fetch the broker jars and compile the helpers (up does it too; run it once
                before starting clusters at once, which would all fetch)
  down          stop it (idempotent; data and logs stay in its data directory)
  reset         down + wipe its data directory + up (an empty cluster)
  status        show nodes, ports, credentials and whether the cluster answers
  logs [N] [-f] [-n LINES]   show (or follow) the broker log(s)
  stop-node N   SIGKILL node N (jar mode)
  start-node N  restart node N on its data and wait until it answers (jar mode)
  freeze-node N SIGSTOP node N (jar mode): its sockets stay open, it answers nothing (a long GC
                pause, a stopped VM); the controller fences it after broker.session.timeout.ms (6 s)
  thaw-node N   SIGCONT node N (jar mode)
  elect-leaders move every partition's leader back to its preferred replica (after node failures
                the leaders, and so the coordinators, pile up on the nodes that stayed up)
  coordinator GROUP  the group's coordinator (FindCoordinator) and its __consumer_offsets
                partition's leader, replicas, ISR and followers
  txn-coordinator TXN_ID   the node coordinating transactional.id TXN_ID (FindCoordinator of key
                type TRANSACTION, via describeTransactions), with the transaction's state
  group-config GROUP KEY=VALUE...  set a group's dynamic configs (e.g. consumer.session.timeout.ms)
  smoke         produce + consume with a KIP-848 (group.protocol=consumer) group, also via SASL
env: KAFKA_BROKERS KAFKA_MODE KAFKA_NODES KAFKA_PORT_BASE KAFKA_SASL KAFKA_SASL_USER
     KAFKA_SASL_PASSWORD KAFKA_TLS KAFKA_OAUTH KAFKA_START_TIMEOUT KAFKA_STOP_TIMEOUT KAFKA_VERSION
     KAFKA_CACHE_DIR KAFKA_HEAP_OPTS KAFKA_JVM_OPTS KAFKA_BROKER_JIT KAFKA_EXTRA_PROPS
     KAFKA_DATA_DIR (default integration/.kafka; clusters that run at once need their own, and
                    their own KAFKA_PORT_BASE)
EOF
}

# ---------------------------------------------------------------- settings
validate_settings() {
  [[ $NODES == 1 || $NODES == 3 ]] || die "KAFKA_NODES must be 1 or 3 (got '$NODES')"
  [[ $PORT_BASE =~ ^[0-9]+$ ]] && ((PORT_BASE >= 1024 && PORT_BASE + 10 * NODES < 65536)) ||
    die "KAFKA_PORT_BASE must be a port number >= 1024 (got '$PORT_BASE')"
  [[ $START_TIMEOUT =~ ^[0-9]+$ ]] || die "KAFKA_START_TIMEOUT must be seconds (got '$START_TIMEOUT')"
  [[ $STOP_TIMEOUT =~ ^[0-9]+$ ]] || die "KAFKA_STOP_TIMEOUT must be seconds (got '$STOP_TIMEOUT')"
  [[ $SASL == 0 || $SASL == 1 ]] || die "KAFKA_SASL must be 0 or 1 (got '$SASL')"
  [[ $TLS == 0 || $TLS == 1 ]] || die "KAFKA_TLS must be 0 or 1 (got '$TLS')"
  [[ $OAUTH == 0 || $OAUTH == 1 ]] || die "KAFKA_OAUTH must be 0 or 1 (got '$OAUTH')"
  if [[ $TLS == 1 ]] && ! command -v openssl >/dev/null 2>&1; then
    die "KAFKA_TLS=1 needs openssl (to generate the test CA and broker certificate); install it or set KAFKA_TLS=0"
  fi
  # The user goes into StorageTool's --add-scram '[name=..,password=..]' syntax.
  local re='^[^]=,"\\[[:space:]]+$'
  [[ $SASL_USER =~ $re && $SASL_PASSWORD =~ $re ]] ||
    die "KAFKA_SASL_USER/KAFKA_SASL_PASSWORD must be non-empty without , [ ] = \" \\ or spaces"
}

# Ports of node I (1-based): PLAINTEXT, CONTROLLER, SASL_PLAINTEXT (SCRAM), SSL,
# SASL_SSL (SCRAM), SASL_PLAINTEXT (OAUTHBEARER) = base + 10 (I - 1) + 0 .. 5.
port_plain() { echo $((PORT_BASE + 10 * ($1 - 1))); }
port_ctrl() { echo $((PORT_BASE + 10 * ($1 - 1) + 1)); }
port_sasl() { echo $((PORT_BASE + 10 * ($1 - 1) + 2)); }
port_ssl() { echo $((PORT_BASE + 10 * ($1 - 1) + 3)); }
port_sasl_ssl() { echo $((PORT_BASE + 10 * ($1 - 1) + 4)); }
port_oauth() { echo $((PORT_BASE + 10 * ($1 - 1) + 5)); }
node_ports() { # the client-facing and controller ports node I listens on
  port_plain "$1"; port_ctrl "$1"
  [[ $SASL == 1 ]] && port_sasl "$1"
  [[ $TLS == 1 ]] && port_ssl "$1"
  [[ $TLS == 1 && $SASL == 1 ]] && port_sasl_ssl "$1"
  [[ $OAUTH == 1 ]] && port_oauth "$1"
  true
}
join_addrs() { # join_addrs port_fn -> 127.0.0.1:p1,127.0.0.1:p2,...
  local fn=$1 i out=""
  for ((i = 1; i <= NODES; i++)); do out+="${out:+,}127.0.0.1:$($fn "$i")"; done
  echo "$out"
}

# Recorded state of the last `up` (key=value lines, no code is sourced).
state_get() { [[ -f $STATE_FILE ]] && sed -n "s/^$1=//p" "$STATE_FILE" | tail -n1 || true; }
load_state_settings() { # for down/status/logs/stop-node/start-node: use what `up` recorded
  local v
  v=$(state_get VERSION); [[ -n $v ]] && set_version "$v"
  v=$(state_get NODES); [[ -n $v ]] && NODES=$v
  v=$(state_get PORT_BASE); [[ -n $v ]] && PORT_BASE=$v
  v=$(state_get SASL); [[ -n $v ]] && SASL=$v
  v=$(state_get SASL_USER); [[ -n $v ]] && SASL_USER=$v
  v=$(state_get SASL_PASSWORD); [[ -n $v ]] && SASL_PASSWORD=$v
  if [[ -n $(state_get MODE) ]]; then # a state without them is a cluster without these listeners
    v=$(state_get TLS); TLS=${v:-0}
    v=$(state_get OAUTH); OAUTH=${v:-0}
  fi
  true
}

docker_ok() { command -v docker >/dev/null 2>&1 && timeout 20 docker info >/dev/null 2>&1; }

# ---------------------------------------------------------------- jars + helpers
file_hash() { cat "$@" | sha256sum | cut -c1-16; }

# Fetch the broker jars into $LIBS once (atomic: tmp dir + rename; marker inside).
ensure_jars() {
  local want t0 tmp n
  want=$(file_hash "$SCRIPT_DIR/pom.xml")
  if [[ -f $LIBS/.complete && $(cat "$LIBS/.complete") == "$want" ]]; then
    say "jar fetch: warm (cached in $LIBS)"
    return 0
  fi
  command -v mvn >/dev/null 2>&1 || die "mvn not found: Maven is needed once to fetch the Kafka $VERSION jars"
  t0=$(now_ms)
  mkdir -p "$CACHE_DIR"
  # leftovers of interrupted fetches (never used: only a renamed, marked dir counts)
  find "$CACHE_DIR" -maxdepth 1 -name 'libs.tmp.*' -mmin +30 -exec rm -rf {} + 2>/dev/null || true
  tmp=$(mktemp -d "$CACHE_DIR/libs.tmp.XXXXXX")
  say "jar fetch: cold, resolving org.apache.kafka:kafka_2.13:$VERSION from Maven Central ..."
  if ! (cd "$SCRIPT_DIR" && mvn -B -q -Dstyle.color=never -f pom.xml -Dkafka.version="$VERSION" \
      dependency:copy-dependencies -DoutputDirectory="$tmp" -DincludeScope=runtime) >"$tmp.log" 2>&1; then
    cat "$tmp.log" >&2
    rm -rf "$tmp" "$tmp.log"
    die "mvn dependency:copy-dependencies failed (network? KAFKA_VERSION=$VERSION?)"
  fi
  n=$(find "$tmp" -name '*.jar' | wc -l)
  [[ -f $tmp/kafka_2.13-$VERSION.jar && $n -gt 10 ]] || { rm -rf "$tmp"; die "jar fetch incomplete ($n jars in $tmp)"; }
  rm -f "$tmp.log"
  echo "$want" >"$tmp/.complete"
  rm -rf "$LIBS"
  if ! mv -T "$tmp" "$LIBS" 2>/dev/null; then # lost a race with a concurrent fetch
    rm -rf "$tmp"
    [[ -f $LIBS/.complete ]] || die "could not move jars into $LIBS"
  fi
  say "jar fetch: cold $(secs $(($(now_ms) - t0))) ($n jars, $(du -sh "$LIBS" | cut -f1) in $LIBS)"
}

# Compile the helper programs once per source version (saves the source launcher's ~1-2 s per call).
HELPERS=""
ensure_helpers() {
  local h tmp
  [[ -f $LIBS/.complete ]] || die "no Kafka jars in $LIBS (run: $PROG up)"
  # One directory per source hash, kept while in use: checkouts with different helper sources
  # (worktrees of other branches) share the cache and run at the same time, so only versions
  # unused for a day are pruned (deleting the others' at once broke their runs mid-way). The
  # legacy helpers-<hash> directories belong to older kafka.sh versions and are left to them.
  h=$(file_hash "$SCRIPT_DIR"/*.java)
  HELPERS=$CACHE_DIR/helper-classes/$h
  if [[ -f $HELPERS/.complete ]]; then
    touch "$HELPERS" 2>/dev/null || true
    return 0
  fi
  command -v "$JAVAC" >/dev/null 2>&1 || die "javac not found (a JDK 17+ is needed)"
  mkdir -p "$CACHE_DIR/helper-classes"
  tmp=$(mktemp -d "$CACHE_DIR/helper-classes/tmp.XXXXXX")
  "$JAVAC" -nowarn -cp "$LIBS/*" -d "$tmp" "$SCRIPT_DIR"/*.java || { rm -rf "$tmp"; die "javac of $SCRIPT_DIR/*.java failed"; }
  touch "$tmp/.complete"
  mv -T "$tmp" "$HELPERS" 2>/dev/null || rm -rf "$tmp"
  find "$CACHE_DIR/helper-classes" -mindepth 1 -maxdepth 1 ! -path "$HELPERS" -mmin +1440 -exec rm -rf {} + 2>/dev/null || true
}

run_helper() { # run_helper Class args...
  local cls=$1; shift
  # shellcheck disable=SC2086
  "$JAVA" $TOOL_JVM_OPTS -Drx.kafka.log.level=ERROR -cp "$HELPERS:$LIBS/*" "$cls" "$@"
}
run_helper_bg() { # like run_helper, in the background; HELPER_PID is the java pid itself
  local cls=$1 out=$2; shift 2
  # shellcheck disable=SC2086
  "$JAVA" $TOOL_JVM_OPTS -Drx.kafka.log.level=ERROR -cp "$HELPERS:$LIBS/*" "$cls" "$@" >"$out" 2>&1 &
  HELPER_PID=$!
}

check_java() {
  command -v "$JAVA" >/dev/null 2>&1 || die "java not found (Kafka $VERSION brokers need Java 17+)"
  local v
  v=$("$JAVA" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
  [[ ${v%%.*} =~ ^[0-9]+$ && ${v%%.*} -ge 17 ]] || die "Java 17+ is needed for the Kafka broker (found '$v')"
}

# ---------------------------------------------------------------- processes
node_dir() { echo "$DATA_DIR/n$1"; }
node_props() { echo "$DATA_DIR/n$1/server.properties"; }
node_log() { echo "$DATA_DIR/n$1/server.log"; }
pid_file() { echo "$DATA_DIR/n$1/kafka.pid"; }

is_our_broker() { # is_our_broker PID NODE: alive and running our kafka.Kafka with node N's properties
  local args
  args=$(ps -o args= -p "$1" 2>/dev/null) || return 1
  [[ $args == *"kafka.Kafka $(node_props "$2")"* ]]
}

node_pid() { # prints the pid of node N if it runs, else fails (and drops a stale pid file)
  local f pid
  f=$(pid_file "$1")
  [[ -f $f ]] || return 1
  pid=$(cat "$f" 2>/dev/null || true)
  if [[ $pid =~ ^[0-9]+$ ]] && is_our_broker "$pid" "$1"; then echo "$pid"; return 0; fi
  rm -f "$f"
  return 1
}

# Every broker JVM of this checkout, also ones whose pid file was lost.
all_our_pids() {
  # (pattern via the environment, so that awk's own command line does not match)
  ps -eo pid=,args= 2>/dev/null |
    PAT="kafka.Kafka $DATA_DIR/n" awk '$2 ~ /(^|\/)java$/ && index($0, ENVIRON["PAT"]) { print $1 }' || true
}

pid_alive() { # alive and not a zombie (an orphan is reaped by whatever pid 1 is; do not rely on it)
  kill -0 "$1" 2>/dev/null || return 1
  [[ $(ps -o stat= -p "$1" 2>/dev/null) != Z* ]]
}
wait_gone() { # wait_gone SECONDS PID...: wait until the processes are gone
  local end=$(($(date +%s) + $1)) p; shift
  for p in "$@"; do
    while pid_alive "$p"; do
      (($(date +%s) < end)) || { warn "pid $p is still there"; return 1; }
      sleep 0.1
    done
  done
}

port_busy() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }
port_owner() {
  command -v ss >/dev/null 2>&1 || return 0
  ss -ltnpH "sport = :$1" 2>/dev/null | sed -n 's/.*users:((\(.*\)))/\1/p' | head -n1
}

# stop_pids PID...: SIGTERM all at once, SIGKILL what is left after STOP_TIMEOUT s.
stop_pids() {
  local pids=("$@") deadline alive p
  ((${#pids[@]})) || return 0
  kill -CONT "${pids[@]}" 2>/dev/null || true # a frozen node (freeze-node) ignores SIGTERM until then
  kill -TERM "${pids[@]}" 2>/dev/null || true
  deadline=$(($(date +%s) + STOP_TIMEOUT))
  while :; do
    alive=()
    for p in "${pids[@]}"; do pid_alive "$p" && alive+=("$p"); done
    ((${#alive[@]})) || return 0
    if (($(date +%s) >= deadline)); then
      warn "still running after ${STOP_TIMEOUT}s, sending SIGKILL to ${alive[*]}"
      kill -KILL "${alive[@]}" 2>/dev/null || true
      wait_gone 10 "${alive[@]}" || true
      return 0
    fi
    sleep 0.2
  done
}

kill_started() { # on a failed start: leave nothing half-started behind
  if [[ -n $HELPER_PID ]]; then
    kill -KILL "$HELPER_PID" 2>/dev/null || true
    { wait "$HELPER_PID"; } 2>/dev/null || true
  fi
  ((${#STARTED_PIDS[@]})) || return 0
  warn "stopping the brokers this run started (${STARTED_PIDS[*]})"
  kill -KILL "${STARTED_PIDS[@]}" 2>/dev/null || true
  local i
  for ((i = 1; i <= NODES; i++)); do node_pid "$i" >/dev/null || true; done
  STARTED_PIDS=()
}
trap 'rc=$?; kill_started; exit $rc' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

print_log_tails() {
  local i f
  for ((i = 1; i <= NODES; i++)); do
    f=$(node_log "$i")
    [[ -f $f ]] || continue
    warn "----- last 40 lines of $f -----"
    tail -n 40 "$f" >&2 || true
  done
  warn "-----"
}

# ---------------------------------------------------------------- config
write_props() { # write_props I
  local i=$1 rf minisr parts listeners adv quorum
  rf=$((NODES >= 3 ? 3 : NODES)); minisr=$((rf > 1 ? rf - 1 : 1)); parts=$((NODES >= 3 ? 3 : 1))
  listeners="PLAINTEXT://127.0.0.1:$(port_plain "$i"),CONTROLLER://127.0.0.1:$(port_ctrl "$i")"
  adv="PLAINTEXT://127.0.0.1:$(port_plain "$i"),CONTROLLER://127.0.0.1:$(port_ctrl "$i")"
  if [[ $SASL == 1 ]]; then
    listeners+=",SASL_PLAINTEXT://127.0.0.1:$(port_sasl "$i")"
    adv+=",SASL_PLAINTEXT://127.0.0.1:$(port_sasl "$i")"
  fi
  local protomap="CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT" more=""
  if [[ $TLS == 1 ]]; then
    listeners+=",SSL://127.0.0.1:$(port_ssl "$i")"
    adv+=",SSL://127.0.0.1:$(port_ssl "$i")"
    protomap+=",SSL:SSL"
    if [[ $SASL == 1 ]]; then
      listeners+=",SASL_SSL://127.0.0.1:$(port_sasl_ssl "$i")"
      adv+=",SASL_SSL://127.0.0.1:$(port_sasl_ssl "$i")"
      protomap+=",SASL_SSL:SASL_SSL"
    fi
    more+="
# TLS (SSL and SASL_SSL listeners): PEM key + chain signed by the CA kafka.sh generated in
# $TLS_DIR; no client certificates
ssl.keystore.type=PEM
ssl.keystore.location=$TLS_DIR/broker.pem
ssl.client.auth=none
listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
"
  fi
  if [[ $OAUTH == 1 ]]; then
    listeners+=",OAUTH://127.0.0.1:$(port_oauth "$i")"
    adv+=",OAUTH://127.0.0.1:$(port_oauth "$i")"
    protomap+=",OAUTH:SASL_PLAINTEXT"
    more+="
# OAUTHBEARER on the OAUTH listener (SASL_PLAINTEXT), validated by Kafka's *unsecured* JWS
# validator (alg none, claims sub/iat/exp): for tests only. Sessions are re-authenticated
# (KIP-368) at the token's expiry at the latest, so an expired token that was never refreshed
# loses the connection.
listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER
listener.name.oauth.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub=\"broker\";
listener.name.oauth.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler
listener.name.oauth.oauthbearer.connections.max.reauth.ms=600000
"
  fi
  if ((NODES == 1)); then
    quorum="controller.quorum.bootstrap.servers=127.0.0.1:$(port_ctrl 1)"
  else
    local v="" n
    for ((n = 1; n <= NODES; n++)); do v+="${v:+,}$n@127.0.0.1:$(port_ctrl "$n")"; done
    quorum="controller.quorum.voters=$v"
  fi
  {
    cat <<EOF
# Generated by integration/kafka/kafka.sh for node $i of $NODES -- do not edit.
process.roles=broker,controller
node.id=$i
$quorum
listeners=$listeners
advertised.listeners=$adv
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=$protomap
log.dirs=$(node_dir "$i")/data

# SCRAM-SHA-512 on the SASL_PLAINTEXT listener; the user is created by 'format --add-scram'
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
$more

# topics: auto-creation stays on (broker default); tests should still create topics explicitly
auto.create.topics.enable=true
num.partitions=1
default.replication.factor=$rf
min.insync.replicas=$minisr
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=$parts
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$minisr
transaction.state.log.num.partitions=$parts
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$minisr
share.coordinator.state.topic.num.partitions=$parts

# groups: no initial join delay; KIP-848 (group.protocol=consumer) with short timeouts
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=3000
group.consumer.min.session.timeout.ms=3000
group.consumer.session.timeout.ms=6000
group.consumer.min.heartbeat.interval.ms=500
group.consumer.heartbeat.interval.ms=1000

# test-friendly: fast shutdown, faster fencing of a killed node, small memory
controlled.shutdown.enable=false
broker.heartbeat.interval.ms=1000
broker.session.timeout.ms=6000
log.cleaner.dedupe.buffer.size=33554432
EOF
    if [[ -n ${KAFKA_EXTRA_PROPS:-} ]]; then
      echo "# KAFKA_EXTRA_PROPS"
      tr ' ' '\n' <<<"$KAFKA_EXTRA_PROPS" | sed '/^$/d'
    fi
  } >"$(node_props "$i")"
}

# A throwaway CA and one broker certificate (SAN IP:127.0.0.1, DNS:localhost) for every node, in
# $TLS_DIR, new at every fresh `up`: ca.pem (clients' ssl.ca.location), broker.pem (PKCS#8 key +
# chain, the broker's PEM keystore), and untrusted-ca.pem, a second CA that signed nothing (for
# tests of a client that trusts the wrong CA).
make_tls() {
  local t0 d=$TLS_DIR
  t0=$(now_ms)
  rm -rf "$d"
  mkdir -p "$d"
  (
    cd "$d"
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -sha256 -subj "/CN=reactive-rdkafka test CA" \
      -keyout ca.key -out ca.pem
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -sha256 -subj "/CN=untrusted test CA" \
      -keyout untrusted-ca.key -out untrusted-ca.pem
    openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=127.0.0.1" -keyout broker.key -out broker.csr
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' >broker.ext
    openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 -sha256 \
      -extfile broker.ext -out broker.crt
    # Kafka's PEM keystore wants an unencrypted PKCS#8 key ("BEGIN PRIVATE KEY") before the chain
    openssl pkey -in broker.key -out broker.pk8
    cat broker.pk8 broker.crt ca.pem >broker.pem
    rm -f ca.key untrusted-ca.key broker.csr broker.ext broker.pk8 ca.srl
  ) >"$d/openssl.log" 2>&1 || { cat "$d/openssl.log" >&2; die "openssl could not generate the test CA/certificate in $d"; }
  grep -q 'BEGIN PRIVATE KEY' "$d/broker.pem" || die "$d/broker.pem has no PKCS#8 key (openssl too old?)"
  say "tls: CA + broker certificate for 127.0.0.1 in $d ($(secs $(($(now_ms) - t0))))"
}

# Each TLS listener completes a handshake that verifies the broker certificate against ca.pem
# (and the host name 127.0.0.1), as librdkafka will with enable.ssl.certificate.verification.
check_tls() {
  local i p out
  [[ $TLS == 1 ]] || return 0
  for ((i = 1; i <= NODES; i++)); do
    for p in $(port_ssl "$i") $([[ $SASL == 1 ]] && port_sasl_ssl "$i"); do
      if ! out=$(timeout 10 openssl s_client -connect "127.0.0.1:$p" -CAfile "$TLS_DIR/ca.pem" \
        -verify_ip 127.0.0.1 -verify_return_error -brief </dev/null 2>&1); then
        warn "$out"
        print_log_tails
        die "TLS handshake with 127.0.0.1:$p failed or the certificate did not verify against $TLS_DIR/ca.pem"
      fi
      say "  ready: TLS 127.0.0.1:$p ($(grep -m1 -o 'Protocol version: .*' <<<"$out" || echo handshake ok), certificate verified)"
    done
  done
}

new_cluster_id() { # same shape as kafka.tools.StorageTool random-uuid (22 chars base64url, no leading '-')
  local id
  while :; do
    id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
    [[ ${#id} == 22 && $id != -* ]] && { echo "$id"; return; }
  done
}

start_broker() { # start_broker I: launch node I in the background, record pid
  local i=$1 pid
  {
    echo "===== $(date '+%F %T') starting node $i: java $HEAP_OPTS ... kafka.Kafka $(node_props "$i")"
  } >>"$(node_log "$i")"
  # shellcheck disable=SC2086
  # (9<&-: the broker must not inherit the lock fd taken in main)
  nohup "$JAVA" $HEAP_OPTS $BROKER_JVM_OPTS -cp "$LIBS/*" kafka.Kafka "$(node_props "$i")" \
    </dev/null >>"$(node_log "$i")" 2>&1 9<&- &
  pid=$!
  disown "$pid" 2>/dev/null || true
  echo "$pid" >"$(pid_file "$i")"
  STARTED_PIDS+=("$pid")
}

check_ports_free() { # check_ports_free I...
  local i p owner bad=0
  for i in "$@"; do
    for p in $(node_ports "$i"); do
      if port_busy "$p"; then
        owner=$(port_owner "$p")
        warn "port 127.0.0.1:$p (node $i) is already in use${owner:+ by $owner}; it is not a broker of this checkout"
        bad=1
      fi
    done
  done
  ((bad == 0)) || die "free the port(s) above (another Kafka? an old run from another checkout?) or set KAFKA_PORT_BASE"
}

summary() {
  say "cluster id $(state_get CLUSTER_ID), $NODES node(s), Kafka $VERSION (jars), data+logs in $DATA_DIR"
  say "  bootstrap (PLAINTEXT):              $(join_addrs port_plain)"
  if [[ $SASL == 1 ]]; then
    say "  bootstrap (SASL_PLAINTEXT SCRAM-SHA-512): $(join_addrs port_sasl)  user=$SASL_USER password=$SASL_PASSWORD"
  fi
  if [[ $TLS == 1 ]]; then
    say "  bootstrap (SSL):                    $(join_addrs port_ssl)  ssl.ca.location=$TLS_DIR/ca.pem"
    [[ $SASL == 1 ]] &&
      say "  bootstrap (SASL_SSL SCRAM-SHA-512): $(join_addrs port_sasl_ssl)  user=$SASL_USER password=$SASL_PASSWORD"
  fi
  if [[ $OAUTH == 1 ]]; then
    say "  bootstrap (SASL_PLAINTEXT OAUTHBEARER, unsecured JWS): $(join_addrs port_oauth)"
  fi
  true
}

# ---------------------------------------------------------------- commands
cmd_up() {
  if [[ -n ${KAFKA_BROKERS:-} ]]; then
    say "KAFKA_BROKERS=$KAFKA_BROKERS is set: using that cluster, not starting one"
    return 0
  fi
  validate_settings
  case $KAFKA_MODE in
    docker) up_docker; return ;;
    jars) ;;
    auto)
      if ((NODES == 1)) && docker_ok && docker compose version >/dev/null 2>&1; then up_docker; return; fi
      ;;
    *) die "KAFKA_MODE must be auto, docker or jars (got '$KAFKA_MODE')" ;;
  esac
  up_jars
}

up_docker() {
  ((NODES == 1)) || die "the docker-compose path runs a single node; use KAFKA_MODE=jars for KAFKA_NODES=$NODES"
  [[ $PORT_BASE == 9092 ]] || die "KAFKA_PORT_BASE is not supported with docker compose; use KAFKA_MODE=jars"
  docker_ok || die "no Docker engine answers ('docker info' failed); unset KAFKA_MODE to use the Maven jars"
  docker compose version >/dev/null 2>&1 || die "'docker compose' (the Compose v2 plugin) is not installed"
  mkdir -p "$DATA_DIR"
  say "Docker engine found: docker compose -f $COMPOSE_FILE up -d --wait"
  local t0
  t0=$(now_ms)
  # state first, so that `logs`/`down` find the containers even if this fails
  printf 'MODE=docker\nNODES=1\nPORT_BASE=9092\nSASL=1\nSASL_USER=%s\nSASL_PASSWORD=%s\n' \
    "$SASL_USER" "$SASL_PASSWORD" >"$STATE_FILE"
  KAFKA_SASL_USER=$SASL_USER KAFKA_SASL_PASSWORD=$SASL_PASSWORD \
    docker compose -f "$COMPOSE_FILE" up -d --wait || die "docker compose up failed (see: $PROG logs)"
  say "start-to-ready (docker): $(secs $(($(now_ms) - t0)))"
  say "  bootstrap (PLAINTEXT): 127.0.0.1:9092   (SASL_PLAINTEXT SCRAM-SHA-512): 127.0.0.1:9094 user=$SASL_USER password=$SASL_PASSWORD"
}

up_jars() {
  local i running=() any=0 cid t0 t1 rc fpids=()
  check_java

  # Already running? Without explicit KAFKA_NODES/KAFKA_PORT_BASE/KAFKA_SASL/KAFKA_VERSION
  # the running cluster's settings are kept.
  for ((i = 1; i <= 9; i++)); do node_pid "$i" >/dev/null && running+=("$i"); done
  if ((${#running[@]})) || [[ -n $(all_our_pids) ]]; then
    any=1
    [[ -n ${KAFKA_NODES:-} || -z $(state_get NODES) ]] || NODES=$(state_get NODES)
    [[ -n ${KAFKA_PORT_BASE:-} || -z $(state_get PORT_BASE) ]] || PORT_BASE=$(state_get PORT_BASE)
    [[ -n ${KAFKA_SASL:-} || -z $(state_get SASL) ]] || SASL=$(state_get SASL)
    [[ -n ${KAFKA_TLS:-} || -z $(state_get TLS) ]] || TLS=$(state_get TLS)
    [[ -n ${KAFKA_OAUTH:-} || -z $(state_get OAUTH) ]] || OAUTH=$(state_get OAUTH)
    [[ -n ${KAFKA_VERSION:-} || -z $(state_get VERSION) ]] || set_version "$(state_get VERSION)"
  fi
  ensure_jars
  ensure_helpers
  if ((any)); then
    if [[ $(state_get NODES) == "$NODES" && $(state_get PORT_BASE) == "$PORT_BASE" && $(state_get SASL) == "$SASL" &&
      $(state_get TLS) == "$TLS" && $(state_get OAUTH) == "$OAUTH" &&
      $(state_get VERSION) == "$VERSION" && ${#running[@]} == "$NODES" ]] &&
      run_helper ClusterCheck --each --cluster-id "$(state_get CLUSTER_ID)" --nodes "$NODES" "$(join_addrs port_plain)" >/dev/null 2>&1; then
      say "already up and answering"
      summary
      return 0
    fi
    say "a previous cluster is (partly) running with other settings or not healthy: restarting it fresh"
    cmd_down_jars
  fi

  check_ports_free $(seq 1 "$NODES")

  # Fresh data directory (an empty cluster every `up`).
  mkdir -p "$DATA_DIR"
  rm -rf "$DATA_DIR"/n* "$STATE_FILE" "$TLS_DIR"
  [[ $TLS == 1 ]] && make_tls
  cid=$(new_cluster_id)
  for ((i = 1; i <= NODES; i++)); do
    mkdir -p "$(node_dir "$i")"
    write_props "$i"
  done

  # Format all nodes in parallel (one JVM each).
  t0=$(now_ms)
  local fmt_args=()
  ((NODES == 1)) && fmt_args+=(--standalone)
  [[ $SASL == 1 ]] && fmt_args+=(--add-scram "SCRAM-SHA-512=[name=$SASL_USER,password=$SASL_PASSWORD]")
  for ((i = 1; i <= NODES; i++)); do
    # shellcheck disable=SC2086
    "$JAVA" $TOOL_JVM_OPTS -cp "$LIBS/*" kafka.tools.StorageTool format -t "$cid" -c "$(node_props "$i")" \
      "${fmt_args[@]}" >"$(node_dir "$i")/format.log" 2>&1 &
    fpids+=($!)
  done
  rc=0
  for i in "${!fpids[@]}"; do
    if ! wait "${fpids[$i]}"; then
      rc=1
      warn "format of node $((i + 1)) failed:"
      cat "$(node_dir $((i + 1)))/format.log" >&2
    fi
  done
  ((rc == 0)) || die "kafka.tools.StorageTool format failed"
  echo "$cid" >"$DATA_DIR/cluster.id"
  printf 'MODE=jars\nVERSION=%s\nNODES=%s\nPORT_BASE=%s\nSASL=%s\nSASL_USER=%s\nSASL_PASSWORD=%s\nTLS=%s\nOAUTH=%s\nCLUSTER_ID=%s\n' \
    "$VERSION" "$NODES" "$PORT_BASE" "$SASL" "$SASL_USER" "$SASL_PASSWORD" "$TLS" "$OAUTH" "$cid" >"$STATE_FILE"
  t1=$(now_ms)
  say "format: $(secs $((t1 - t0))) (cluster id $cid, $NODES node(s))"

  # Start all nodes, then wait until each really answers with *this* cluster id.
  for ((i = 1; i <= NODES; i++)); do start_broker "$i"; done
  say "started node(s) ${STARTED_PIDS[*]}; waiting up to ${START_TIMEOUT}s for them to answer ..."
  wait_ready "$t1" "$(join_addrs port_plain)" "${STARTED_PIDS[@]}"
  check_tls
  STARTED_PIDS=()
  say "start-to-ready: $(secs $(($(now_ms) - t1))) ($NODES node(s))"
  summary
}

# wait_ready T0_MS PLAINTEXT_ADDRS PID...: one ClusterCheck JVM polls every node until it
# answers with the cluster id just formatted and all nodes (and SCRAM login works on the
# SASL listener); fails with the tails of the logs.
wait_ready() {
  local t0=$1 addrs=$2; shift 2
  local pids left out rc cid a saddrs="" sasl_args=()
  pids=$(IFS=,; echo "$*")
  cid=$(state_get CLUSTER_ID)
  if [[ $SASL == 1 ]]; then
    for a in ${addrs//,/ }; do saddrs+="${saddrs:+,}127.0.0.1:$((${a##*:} + 2))"; done
    sasl_args=(--user "$SASL_USER" --password "$SASL_PASSWORD" --sasl-addrs "$saddrs")
  fi
  left=$((START_TIMEOUT * 1000 - ($(now_ms) - t0)))
  ((left > 0)) || left=1000
  # in the background + wait, so that INT/TERM interrupt the wait at once (see the traps)
  run_helper_bg ClusterCheck "$DATA_DIR/check.out" --each --cluster-id "$cid" --nodes "$NODES" "${sasl_args[@]}" \
    --wait-ms "$left" --watch-pids "$pids" "$addrs"
  rc=0
  wait "$HELPER_PID" || rc=$?
  HELPER_PID=""
  out=$(cat "$DATA_DIR/check.out")
  rm -f "$DATA_DIR/check.out"
  if ((rc != 0)); then
    warn "$out"
    print_log_tails
    case $rc in
      3) die "the SASL_PLAINTEXT (SCRAM-SHA-512) listener rejected $SASL_USER" ;;
      4) die "a broker process exited during startup (see its log above)" ;;
      5) die "a different Kafka cluster answers on $addrs (not the one just formatted); is an old broker still running?" ;;
      *) die "cluster not ready within ${START_TIMEOUT}s (KAFKA_START_TIMEOUT)" ;;
    esac
  fi
  while IFS= read -r a; do say "  ready: $a"; done <<<"$out"
}

cmd_down() {
  if [[ -n ${KAFKA_BROKERS:-} ]]; then
    say "KAFKA_BROKERS=$KAFKA_BROKERS is set: external cluster, nothing to stop"
    return 0
  fi
  load_state_settings
  if [[ $(state_get MODE) == docker || $KAFKA_MODE == docker ]]; then
    if docker_ok; then
      say "docker compose -f $COMPOSE_FILE down -v"
      docker compose -f "$COMPOSE_FILE" down -v
    else
      warn "state says docker compose was used, but no Docker engine answers: nothing to stop there"
    fi
    rm -f "$STATE_FILE"
  fi
  cmd_down_jars
}

cmd_down_jars() {
  local i pids=() p t0
  for ((i = 1; i <= 9; i++)); do p=$(node_pid "$i") && pids+=("$p"); done
  for p in $(all_our_pids); do [[ " ${pids[*]} " == *" $p "* ]] || pids+=("$p"); done
  if ((${#pids[@]} == 0)); then
    say "no broker of this checkout is running"
    return 0
  fi
  t0=$(now_ms)
  stop_pids "${pids[@]}"
  for ((i = 1; i <= 9; i++)); do rm -f "$(pid_file "$i")"; done
  say "stopped broker pid(s) ${pids[*]} in $(secs $(($(now_ms) - t0)))"
}

cmd_reset() {
  if [[ -n ${KAFKA_BROKERS:-} ]]; then
    say "KAFKA_BROKERS=$KAFKA_BROKERS is set: cannot wipe an external cluster; nothing done"
    return 0
  fi
  load_state_settings # keep the recorded layout; an explicitly set KAFKA_* wins below
  # A cluster recorded before the TLS and OAUTHBEARER listeners existed gets them on a fresh start.
  [[ -n $(state_get TLS) ]] || TLS=1
  [[ -n $(state_get OAUTH) ]] || OAUTH=1
  if [[ $(state_get MODE) == docker ]]; then
    cmd_down
  else
    # the data is wiped anyway: SIGKILL instead of a graceful stop (3 nodes need ~7 s for that)
    local pids
    pids=$(all_our_pids | tr '\n' ' ')
    if [[ -n $pids ]]; then
      # shellcheck disable=SC2086
      kill -KILL $pids 2>/dev/null || true
      # shellcheck disable=SC2086
      wait_gone 10 $pids || true
      say "killed broker pid(s) $pids"
    fi
  fi
  rm -rf "$DATA_DIR"
  say "wiped $DATA_DIR"
  [[ -z ${KAFKA_VERSION:-} ]] || set_version "$KAFKA_VERSION"
  NODES=${KAFKA_NODES:-$NODES}
  PORT_BASE=${KAFKA_PORT_BASE:-$PORT_BASE}
  SASL=${KAFKA_SASL:-$SASL}
  SASL_USER=${KAFKA_SASL_USER:-$SASL_USER}
  SASL_PASSWORD=${KAFKA_SASL_PASSWORD:-$SASL_PASSWORD}
  TLS=${KAFKA_TLS:-$TLS}
  OAUTH=${KAFKA_OAUTH:-$OAUTH}
  cmd_up
}

cmd_status() {
  if [[ -n ${KAFKA_BROKERS:-} ]]; then
    say "KAFKA_BROKERS=$KAFKA_BROKERS is set: external cluster (not managed here)"
    if [[ -f $LIBS/.complete ]]; then ensure_helpers; run_helper ClusterCheck "$KAFKA_BROKERS"; fi
    return
  fi
  local mode i p up=0
  mode=$(state_get MODE)
  if [[ -z $mode ]]; then
    say "not started (no $STATE_FILE)"
    [[ -n $(all_our_pids) ]] && say "but broker processes of this checkout run: $(all_our_pids | tr '\n' ' ')(kafka.sh down)"
    return 3
  fi
  load_state_settings
  if [[ $mode == docker ]]; then
    say "mode: docker compose ($COMPOSE_FILE)"
    docker compose -f "$COMPOSE_FILE" ps
    return
  fi
  say "mode: jars (Kafka $(state_get VERSION)), $NODES node(s), cluster id $(state_get CLUSTER_ID)"
  for ((i = 1; i <= NODES; i++)); do
    if p=$(node_pid "$i"); then
      up=$((up + 1))
      say "  node $i: running pid $p rss $(($(ps -o rss= -p "$p" | tr -d ' ') / 1024))MiB  PLAINTEXT 127.0.0.1:$(port_plain "$i") CONTROLLER :$(port_ctrl "$i")$([[ $SASL == 1 ]] && echo " SASL_PLAINTEXT :$(port_sasl "$i")")$([[ $TLS == 1 ]] && echo " SSL :$(port_ssl "$i")")$([[ $TLS == 1 && $SASL == 1 ]] && echo " SASL_SSL :$(port_sasl_ssl "$i")")$([[ $OAUTH == 1 ]] && echo " OAUTHBEARER :$(port_oauth "$i")")"
    else
      say "  node $i: stopped  (log $(node_log "$i"))"
    fi
  done
  ((up > 0)) || return 3
  summary
  if [[ ! -f $LIBS/.complete ]]; then warn "no jars in $LIBS (other KAFKA_CACHE_DIR/KAFKA_VERSION?): cannot probe"; return 1; fi
  ensure_helpers
  run_helper ClusterCheck --cluster-id "$(state_get CLUSTER_ID)" --timeout-ms 3000 "$(join_addrs port_plain)" ||
    { warn "cluster does not answer"; return 1; }
  ((up == NODES)) || return 1
}

cmd_logs() {
  local node="" follow=0 lines=100 i files=()
  while (($#)); do
    case $1 in
      -f | --follow) follow=1 ;;
      -n) lines=${2:?}; shift ;;
      [0-9]*) node=$1 ;;
      *) die "usage: $PROG logs [N] [-f] [-n LINES]" ;;
    esac
    shift
  done
  if [[ -n ${KAFKA_BROKERS:-} ]]; then say "KAFKA_BROKERS is set: external cluster, no logs here"; return 0; fi
  if [[ $(state_get MODE) == docker ]]; then
    local f=()
    ((follow)) && f=(-f)
    docker compose -f "$COMPOSE_FILE" logs --tail "$lines" "${f[@]}"
    return
  fi
  load_state_settings
  if [[ -n $node ]]; then files=("$(node_log "$node")"); else
    for ((i = 1; i <= NODES; i++)); do files+=("$(node_log "$i")"); done
  fi
  for i in "${files[@]}"; do [[ -f $i ]] || die "no log $i (not started?)"; done
  if ((follow)); then exec tail -n "$lines" -F "${files[@]}"; fi
  tail -n "$lines" "${files[@]}"
}

need_local_node() { # need_local_node N
  [[ $(state_get MODE) == jars ]] || die "no local jar-mode cluster (run: $PROG up with jars); stop-node/start-node/freeze-node/thaw-node only work there"
  load_state_settings
  [[ ${1:-} =~ ^[0-9]+$ ]] && (($1 >= 1 && $1 <= NODES)) || die "node must be 1..$NODES"
}

cmd_stop_node() {
  local i=${1:-} p t0
  need_local_node "$i"
  if ! p=$(node_pid "$i"); then say "node $i is not running"; return 0; fi
  t0=$(now_ms)
  kill -KILL "$p"
  wait_gone 10 "$p" || true
  rm -f "$(pid_file "$i")"
  echo "===== $(date '+%F %T') node $i killed (SIGKILL) by kafka.sh stop-node" >>"$(node_log "$i")"
  say "node $i (pid $p) killed with SIGKILL in $(secs $(($(now_ms) - t0)))"
}

cmd_start_node() {
  local i=${1:-} t0
  need_local_node "$i"
  if node_pid "$i" >/dev/null; then say "node $i is already running"; return 0; fi
  check_java
  ensure_jars >/dev/null
  ensure_helpers
  check_ports_free "$i"
  t0=$(now_ms)
  start_broker "$i"
  say "node $i started (pid ${STARTED_PIDS[0]}); waiting up to ${START_TIMEOUT}s for it to answer ..."
  wait_ready "$t0" "127.0.0.1:$(port_plain "$i")" "${STARTED_PIDS[@]}"
  STARTED_PIDS=()
  say "node $i start-to-ready: $(secs $(($(now_ms) - t0)))"
}

cmd_freeze_node() { # SIGSTOP: the process keeps its sockets and answers nothing until thaw-node
  local i=${1:-} p
  need_local_node "$i"
  p=$(node_pid "$i") || die "node $i is not running"
  kill -STOP "$p"
  echo "===== $(date '+%F %T') node $i frozen (SIGSTOP) by kafka.sh freeze-node" >>"$(node_log "$i")"
  say "node $i (pid $p) frozen with SIGSTOP"
}

cmd_thaw_node() {
  local i=${1:-} p
  need_local_node "$i"
  p=$(node_pid "$i") || die "node $i is not running"
  kill -CONT "$p"
  echo "===== $(date '+%F %T') node $i thawed (SIGCONT) by kafka.sh thaw-node" >>"$(node_log "$i")"
  say "node $i (pid $p) thawed with SIGCONT"
}

# The Java helpers compiled and the jars they run on at hand.
helper_ready() {
  check_java
  ensure_jars >/dev/null
  ensure_helpers
}

# The bootstrap addresses of the cluster the helpers talk to: KAFKA_BROKERS, else the started one's.
cluster_addrs() {
  if [[ -n ${KAFKA_BROKERS:-} ]]; then
    echo "$KAFKA_BROKERS"
  else
    [[ -n $(state_get MODE) ]] || die "not started (run: $PROG up)"
    load_state_settings
    join_addrs port_plain
  fi
}

cmd_coordinator() { # the cluster's own answer (FindCoordinator) for group $1 (or, with --transactional-id, a transactional id)
  local group=${1:-} addrs flags=()
  if [[ $group == --transactional-id ]]; then flags=(--transactional-id); group=${2:-}; fi
  if [[ $group == --elect-preferred ]]; then flags=(--elect-preferred); group=""; fi
  [[ -n $group || ${flags[0]:-} == --elect-preferred ]] || die "usage: $PROG coordinator GROUP | $PROG txn-coordinator TXN_ID"
  helper_ready
  addrs=$(cluster_addrs) || exit 1
  if [[ -n $group ]]; then run_helper GroupCoordinator "${flags[@]}" "$addrs" "$group"; else run_helper GroupCoordinator "${flags[@]}" "$addrs"; fi
}

cmd_group_config() { # set group $1's dynamic configs (KEY=VALUE ...), as GroupConfig.java does
  local group=${1:-} addrs
  [[ -n $group && $# -ge 2 ]] || die "usage: $PROG group-config GROUP KEY=VALUE..."
  shift
  helper_ready
  addrs=$(cluster_addrs) || exit 1
  run_helper GroupConfig "$addrs" "$group" "$@"
}

cmd_smoke() { # KIP-848 consumer group round trip (+ the same over SASL/SCRAM)
  local addrs rf=1 topic="rx-it-smoke-$$"
  check_java
  ensure_jars >/dev/null
  ensure_helpers
  if [[ -n ${KAFKA_BROKERS:-} ]]; then
    addrs=$KAFKA_BROKERS
  else
    [[ -n $(state_get MODE) ]] || die "not started (run: $PROG up)"
    load_state_settings
    addrs=$(join_addrs port_plain)
    ((NODES >= 3)) && rf=3
  fi
  run_helper ConsumerGroupCheck --topic "$topic" --rf "$rf" "$addrs"
  if [[ -z ${KAFKA_BROKERS:-} && $SASL == 1 ]]; then
    run_helper ConsumerGroupCheck --topic "$topic-sasl" --rf "$rf" --user "$SASL_USER" --password "$SASL_PASSWORD" \
      "$(join_addrs port_sasl)"
  fi
}

lock() { # one mutating kafka.sh at a time per cluster (data directory; needs flock), so that the
  # clusters of suites running at once never wait on each other (a kill timed mid-revoke must land)
  command -v flock >/dev/null 2>&1 || return 0
  mkdir -p "$DATA_DIR"
  exec 9>>"$DATA_DIR/.lock"
  flock -w 300 9 || die "another kafka.sh holds the lock of $DATA_DIR for 300 s"
}

cmd_fetch() { # the jars and the compiled helpers, once, before clusters start at once
  check_java
  ensure_jars
  ensure_helpers
}

main() {
  local cmd=${1:-}
  (($#)) && shift
  case $cmd in fetch | up | down | reset | stop-node | start-node | freeze-node | thaw-node) lock ;; esac
  case $cmd in
    up) cmd_up ;;
    fetch) cmd_fetch ;;
    down) cmd_down ;;
    reset) cmd_reset ;;
    status) cmd_status ;;
    logs) cmd_logs "$@" ;;
    stop-node) cmd_stop_node "$@" ;;
    start-node) cmd_start_node "$@" ;;
    coordinator) cmd_coordinator "$@" ;;
    txn-coordinator) cmd_coordinator --transactional-id "$@" ;;
    elect-leaders) cmd_coordinator --elect-preferred ;;
    freeze-node) cmd_freeze_node "$@" ;;
    thaw-node) cmd_thaw_node "$@" ;;
    group-config) cmd_group_config "$@" ;;
    smoke) cmd_smoke ;;
    -h | --help | help) usage ;;
    *) usage >&2; exit 2 ;;
  esac
}

main "$@"
