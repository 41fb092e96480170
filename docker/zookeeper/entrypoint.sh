#!/bin/sh
# As zookeeper-entrypoint: write /conf/zoo.cfg from the environment, then run ZooKeeper
# (QuorumPeerMain) in the foreground as user zookeeper, logging to stdout.
#
#   ZOO_MY_ID                  this node's id (default 1), written to /data/myid
#   ZOO_SERVERS                the ensemble, space-separated, as the official image spells it:
#                              "server.1=zk1:2888:3888;2181 server.2=zk2:2888:3888;2181 ..."
#                              (unset: one standalone node)
#   ZOO_TICK_TIME              tickTime in ms (default 2000: sessions of 4 s to 40 s)
#   ZOO_4LW_COMMANDS_WHITELIST 4lw.commands.whitelist (default srvr,ruok,mntr; the health check sends srvr)
#   JVMFLAGS                   extra JVM flags, e.g. -Xmx256m
#
# As zkCli.sh: ZooKeeper's command-line client (ZooKeeperMain), e.g. `zkCli.sh ls /ledgers/available`
# (the server on localhost:2181 unless `-server host:port` comes first), logging errors only.
set -eu

classpath=/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar

log4j_properties() {  # $1: file, $2: the root logger's level, $3: a logger to quieten; to the console
    cat > "$1" <<LOG4J
log4j.rootLogger=$2, CONSOLE
log4j.logger.$3
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] %m%n
LOG4J
}

if [ "$(basename "$0")" = zkCli.sh ]; then
    # The client logs its own normal exit at ERROR.
    log4j_properties /tmp/zkcli-log4j.properties ERROR org.apache.zookeeper.util.ServiceUtils=OFF
    exec java -Dlog4j.configuration=file:/tmp/zkcli-log4j.properties -cp "$classpath" \
        org.apache.zookeeper.ZooKeeperMain "$@"
fi

conf=/conf/zoo.cfg
{
    echo "tickTime=${ZOO_TICK_TIME:-2000}"
    echo "initLimit=10"
    echo "syncLimit=5"
    echo "dataDir=/data"
    echo "clientPort=2181"
    echo "4lw.commands.whitelist=${ZOO_4LW_COMMANDS_WHITELIST:-srvr,ruok,mntr}"
    echo "admin.enableServer=false"
    echo "autopurge.purgeInterval=1"
    echo "autopurge.snapRetainCount=3"
    echo "quorumListenOnAllIPs=true"
    for server in ${ZOO_SERVERS:-}; do
        echo "$server"
    done
} > "$conf"
# Not one INFO line per health check (a four-letter word every 2 s).
log4j_properties /conf/log4j.properties INFO org.apache.zookeeper.server.NIOServerCnxn=WARN
echo "${ZOO_MY_ID:-1}" > /data/myid
chown -R zookeeper:zookeeper /data

# shellcheck disable=SC2086  # JVMFLAGS is a list of flags
exec setpriv --reuid=zookeeper --regid=zookeeper --init-groups \
    java ${JVMFLAGS:-} -Dlog4j.configuration=file:/conf/log4j.properties -cp "$classpath" \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$conf"
