"""Where a broker with a data directory keeps what it must not lose."""
