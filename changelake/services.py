"""Local services: a real Apache Kafka 4.x broker (KRaft, one node) and a real MariaDB server, and
for several writers of one lake (scale-out) a PostgreSQL server and Apache Iceberg's REST catalog.

Used alike by ``changelake services up|down|status|env``, the demo, the test fixtures and CI.

* Kafka: the broker's jars are fetched from Maven Central by Maven from ``kafka/pom.xml``
  (``mvn dependency:copy-dependencies``) into a cache folder, then run with the machine's Java on
  127.0.0.1 (one node acting as broker and controller).
* MariaDB: Debian's ``mariadb-server`` (installed by ``make`` when missing), started with its own
  data directory, ``log_bin``, ``binlog_format=ROW``, ``binlog_row_image=FULL``,
  ``binlog_row_metadata=FULL`` and a ``server_id``.

Each service keeps its files in ``<state_dir>/<service>/`` (pid file, data, logs, ports). ``up`` is
idempotent: a healthy server is reused, a dead one restarted. A service that cannot start raises
:class:`ServiceError` with one line saying what failed and how to fix it, after stopping whatever it
had started.

The MariaDB password of the local server is generated once and kept in
``<state_dir>/mariadb/password`` (mode 0600); it is printed only by ``services env``, for a shell.

Shared catalogs (started on demand: :class:`PostgresService`, :class:`IcebergRestService`):

* PostgreSQL: Debian's ``postgresql`` (``initdb`` + ``postgres`` of ``/usr/lib/postgresql/<v>/bin``),
  own data directory, listening on 127.0.0.1 only, for pyiceberg's SQL catalog
  (``postgresql+psycopg2://...``); run as the ``postgres`` account when started by root (PostgreSQL
  refuses to run as root).
* Iceberg REST catalog: Apache Iceberg's ``RESTCatalogAdapter`` and ``RESTCatalogServlet``
  (iceberg-core's test jar) on Jetty over a ``JdbcCatalog``, jars fetched by Maven from
  ``iceberg-rest/pom.xml`` like Kafka's, started by ``iceberg-rest/LoopbackRestCatalog.java``
  bound to 127.0.0.1 (Iceberg's own ``RESTCatalogServer`` binds every interface).

``changelake services up --catalog postgres --catalog rest`` starts them with the others
(:meth:`Services.up`), ``services env`` then also prints ``CHANGELAKE_POSTGRES_CATALOG_URI`` and
``CHANGELAKE_ICEBERG_REST_URI`` / ``CHANGELAKE_ICEBERG_REST_WAREHOUSE``, and ``services down`` stops
them; ports from ``CHANGELAKE_POSTGRES_PORT`` / ``CHANGELAKE_ICEBERG_REST_PORT`` (defaults 15432 /
18181).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ClassVar, Sequence

from changelake.errors import ChangelakeError
from changelake.state_dir import default_state_dir  # re-exported: callers of the services module use it

__all__ = [
    "ServiceError",
    "KafkaService",
    "MariaDBService",
    "PostgresService",
    "IcebergRestService",
    "Services",
    "CATALOGS",
    "POSTGRES_CATALOG_DATABASE",
    "default_state_dir",
    "free_port",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
KAFKA_POM = REPO_ROOT / "kafka" / "pom.xml"
ICEBERG_REST_POM = REPO_ROOT / "iceberg-rest" / "pom.xml"
ICEBERG_REST_LAUNCHER = REPO_ROOT / "iceberg-rest" / "LoopbackRestCatalog.java"


class ServiceError(ChangelakeError):
    """A local service could not be started or reached. The message says what to do."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _pid_alive(pid_file: Path) -> int | None:
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except OSError:
        return None
    # A zombie (exited child not yet reaped) is not alive.
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().split(")")[-1].split()[0] == "Z":
                return None
    except OSError:
        pass
    return pid


def _stop_pid(pid_file: Path, timeout_s: float = 30.0) -> None:
    pid = _pid_alive(pid_file)
    if pid is None:
        pid_file.unlink(missing_ok=True)
        return
    try:
        os.killpg(pid, signal.SIGTERM)
    except OSError:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and _pid_alive(pid_file):
        time.sleep(0.2)
    if _pid_alive(pid_file):
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    pid_file.unlink(missing_ok=True)


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _require_port_free(port: int, what: str, env_var: str) -> None:
    if _port_open(port):
        raise ServiceError(
            f"{what}: port 127.0.0.1:{port} is already taken by another program; "
            f"stop it or choose another port with {env_var}=<port>"
        )


def fetch_maven_jars(pom_path: Path, libs: Path, what: str, jars: str) -> Path:
    """``mvn dependency:copy-dependencies`` of ``pom_path`` into ``libs`` (once per pom content; a
    file lock keeps concurrent callers from fetching twice). Returns ``libs``.

    Raises:
        ServiceError: Maven is missing or cannot reach Maven Central (names ``what``).
    """
    import fcntl

    marker = libs / ".complete"
    pom = pom_path.read_text()
    if marker.exists() and marker.read_text() == pom:
        return libs
    if shutil.which("mvn") is None:
        raise ServiceError(f"{what}: Maven ('mvn') is not installed; install it with: apt-get install -y maven")
    libs.parent.mkdir(parents=True, exist_ok=True)
    with open(libs.parent / f".{libs.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists() and marker.read_text() == pom:
            return libs
        staging = libs.parent / f".{libs.name}-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        proc = subprocess.run(
            ["mvn", "-q", "-B", "-f", str(pom_path), "dependency:copy-dependencies", f"-DoutputDirectory={staging}"],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            detail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
            raise ServiceError(
                f"{what}: Maven could not fetch {jars} from Maven Central "
                f"({' | '.join(detail)}); check the network or the Maven proxy settings and retry"
            )
        (staging / ".complete").write_text(pom)
        shutil.rmtree(libs, ignore_errors=True)
        staging.rename(libs)
    return libs


# --------------------------------------------------------------------------------------------
# Kafka
# --------------------------------------------------------------------------------------------


#: The prefix of every server's command: coreutils' ``env`` (>= 8.31) resets SIGTERM and SIGINT to
#: their default disposition, then execs the server (same pid). An ignored signal stays ignored
#: across exec, and the launching process may ignore SIGTERM: Dagster's ``setup_interrupt_handlers``
#: gives SIGTERM the handler of SIGINT, which is SIG_IGN in a process that a non-interactive shell
#: started in the background. A JVM (Kafka, the REST catalog) whose SIGTERM is ignored installs no
#: handler for it (HotSpot's ``JVM_RegisterSignal``): :meth:`_LocalServer.stop` then waited its
#: 30 s and sent SIGKILL. ``Popen(restore_signals=True)`` resets only SIGPIPE, SIGXFZ and SIGXFSZ.
_DEFAULT_SIGNALS = ("env", "--default-signal=TERM,INT")


class _LocalServer:
    """What the local servers share: a ``home`` folder with their pid file and log, a TCP ``port``
    on 127.0.0.1; healthy = the recorded process is alive and the port accepts connections."""

    home: Path
    port: int
    _PID_NAME: ClassVar[str]
    _LOG_NAME: ClassVar[str]

    @property
    def pid_file(self) -> Path:
        return self.home / self._PID_NAME

    @property
    def log_file(self) -> Path:
        return self.home / self._LOG_NAME

    def is_healthy(self) -> bool:
        return _pid_alive(self.pid_file) is not None and _port_open(self.port)

    def stop(self) -> None:
        _stop_pid(self.pid_file)

    def _launch(self, args: list[str], what: str, ready: Callable[[], bool], timeout_s: float,
                output: Path | None = None, poll_s: float = 0.5) -> None:
        """Start ``args`` in its own session, with SIGTERM and SIGINT at their default disposition
        (:data:`_DEFAULT_SIGNALS`) and its output appended to ``output`` (default the log file),
        record its pid, and wait until ``ready()``.

        Raises:
            ServiceError: the process exited first, or was not ready within ``timeout_s`` seconds
                (then it is stopped); the message ends with the log's last lines.
        """
        with open(output or self.log_file, "ab") as out:
            proc = subprocess.Popen([*_DEFAULT_SIGNALS, *args], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        self.pid_file.write_text(str(proc.pid))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self.pid_file.unlink(missing_ok=True)
                raise ServiceError(f"{what} exited at start (code {proc.returncode}): {_tail(self.log_file)}")
            if ready():
                return
            time.sleep(poll_s)
        self.stop()
        raise ServiceError(f"{what} did not become ready within {timeout_s:.0f} s: {_tail(self.log_file)}")


def _jar_cache(libs_dir: Path | None, env_var: str, name: str) -> Path:
    """``libs_dir``, else ``$env_var``, else ``~/.cache/changelake/<name>``: where Maven's jars are kept."""
    return libs_dir or Path(os.environ.get(env_var, Path.home() / ".cache" / "changelake" / name))


@dataclass
class KafkaService(_LocalServer):
    """One Apache Kafka node (broker + KRaft controller) on 127.0.0.1.

    Attributes:
        home: folder for this broker's pid file, data and log.
        port: the PLAINTEXT listener port (clients' bootstrap).
        controller_port: the KRaft controller listener port.
        libs_dir: where the broker jars are cached (shared by every broker).
    """

    _PID_NAME: ClassVar[str] = "kafka.pid"
    _LOG_NAME: ClassVar[str] = "kafka.log"

    home: Path
    port: int = 19092
    controller_port: int = 19093
    libs_dir: Path | None = None
    heap: str = "768m"

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _libs(self) -> Path:
        return _jar_cache(self.libs_dir, "CHANGELAKE_KAFKA_LIBS", "kafka-libs")

    def fetch_jars(self) -> Path:
        """Fetch the broker jars with Maven into the cache (once; safe across concurrent callers).

        Raises:
            ServiceError: Maven is missing or cannot reach Maven Central.
        """
        return fetch_maven_jars(KAFKA_POM, self._libs(), "Kafka", "the broker jars")

    def start(self, timeout_s: float = 90.0) -> None:
        """Start the broker unless a healthy one runs; wait until it serves metadata."""
        if self.is_healthy():
            return
        self.stop()
        if shutil.which("java") is None:
            raise ServiceError("Kafka: Java is not installed; install it with: apt-get install -y default-jre-headless")
        _require_port_free(self.port, "Kafka", "CHANGELAKE_KAFKA_PORT")
        _require_port_free(self.controller_port, "Kafka controller", "CHANGELAKE_KAFKA_CONTROLLER_PORT")
        libs = self.fetch_jars()
        self.home.mkdir(parents=True, exist_ok=True)
        data = self.home / "data"
        props = self.home / "server.properties"
        props.write_text(
            "\n".join(
                [
                    "process.roles=broker,controller",
                    "node.id=1",
                    f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
                    f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
                    f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
                    "controller.listener.names=CONTROLLER",
                    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                    "inter.broker.listener.name=PLAINTEXT",
                    f"log.dirs={data}",
                    "num.partitions=1",
                    "offsets.topic.replication.factor=1",
                    "offsets.topic.num.partitions=4",
                    "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1",
                    "transaction.state.log.num.partitions=4",
                    "group.initial.rebalance.delay.ms=0",
                    # KIP-848 consumer groups: notice a dead member in 10 s (Kafka's default 45 s)
                    "group.consumer.min.session.timeout.ms=10000",
                    "group.consumer.session.timeout.ms=10000",
                    "group.consumer.min.heartbeat.interval.ms=1000",
                    "group.consumer.heartbeat.interval.ms=1000",
                    "auto.create.topics.enable=true",
                    "log.cleaner.backoff.ms=1000",
                    "",
                ]
            )
        )
        log4j = self.home / "log4j2.properties"
        log4j.write_text(
            "rootLogger.level=WARN\nrootLogger.appenderRef.stdout.ref=STDOUT\n"
            "appender.stdout.type=Console\nappender.stdout.name=STDOUT\n"
            "appender.stdout.layout.type=PatternLayout\nappender.stdout.layout.pattern=[%d] %p %m (%c)%n\n"
            "logger.kafka.name=kafka.server.KafkaRaftServer\nlogger.kafka.level=INFO\n"
        )
        classpath = f"{libs}/*"
        java = ["java", f"-Xmx{self.heap}", f"-Dlog4j2.configurationFile={log4j}", "-cp", classpath]
        if not (data / "meta.properties").exists():
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            fmt = subprocess.run(
                java + ["kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}", "-c", str(props)],
                capture_output=True,
                text=True,
            )
            if fmt.returncode != 0:
                raise ServiceError(f"Kafka: formatting the KRaft storage failed: {fmt.stderr.strip()[-300:]}")
        self._launch(java + ["kafka.Kafka", str(props)], "Kafka",
                     lambda: _port_open(self.port) and self._serves_metadata(), timeout_s)

    def _serves_metadata(self) -> bool:
        from confluent_kafka.admin import AdminClient

        from changelake.connectors.kafka_common import with_logger

        try:
            md = AdminClient(with_logger({"bootstrap.servers": self.bootstrap_servers})).list_topics(timeout=3)
            return bool(md.brokers)
        except Exception:
            return False


# --------------------------------------------------------------------------------------------
# MariaDB
# --------------------------------------------------------------------------------------------


@dataclass
class MariaDBService(_LocalServer):
    """A MariaDB server with row-based binlog, own data directory, on 127.0.0.1.

    Attributes:
        home: folder for data, binlogs, socket, pid file and error log.
        port: TCP port.
        user: the account created for changelake (all privileges, incl. replication).
    """

    _PID_NAME: ClassVar[str] = "mariadb.pid"
    _LOG_NAME: ClassVar[str] = "error.log"

    home: Path
    port: int = 13306
    user: str = "changelake"
    server_id: int = 1
    extra_args: tuple[str, ...] = ()

    @property
    def socket_path(self) -> Path:
        return self.home / "mysqld.sock"

    @property
    def password(self) -> str:
        """The generated password of ``user`` (kept in ``home/password``, mode 0600)."""
        path = self.home / "password"
        if not path.exists():
            self.home.mkdir(parents=True, exist_ok=True)
            path.write_text(secrets.token_urlsafe(18))
            path.chmod(0o600)
        return path.read_text().strip()

    @staticmethod
    def _binary(*names: str) -> str | None:
        for name in names:
            found = shutil.which(name) or (f"/usr/sbin/{name}" if Path(f"/usr/sbin/{name}").exists() else None)
            if found:
                return found
        return None

    def start(self, timeout_s: float = 60.0) -> None:
        """Start MariaDB unless a healthy one runs; create the user; wait until it accepts logins."""
        if self.is_healthy():
            return
        self.stop()
        mariadbd = self._binary("mariadbd", "mysqld")
        install_db = self._binary("mariadb-install-db", "mysql_install_db")
        if mariadbd is None or install_db is None:
            raise ServiceError(
                "MariaDB: the server is not installed; install it with: apt-get install -y mariadb-server"
            )
        _require_port_free(self.port, "MariaDB", "CHANGELAKE_MYSQL_PORT")
        self.home.mkdir(parents=True, exist_ok=True)
        datadir = self.home / "data"
        tmpdir = self.home / "tmp"  # its own: servers bootstrapping at once never meet in /tmp
        tmpdir.mkdir(exist_ok=True)
        if not (datadir / "mysql").exists():
            init = subprocess.run(
                [
                    install_db,
                    "--no-defaults",
                    f"--datadir={datadir}",
                    "--user=root",
                    "--auth-root-authentication-method=socket",
                    "--skip-test-db",
                    f"--tmpdir={tmpdir}",  # passed on to the bootstrap server
                ],
                capture_output=True,
                text=True,
            )
            if init.returncode != 0:
                shutil.rmtree(datadir, ignore_errors=True)
                errors = [line for line in (init.stderr + init.stdout).splitlines() if "ERROR" in line]
                raise ServiceError("MariaDB: initialising the data directory failed: "
                                   + ("; ".join(errors[:3]) or init.stderr.strip()[-300:]))
        args = [
            mariadbd,
            "--no-defaults",
            f"--datadir={datadir}",
            f"--port={self.port}",
            "--bind-address=127.0.0.1",
            f"--socket={self.socket_path}",
            f"--tmpdir={tmpdir}",
            f"--pid-file={self.home / 'mariadbd.pid'}",
            f"--log-error={self.log_file}",
            "--user=root",
            f"--server-id={self.server_id}",
            f"--log-bin={self.home / 'binlog' / 'mysql-bin'}",
            "--binlog-format=ROW",
            "--binlog-row-image=FULL",
            "--binlog-row-metadata=FULL",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_general_ci",
            "--skip-name-resolve",
            "--innodb-buffer-pool-size=256M",
            "--innodb-flush-log-at-trx-commit=2",
            "--sync-binlog=0",
            "--max-connections=500",
            *self.extra_args,  # later arguments win: tests use this to start a misconfigured server
        ]
        (self.home / "binlog").mkdir(exist_ok=True)
        self._launch(args, "MariaDB", self._accepts_connections, timeout_s, output=self.home / "mariadbd.out",
                     poll_s=0.3)

    def _accepts_connections(self) -> bool:
        if not (self.socket_path.exists() and _port_open(self.port)):
            return False
        try:
            self._ensure_user()
            return True
        except Exception:  # noqa: BLE001 - still starting: asked again
            return False

    def _ensure_user(self) -> None:
        import pymysql

        conn = pymysql.connect(unix_socket=str(self.socket_path), user="root", connect_timeout=3)
        try:
            with conn.cursor() as cur:
                # Account statements carry the password in clear text: keep them out of the binlog,
                # which every REPLICATION SLAVE / CDC reader can read.
                cur.execute("SET SESSION sql_log_bin = 0")
                for host in ("127.0.0.1", "localhost", "%"):
                    cur.execute("CREATE USER IF NOT EXISTS %s@%s IDENTIFIED BY %s", (self.user, host, self.password))
                    cur.execute("ALTER USER %s@%s IDENTIFIED BY %s", (self.user, host, self.password))
                    cur.execute("GRANT ALL PRIVILEGES ON *.* TO %s@%s WITH GRANT OPTION", (self.user, host))
            conn.commit()
        finally:
            conn.close()


# --------------------------------------------------------------------------------------------
# Shared catalogs (several writers of one lake)
# --------------------------------------------------------------------------------------------


def _postgres_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), key=lambda p: p.parts[-3])
    return str(versions[-1]) if versions else None


@dataclass
class PostgresService(_LocalServer):
    """A PostgreSQL server on 127.0.0.1 with its own data directory (pyiceberg's SQL catalog).

    Attributes:
        home: folder for data, socket, pid file and log.
        port: TCP port.
        user: the superuser (no password: trust authentication on 127.0.0.1 and the socket only).
    """

    _PID_NAME: ClassVar[str] = "postgres.pid"
    _LOG_NAME: ClassVar[str] = "postgres.log"

    home: Path
    port: int = 15432
    user: str = "postgres"

    def url(self, database: str = "postgres") -> str:
        """The SQLAlchemy URL of ``database`` (pyiceberg's ``catalog.properties.uri``)."""
        return f"postgresql+psycopg2://{self.user}@127.0.0.1:{self.port}/{database}"

    def _as_owner(self) -> list[str]:
        # PostgreSQL refuses to run as root: run it as the account Debian's package creates.
        return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def start(self, timeout_s: float = 60.0) -> None:
        """Start PostgreSQL unless a healthy one runs (initdb on first start); wait until it accepts
        connections. Raises ServiceError (not installed, port taken, start failed)."""
        if self.is_healthy():
            return
        self.stop()
        initdb, postgres = _postgres_bin("initdb"), _postgres_bin("postgres")
        if initdb is None or postgres is None:
            raise ServiceError("PostgreSQL: the server is not installed; install it with: apt-get install -y postgresql")
        _require_port_free(self.port, "PostgreSQL", "CHANGELAKE_POSTGRES_PORT")
        self.home.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.home, "postgres", "postgres")
            # the postgres account must reach its folder: add search (x, not read) permission on
            # the ancestors that lack it (e.g. a root-only temporary folder)
            for parent in self.home.resolve().parents:
                mode = parent.stat().st_mode
                if not mode & 0o001:
                    parent.chmod(mode | 0o001)
        data = self.home / "data"
        if not (data / "PG_VERSION").exists():
            init = subprocess.run(self._as_owner() + [initdb, "-D", str(data), "-U", self.user, "-A", "trust", "-E", "UTF8"],
                                  capture_output=True, text=True)
            if init.returncode != 0:
                shutil.rmtree(data, ignore_errors=True)
                raise ServiceError(f"PostgreSQL: initdb failed: {init.stderr.strip()[-300:]}")
        args = self._as_owner() + [
            postgres, "-D", str(data), "-p", str(self.port), "-c", "listen_addresses=127.0.0.1",
            "-c", f"unix_socket_directories={self.home}", "-c", "max_connections=200", "-c", "fsync=off",
        ]
        self._launch(args, "PostgreSQL", lambda: _port_open(self.port), timeout_s, poll_s=0.3)

    def create_database(self, name: str) -> str:
        """Create database ``name`` (a plain identifier) unless it exists; returns its URL."""
        import psycopg2

        if not name.replace("_", "").isalnum():
            raise ServiceError(f"PostgreSQL: database name {name!r} must be letters, digits and '_'")
        conn = psycopg2.connect(host="127.0.0.1", port=self.port, user=self.user, dbname="postgres")
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
                if cur.fetchone() is None:
                    cur.execute(f'CREATE DATABASE "{name}"')
        finally:
            conn.close()
        return self.url(name)



@dataclass
class IcebergRestService(_LocalServer):
    """Apache Iceberg's REST catalog on 127.0.0.1 over a JdbcCatalog (SQLite file in ``home``).

    Attributes:
        home: folder for the backend catalog file, the warehouse, pid file and log.
        port: HTTP port.
        libs_dir: where the jars are cached (default ``~/.cache/changelake/iceberg-rest-libs``).
    """

    _PID_NAME: ClassVar[str] = "rest.pid"
    _LOG_NAME: ClassVar[str] = "rest.log"

    home: Path
    port: int = 18181
    libs_dir: Path | None = None
    heap: str = "384m"

    @property
    def uri(self) -> str:
        """The catalog's URI (pyiceberg: ``catalog.properties.type: rest``, ``catalog.properties.uri``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def warehouse(self) -> str:
        return f"file://{self.home / 'warehouse'}"

    def _libs(self) -> Path:
        return _jar_cache(self.libs_dir, "CHANGELAKE_ICEBERG_REST_LIBS", "iceberg-rest-libs")

    def start(self, timeout_s: float = 90.0) -> None:
        """Start the REST catalog unless a healthy one runs; wait until it answers ``/v1/config``.
        Raises ServiceError (no Java, no Maven, port taken, start failed)."""
        if self.is_healthy():
            return
        self.stop()
        if shutil.which("java") is None:
            raise ServiceError("Iceberg REST catalog: Java is not installed; install it with: "
                               "apt-get install -y default-jdk-headless")
        _require_port_free(self.port, "Iceberg REST catalog", "CHANGELAKE_ICEBERG_REST_PORT")
        libs = fetch_maven_jars(ICEBERG_REST_POM, self._libs(), "Iceberg REST catalog", "the catalog's jars")
        (self.home / "warehouse").mkdir(parents=True, exist_ok=True)
        args = [
            "java", f"-Xmx{self.heap}", "-cp", f"{libs}/*", str(ICEBERG_REST_LAUNCHER), str(self.port),
            "catalog-impl=org.apache.iceberg.jdbc.JdbcCatalog", f"uri=jdbc:sqlite:{self.home / 'catalog.db'}",
            "jdbc.schema-version=V1", f"warehouse={self.warehouse}",
        ]
        self._launch(args, "Iceberg REST catalog", lambda: _port_open(self.port) and self._answers(), timeout_s)

    def _answers(self) -> bool:
        import urllib.request

        try:
            with urllib.request.urlopen(f"{self.uri}/v1/config", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False


# --------------------------------------------------------------------------------------------
# Both, with environment
# --------------------------------------------------------------------------------------------


#: ``services up --catalog NAME``: the shared catalogs a scale-out needs (see README "Scaling Pipeline 2 out").
CATALOGS = ("postgres", "rest")
#: PostgreSQL database holding pyiceberg's SQL catalog tables.
POSTGRES_CATALOG_DATABASE = "lake"


def _recorded_ports(path: Path) -> dict[str, int]:
    """The ports ``Services.up`` recorded in ``path`` (``{}`` when absent or unreadable: defaults apply)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, int) and not isinstance(v, bool)}


@dataclass
class Services:
    """The local Kafka and MariaDB of one state folder, plus the lake's default locations; on
    request (``up(catalogs=...)``) the shared catalogs: PostgreSQL for pyiceberg's SQL catalog and
    Apache Iceberg's REST catalog."""

    state_dir: Path
    kafka: KafkaService
    mariadb: MariaDBService
    postgres: PostgresService | None = None
    rest: IcebergRestService | None = None

    def _catalog(self, name: str) -> PostgresService | IcebergRestService:
        if name not in CATALOGS:
            raise ServiceError(f"unknown catalog {name!r}; choose one of {', '.join(CATALOGS)}")
        if name == "postgres":
            if self.postgres is None:
                self.postgres = PostgresService(home=self.state_dir / "postgres", port=free_port())
            return self.postgres
        if self.rest is None:
            self.rest = IcebergRestService(home=self.state_dir / "iceberg-rest", port=free_port())
        return self.rest

    def catalogs_up(self) -> list[str]:
        """The shared catalogs that ``up`` started and that still run."""
        try:
            listed = json.loads((self.state_dir / "services.json").read_text()).get("catalogs", [])
        except (OSError, ValueError):
            listed = []
        return [name for name in CATALOGS if name in listed and self._catalog(name).is_healthy()]

    @classmethod
    def local(cls, state_dir: Path | None = None) -> "Services":
        """The demo's services, files under ``state_dir``. Each port is CHANGELAKE_KAFKA_PORT /
        CHANGELAKE_KAFKA_CONTROLLER_PORT / CHANGELAKE_MYSQL_PORT when set, else the port the last
        ``up`` of this state folder used (``<state_dir>/services.json``), else 19092 / 19093 / 13306:
        services started on other ports are found again by every later command (``status``, ``env``,
        ``changelake check``, ``pipeline run``, ``dev``) without repeating the variables."""
        state = Path(state_dir or default_state_dir())
        recorded = _recorded_ports(state / "services.json")

        def port(env_var: str, key: str, default: int) -> int:
            return int(os.environ.get(env_var) or recorded.get(key) or default)

        return cls(
            state_dir=state,
            kafka=KafkaService(
                home=state / "kafka",
                port=port("CHANGELAKE_KAFKA_PORT", "kafka_port", 19092),
                controller_port=port("CHANGELAKE_KAFKA_CONTROLLER_PORT", "kafka_controller_port", 19093),
            ),
            mariadb=MariaDBService(home=state / "mariadb", port=port("CHANGELAKE_MYSQL_PORT", "mysql_port", 13306)),
            postgres=PostgresService(home=state / "postgres",
                                     port=port("CHANGELAKE_POSTGRES_PORT", "postgres_port", 15432)),
            rest=IcebergRestService(home=state / "iceberg-rest",
                                    port=port("CHANGELAKE_ICEBERG_REST_PORT", "iceberg_rest_port", 18181)),
        )

    @classmethod
    def ephemeral(cls, state_dir: Path) -> "Services":
        """Services on free ports in ``state_dir`` (for tests; never collides with the demo)."""
        return cls(
            state_dir=state_dir,
            kafka=KafkaService(home=state_dir / "kafka", port=free_port(), controller_port=free_port()),
            mariadb=MariaDBService(home=state_dir / "mariadb", port=free_port()),
        )

    def up(self, catalogs: Sequence[str] = ()) -> None:
        """Start Kafka and MariaDB (idempotent) and create the local lake's folder (the catalog
        refuses a URI whose folder does not exist); with ``catalogs`` (names of :data:`CATALOGS`)
        also those shared catalogs (PostgreSQL with the database :data:`POSTGRES_CATALOG_DATABASE`;
        the REST catalog), kept running by later ``up`` calls without them. On failure, stops what
        this call started and raises ServiceError (an unknown catalog name included)."""
        wanted = [self._catalog(name) for name in catalogs]  # unknown names fail before anything starts
        catalogs = list(dict.fromkeys([*self.catalogs_up(), *catalogs]))
        (self.state_dir / "lake").mkdir(parents=True, exist_ok=True)
        kafka_was_up = self.kafka.is_healthy()
        was_up = [service.is_healthy() for service in wanted]
        try:
            self.mariadb.start()
            self.kafka.start()
            for service in wanted:
                service.start()
            if self.postgres is not None and "postgres" in catalogs:
                self.postgres.create_database(POSTGRES_CATALOG_DATABASE)
        except BaseException:
            for service, up in zip(wanted, was_up):
                if not up:
                    service.stop()
            if not kafka_was_up:
                self.kafka.stop()
            self.mariadb.stop()
            raise
        ports: dict[str, object] = {"kafka_port": self.kafka.port, "kafka_controller_port": self.kafka.controller_port,
                                    "mysql_port": self.mariadb.port}
        if self.postgres is not None:
            ports["postgres_port"] = self.postgres.port
        if self.rest is not None:
            ports["iceberg_rest_port"] = self.rest.port
        ports["catalogs"] = catalogs
        (self.state_dir / "services.json").write_text(json.dumps(ports))

    def down(self) -> None:
        """Stop every service, the shared catalogs included."""
        for name in CATALOGS:
            self._catalog(name).stop()
        self.kafka.stop()
        self.mariadb.stop()

    def status(self) -> dict[str, str]:
        status = {
            "kafka": f"{'up' if self.kafka.is_healthy() else 'down'} {self.kafka.bootstrap_servers}",
            "mariadb": f"{'up' if self.mariadb.is_healthy() else 'down'} 127.0.0.1:{self.mariadb.port}",
        }
        try:
            listed = json.loads((self.state_dir / "services.json").read_text()).get("catalogs", [])
        except (OSError, ValueError):
            listed = []
        for name in (n for n in CATALOGS if n in listed):
            service = self._catalog(name)
            where = service.uri if isinstance(service, IcebergRestService) else f"127.0.0.1:{service.port}"
            status[name] = f"{'up' if service.is_healthy() else 'down'} {where}"
        return status

    def env(self) -> dict[str, str]:
        """The environment the rest of the project reads; a variable already set wins (so the same
        code runs against a user's own clusters)."""
        lake = self.state_dir / "lake"
        values = {
            "KAFKA_BOOTSTRAP_SERVERS": self.kafka.bootstrap_servers,
            "MYSQL_HOST": "127.0.0.1",
            "MYSQL_PORT": str(self.mariadb.port),
            "MYSQL_USER": self.mariadb.user,
            "MYSQL_PASSWORD": self.mariadb.password,
            "ICEBERG_CATALOG_URI": f"sqlite:///{lake / 'catalog.db'}",
            "ICEBERG_WAREHOUSE": f"file://{lake / 'warehouse'}",
        }
        up = self.catalogs_up()
        if "postgres" in up and self.postgres is not None:  # pyiceberg's SQL catalog on PostgreSQL
            values["CHANGELAKE_POSTGRES_CATALOG_URI"] = self.postgres.url(POSTGRES_CATALOG_DATABASE)
        if "rest" in up and self.rest is not None:  # Apache Iceberg's REST catalog (its own warehouse)
            values["CHANGELAKE_ICEBERG_REST_URI"] = self.rest.uri
            values["CHANGELAKE_ICEBERG_REST_WAREHOUSE"] = self.rest.warehouse
        return {k: os.environ.get(k, v) for k, v in values.items()}
