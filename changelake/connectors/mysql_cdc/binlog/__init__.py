"""Reading the binlog: the reader (library connection, process reader), event handling, the compiled row decoder, GTIDs, transactions, XA, heartbeats."""
