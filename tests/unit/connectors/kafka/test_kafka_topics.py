"""Topic naming of the Kafka pipeline sink (topic > mapping > db.table)."""

from changelake.changelog.schema import TableId
from changelake.connectors.kafka.sink_options import parse_topic_mapping
from changelake.connectors.kafka.topics import TopicNamer

CUSTOMERS = TableId("kafka_test", "customers")
PRODUCTS = TableId("kafka_test", "products")


def test_default_topic_is_db_dot_table():
    assert TopicNamer(None, ()).topic_for(CUSTOMERS) == "kafka_test.customers"
    assert TopicNamer(None, ()).topic_for(TableId(None, "orders")) == "orders"


def test_mapping_first_match_wins_and_unmatched_falls_back():
    namer = TopicNamer(None, parse_topic_mapping(r"kafka_test.customers:customers;kafka_test.\.*:everything"))
    assert namer.topic_for(CUSTOMERS) == "customers"
    assert namer.topic_for(PRODUCTS) == "everything"
    assert namer.topic_for(TableId("other", "x")) == "other.x"


def test_topic_option_overrides_mapping():
    namer = TopicNamer("inventory", parse_topic_mapping("kafka_test.customers:customers"))
    assert namer.topic_for(CUSTOMERS) == "inventory"
