#!/usr/bin/env bash
# Installs the machine packages changelake needs, only those missing (Debian/Ubuntu, as root or via sudo):
# MariaDB server (the local MySQL), sysbench (the demo's OLTP workload), Maven + Java (the Kafka broker),
# Chromium (the browser end-to-end test drives it headless through Playwright; no browser download),
# PostgreSQL (pyiceberg's SQL catalog shared by several workers) and a JDK (the Iceberg REST catalog's
# launcher, iceberg-rest/LoopbackRestCatalog.java, runs as a Java source file).
set -euo pipefail
missing=()
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server)
command -v sysbench >/dev/null 2>&1 || missing+=(sysbench)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v javac >/dev/null 2>&1 || missing+=(default-jdk-headless)
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
echo "installing: ${missing[*]}"
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "error: missing ${missing[*]} and no apt-get here; install them with your package manager" >&2; exit 1
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
