"""Development support shared by tests/, bench/ and tools/: a broker in a child process,
a raw-socket client, the fuzz engine and the attack harness. Not part of the wheel."""
