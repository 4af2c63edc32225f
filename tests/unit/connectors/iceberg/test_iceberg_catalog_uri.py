"""A SQL catalog URI is checked before a catalog is loaded (never created by accident)."""

import pytest

from changelake.connectors.errors import OptionValidationError
from changelake.connectors.iceberg import IcebergSinkOptions, open_catalog
from changelake.connectors.iceberg.catalog import validate_sql_catalog_uri


def test_missing_folder_is_refused_naming_option_and_value(tmp_path):
    uri = "sqlite:////no/such/dir/catalog.db"
    with pytest.raises(OptionValidationError) as info:
        open_catalog(IcebergSinkOptions.sql(uri, f"file://{tmp_path}/wh"))
    assert info.value.option == "catalog.properties.uri"
    assert f"'catalog.properties.uri' = '{uri}'" in str(info.value) and "'/no/such/dir' does not exist" in str(info.value)


def test_misspelt_scheme_is_refused_naming_option_and_value(tmp_path):
    with pytest.raises(OptionValidationError) as info:
        validate_sql_catalog_uri(f"sqlit:///{tmp_path}/c.db")
    assert "'catalog.properties.uri'" in str(info.value) and "unknown database scheme 'sqlit'" in str(info.value)


def test_password_is_hidden_and_good_uris_pass(tmp_path):
    validate_sql_catalog_uri(f"sqlite:///{tmp_path}/c.db")
    validate_sql_catalog_uri("sqlite:///:memory:")
    with pytest.raises(OptionValidationError) as info:
        validate_sql_catalog_uri("nosuchdb://user:s3cret@host/db")
    assert "s3cret" not in str(info.value)
