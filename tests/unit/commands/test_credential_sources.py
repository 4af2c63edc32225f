"""On a refused login the CLI names where each credential came from, never its value."""

from __future__ import annotations

from cli._credentials import auth_hint, credential_sources


def test_literal_and_environment_credentials_are_told_apart(tmp_path, monkeypatch):
    monkeypatch.setenv("MYSQL_USER", "u")
    monkeypatch.delenv("KAFKA_PW", raising=False)
    path = tmp_path / "p.yaml"
    path.write_text("source: {type: mysql, username: '${MYSQL_USER}', password: hunter2, tables: d.t}\n"
                    "sink: {type: kafka, properties.sasl.password: '${KAFKA_PW}'}\n")
    assert credential_sources(path) == [
        "source.username: ${MYSQL_USER} from the environment (set)",
        "source.password: a literal in the YAML (it wins over the environment and the resources)",
        "sink.properties.sasl.password: ${KAFKA_PW} from the environment (not set)",
    ]
    hint = auth_hint(path, ["run_p: SourceError: (1045, \"Access denied for user 'u'@'localhost'\")"])
    assert hint[0].startswith("authentication failed") and "hunter2" not in "\n".join(hint)
    assert auth_hint(path, ["run_p: SourceError: table missing"]) == []
